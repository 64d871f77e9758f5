"""A tiny decoder-only Transformer whose position scheme is a config value.

Notation: ``b`` batch, ``s`` sequence, ``D`` model width, ``V`` vocabulary.

The schemes come from the companion's own modules: absolute tables are added to (or
concatenated with) the token embeddings; T5 bias and ALiBi are ``score_bias`` hooks of
the attention; RoPE is its ``qk_transform`` hook. ``"none"`` relies on the causal mask alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from companion import _checks
from companion.alibi import ALiBi
from companion.attention import MultiHeadSelfAttention
from companion.learned import LearnedPositionalEmbedding
from companion.relative import T5RelativeBias
from companion.rope import RotaryEmbedding
from companion.sinusoidal import SinusoidalPositionalEncoding

SCHEMES = ("none", "sinusoidal", "learned", "t5", "rope", "alibi")
ABSOLUTE = ("sinusoidal", "learned")


@dataclass
class ModelConfig:
    vocab_size: int
    dim: int = 64
    num_layers: int = 2
    num_heads: int = 4
    position: str = "rope"
    # "add" puts positions on all D features; "concat" gives tokens D - position_dim features
    # and positions the other position_dim, so the width, and every layer after it, is unchanged.
    combine: str = "add"
    position_dim: int = 16
    # Absolute tables need a row for every position the model will ever see, evaluation included.
    max_len: int = 1024
    scale_embedding: bool = True
    dropout: float = 0.0
    mlp_ratio: int = 4

    def __post_init__(self):
        _checks.positive_int("vocab_size", self.vocab_size)
        _checks.positive_int("dim", self.dim)
        _checks.positive_int("num_layers", self.num_layers)
        _checks.positive_int("num_heads", self.num_heads)
        _checks.positive_int("max_len", self.max_len)
        _checks.positive_int("mlp_ratio", self.mlp_ratio)
        _checks.probability("dropout", self.dropout)
        _checks.choice("position", self.position, SCHEMES)
        _checks.choice("combine", self.combine, ("add", "concat"))
        if self.dim % self.num_heads:
            raise ValueError(f"num_heads={self.num_heads} must divide dim={self.dim}")
        if self.position == "rope" and (self.dim // self.num_heads) % 2:
            raise ValueError(f"rope needs an even head dimension, got dim / num_heads = {self.dim // self.num_heads}")
        if self.combine == "concat":
            if self.position not in ABSOLUTE:
                raise ValueError(f"combine='concat' applies to absolute positions {ABSOLUTE}, not {self.position!r}")
            _checks.even_int("position_dim", self.position_dim)
            if self.position_dim >= self.dim:
                raise ValueError(f"position_dim={self.position_dim} must be smaller than dim={self.dim}")
        if self.position == "sinusoidal" and self.combine == "add":
            _checks.even_int("dim (sinusoidal tables come in sin/cos pairs)", self.dim)


class _Concat(nn.Module):
    """``[x, table[:s]]``: appends position features to token features."""

    def __init__(self, table: nn.Module, dim: int):
        super().__init__()
        self.table, self.dim = table, dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        zeros = x.new_zeros(b, s, self.dim)
        return torch.cat([x, self.table(zeros)], dim=-1)  # table(0) is the table itself


class Block(nn.Module):
    """Pre-norm block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, config: ModelConfig, score_bias=None, qk_transform=None):
        super().__init__()
        self.norm1 = nn.LayerNorm(config.dim)
        self.attn = MultiHeadSelfAttention(config.dim, config.num_heads, score_bias=score_bias, qk_transform=qk_transform)
        self.norm2 = nn.LayerNorm(config.dim)
        self.mlp = nn.Sequential(
            nn.Linear(config.dim, config.mlp_ratio * config.dim),
            nn.GELU(),
            nn.Linear(config.mlp_ratio * config.dim, config.dim),
        )
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.dropout(self.attn(self.norm1(x), causal=True))
        return x + self.dropout(self.mlp(self.norm2(x)))


class TinyDecoder(nn.Module):
    """A causal language model: ``forward(tokens (b, s)) -> logits (b, s, V)``."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"config must be a ModelConfig, got {type(config).__name__}")
        self.config = config
        token_dim = config.dim - config.position_dim if config.combine == "concat" else config.dim
        self.token = nn.Embedding(config.vocab_size, token_dim)
        nn.init.normal_(self.token.weight, std=token_dim**-0.5)
        self.embed_scale = math.sqrt(token_dim) if config.scale_embedding else 1.0
        self.position = self._absolute_positions(config)
        self.embed_dropout = nn.Dropout(config.dropout)
        # T5 shares one learned bias across layers; ALiBi and RoPE have no parameters.
        score_bias = {"t5": lambda: T5RelativeBias(config.num_heads, bidirectional=False),
                      "alibi": lambda: ALiBi(config.num_heads)}.get(config.position, lambda: None)()
        self.blocks = nn.ModuleList(
            Block(config, score_bias=score_bias, qk_transform=self._rotary(config)) for _ in range(config.num_layers)
        )
        self.norm = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.vocab_size)

    @staticmethod
    def _absolute_positions(config: ModelConfig) -> nn.Module | None:
        if config.position not in ABSOLUTE:
            return None
        width = config.position_dim if config.combine == "concat" else config.dim
        table = (SinusoidalPositionalEncoding(config.max_len, width) if config.position == "sinusoidal"
                 else LearnedPositionalEmbedding(config.max_len, width))
        return _Concat(table, width) if config.combine == "concat" else table

    @staticmethod
    def _rotary(config: ModelConfig, **kwargs) -> RotaryEmbedding | None:
        return RotaryEmbedding(config.dim // config.num_heads, **kwargs) if config.position == "rope" else None

    def set_rope_scaling(self, scaling: dict | None, *, attention_scale: float = 1.0) -> None:
        """Change how RoPE stretches (see :func:`companion.rope.rope_frequencies`); weights are kept."""
        if self.config.position != "rope":
            raise ValueError(f"set_rope_scaling needs a rope model, this one uses {self.config.position!r}")
        for block in self.blocks:
            block.attn.qk_transform = self._rotary(self.config, scaling=scaling, attention_scale=attention_scale)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2:
            raise ValueError(f"tokens must be a (batch, seq) tensor of ids, got {getattr(tokens, 'shape', tokens)!r}")
        if tokens.is_floating_point():
            raise TypeError(f"tokens must be integer ids, got dtype {tokens.dtype}")
        x = self.token(tokens) * self.embed_scale  # (b, s, D) or (b, s, D - position_dim)
        if self.position is not None:
            x = self.position(x)
        x = self.embed_dropout(x)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))  # (b, s, V)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
