"""A tiny decoder-only Transformer whose position scheme is a config value.

Notation: ``b`` batch, ``s`` sequence, ``D`` model width, ``V`` vocabulary.

The schemes come from the companion's own modules: absolute tables are added to (or
concatenated with) the token embeddings; T5 bias and ALiBi become one ``(h, q, k)``
bias, computed once per forward and passed to every layer's attention with the causal
mask in it; RoPE is the attention's ``qk_transform`` hook. ``"none"`` relies on the
causal mask alone. Attention runs in PyTorch's fused kernel (``keep_weights=False``).

A batch of sequences of different lengths (padded, or packed into one row) needs an
``attention_mask`` and ``position_ids`` (see :mod:`companion.batching`); then every
position is gathered per batch row: absolute rows ``table[position_ids]``, RoPE angles,
and the T5 or ALiBi bias from each row's own ``key - query`` positions,
``(b, h, q, k)``. Without either argument the forward is the plain one, unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from companion import _checks
from companion.alibi import alibi_slopes
from companion.attention import (
    KVCache,
    MultiHeadSelfAttention,
    aligned_positions,
    causal_mask,
)
from companion.batching import attention_allowed, position_ids_from_attention_mask
from companion.learned import LearnedPositionalEmbedding
from companion.relative import T5RelativeBias, _bucket_args
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
    # "add" puts positions on all D features; "concat" gives tokens D - position_dim
    # features and positions the other position_dim, so the width, and every layer after
    # it, is unchanged.
    combine: str = "add"
    position_dim: int = 16
    # Absolute tables need a row for every position the model will ever see, evaluation
    # included.
    max_len: int = 1024
    scale_embedding: bool = True
    dropout: float = 0.0
    mlp_ratio: int = 4
    rope_base: float = 10000.0
    # Standard deviation of a learned table's initial rows (BERT's 0.02).
    learned_init_std: float = 0.02
    # T5 as in the paper's proportions: 32 buckets up to offset 128, trained at L = 512,
    # so every bucket gets a gradient (the last one holds offsets 113 and up). At the
    # lab's L = 32, 16 causal buckets up to offset 16 do the same: offsets 0..14 get a
    # bucket each, and offsets 15..30 train the last one (the last token of a chunk
    # predicts nothing), which every longer offset shares.
    t5_num_buckets: int = 16
    t5_max_distance: int = 16
    # Add an absolute table's rows again before every block, not only to the input (the
    # variant the source articles say "did not help"); "add" only.
    positions_every_layer: bool = False
    # With position="rope": the indices of layers that get no positions at all (NoPE),
    # as Llama 4 and SmolLM3 leave every fourth layer; the other layers rotate.
    nope_layers: tuple[int, ...] = ()
    # With position="rope": the RoPE layers see only the last rope_window keys (offsets
    # 0 .. rope_window - 1), a sliding window as in Mistral's and Gemma 3's local layers
    # (Llama 4's chunks are blocks instead); NoPE layers see all. None: every layer sees
    # every earlier key.
    rope_window: int | None = None

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
        _checks.base("rope_base", self.rope_base)
        _bucket_args(False, self.t5_num_buckets, self.t5_max_distance)
        if self.dim % self.num_heads:
            raise ValueError(f"num_heads={self.num_heads} must divide dim={self.dim}")
        if self.position == "rope" and (self.dim // self.num_heads) % 2:
            raise ValueError(
                "rope needs an even head dimension, got dim / num_heads = "
                f"{self.dim // self.num_heads}"
            )
        if self.combine == "concat":
            if self.position not in ABSOLUTE:
                raise ValueError(
                    f"combine='concat' applies to absolute positions {ABSOLUTE}, not "
                    f"{self.position!r}"
                )
            _checks.even_int("position_dim", self.position_dim)
            if self.position_dim >= self.dim:
                raise ValueError(
                    f"position_dim={self.position_dim} must be smaller than "
                    f"dim={self.dim}"
                )
        if not isinstance(self.positions_every_layer, bool):
            raise TypeError(
                "positions_every_layer must be True or False, got "
                f"{self.positions_every_layer!r}"
            )
        if self.positions_every_layer and (
            self.position not in ABSOLUTE or self.combine != "add"
        ):
            raise ValueError(
                "positions_every_layer=True adds an absolute table before every "
                f"block: it needs position in {ABSOLUTE} and combine='add', got "
                f"{self.position!r} and {self.combine!r}"
            )
        layers = self.nope_layers
        if not isinstance(layers, tuple) or not all(
            type(i) is int and 0 <= i < self.num_layers for i in layers
        ):
            raise ValueError(
                "nope_layers must be a tuple of layer indices in [0, num_layers="
                f"{self.num_layers}), e.g. (1,); got {layers!r}"
            )
        if len(set(layers)) != len(layers):
            raise ValueError(f"nope_layers names a layer twice: {layers!r}")
        if layers and self.position != "rope":
            raise ValueError(
                "nope_layers removes RoPE from some layers: it needs position='rope', "
                f"got {self.position!r}"
            )
        if self.rope_window is not None:
            _checks.positive_int("rope_window", self.rope_window)
            if self.position != "rope":
                raise ValueError(
                    "rope_window limits what the RoPE layers see: it needs "
                    f"position='rope', got {self.position!r}"
                )
        if self.position == "sinusoidal" and self.combine == "add":
            _checks.even_int("dim (sinusoidal tables come in sin/cos pairs)", self.dim)


def _dropout(p: float) -> nn.Module:
    # nn.Dropout(0.0) still runs a kernel in training mode; skip it.
    return nn.Dropout(p) if p > 0 else nn.Identity()


class Block(nn.Module):
    """Pre-norm block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``."""

    def __init__(self, config: ModelConfig, qk_transform=None):
        super().__init__()
        self.norm1 = nn.LayerNorm(config.dim)
        self.attn = MultiHeadSelfAttention(
            config.dim, config.num_heads, qk_transform=qk_transform, keep_weights=False
        )
        self.norm2 = nn.LayerNorm(config.dim)
        self.mlp = nn.Sequential(
            nn.Linear(config.dim, config.mlp_ratio * config.dim),
            nn.GELU(),
            nn.Linear(config.mlp_ratio * config.dim, config.dim),
        )
        self.dropout = _dropout(config.dropout)

    def forward(
        self,
        x: torch.Tensor,
        *,
        bias=None,
        positions=None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        attended = self.attn(
            self.norm1(x),
            causal=bias is None,
            attn_bias=bias,
            positions=positions,
            cache=cache,
        )
        x = x + self.dropout(attended)
        return x + self.dropout(self.mlp(self.norm2(x)))


class TinyDecoder(nn.Module):
    """A causal language model: ``forward(tokens (b, s), *, attention_mask=None,
    position_ids=None, cache=None) -> logits (b, s, V)``.

    Decoding with a cache: ``cache = model.new_cache()``, then each call
    ``model(new_tokens, cache=cache)`` returns the logits of the new tokens only; their
    positions continue from the number of tokens the cache holds (see :class:`KVCache`).
    Padded and packed batches: see :meth:`forward`.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(
                f"config must be a ModelConfig, got {type(config).__name__}"
            )
        self.config = config
        token_dim = (
            config.dim - config.position_dim
            if config.combine == "concat"
            else config.dim
        )
        self.token = nn.Embedding(config.vocab_size, token_dim)
        nn.init.normal_(self.token.weight, std=token_dim**-0.5)
        self.embed_scale = math.sqrt(token_dim) if config.scale_embedding else 1.0
        self.position = self._absolute_positions(config)
        self.embed_dropout = _dropout(config.dropout)
        # T5's learned bias is computed once per forward and shared by every layer, as
        # in T5; ALiBi's slopes are fixed. Both become one (h, q, k) bias with the
        # causal mask in it.
        self.relative = None
        if config.position == "t5":
            self.relative = T5RelativeBias(
                config.num_heads,
                bidirectional=False,
                num_buckets=config.t5_num_buckets,
                max_distance=config.t5_max_distance,
            )
        if config.position == "alibi":
            self.register_buffer(
                "alibi_slopes",
                torch.from_numpy(alibi_slopes(config.num_heads)).float(),
                persistent=False,
            )
        self.blocks = nn.ModuleList(
            Block(config, qk_transform=self._rotary(config, layer=i))
            for i in range(config.num_layers)
        )
        self.norm = nn.LayerNorm(config.dim)
        self.head = nn.Linear(config.dim, config.vocab_size)

    @staticmethod
    def _absolute_positions(config: ModelConfig) -> nn.Module | None:
        if config.position not in ABSOLUTE:
            return None
        width = config.position_dim if config.combine == "concat" else config.dim
        if config.position == "sinusoidal":
            return SinusoidalPositionalEncoding(config.max_len, width)
        return LearnedPositionalEmbedding(
            config.max_len, width, init_std=config.learned_init_std
        )

    @staticmethod
    def _rotary(
        config: ModelConfig, layer: int = 0, **kwargs
    ) -> RotaryEmbedding | None:
        if config.position != "rope" or layer in config.nope_layers:
            return None
        return RotaryEmbedding(
            config.dim // config.num_heads, base=config.rope_base, **kwargs
        )

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def set_rope_scaling(
        self, scaling: dict | None, *, attention_scale: float = 1.0
    ) -> None:
        """Change how RoPE stretches (see :func:`companion.rope.rope_frequencies`);
        weights are kept.

        Keys already in a :class:`KVCache` stay rotated the old way: start a new cache.
        Layers in ``config.nope_layers`` stay without positions (and unscaled).
        """
        if self.config.position != "rope":
            raise ValueError(
                "set_rope_scaling needs a rope model, this one uses "
                f"{self.config.position!r}"
            )
        for i, block in enumerate(self.blocks):
            rotary = self._rotary(
                self.config, i, scaling=scaling, attention_scale=attention_scale
            )
            if rotary is not None:
                block.attn.qk_transform = rotary.to(self.device)

    def new_cache(self) -> list[KVCache]:
        """An empty cache for decoding: one :class:`KVCache` per layer."""
        return [KVCache() for _ in self.blocks]

    def _check_table(self, end: int) -> None:
        """Refuse positions ``>= max_len``: the table has no row for them."""
        rows = self.position.table.shape[0]
        if end > rows:
            why = ("a learned table has no rows it never trained"
                   if self.config.position == "learned"
                   else "the sinusoidal table was built with max_len rows")
            raise ValueError(
                f"positions up to {end - 1} need a table of {end} rows, but "
                f"max_len={rows}; build the model with a larger max_len ({why})"
            )

    def _add_positions(self, x: torch.Tensor, start: int) -> torch.Tensor:
        """Add (or append) the table's rows ``start .. start + s - 1`` to
        ``x (b, s, *)``."""
        table = self.position.table  # (max_len, width)
        end = start + x.shape[1]
        self._check_table(end)
        rows = table[start:end].to(x.dtype)  # (s, width)
        if self.config.combine == "concat":
            return torch.cat([x, rows.expand(x.shape[0], -1, -1)], dim=-1)
        return x + rows

    def _combine(self, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Add (or append) per-row table rows ``(b, s, width)`` to ``x (b, s, *)``."""
        if self.config.combine == "concat":
            return torch.cat([x, rows], dim=-1)
        return x + rows

    def _attention_bias(self, q_len: int, k_len: int) -> torch.Tensor | None:
        """T5 or ALiBi ``(h, q, k)`` bias plus the causal mask; None for the other
        schemes."""
        if self.config.position not in ("t5", "alibi"):
            return None
        if self.config.position == "alibi":
            queries, keys = aligned_positions(q_len, k_len, device=self.device)
            # (h, q, k)
            bias = -self.alibi_slopes[:, None, None] * (
                queries[:, None] - keys[None, :]
            )
        else:
            bias = self.relative(q_len, k_len)
        return bias + causal_mask(q_len, k_len, device=self.device)

    def _windowed(self, layer: int) -> bool:
        """Whether ``layer`` sees only the last ``config.rope_window`` keys."""
        return (
            self.config.rope_window is not None
            and layer not in self.config.nope_layers
        )

    def _window_bias(self, q_len: int, k_len: int) -> torch.Tensor | None:
        """The ``(q, k)`` mask of a RoPE layer with ``config.rope_window``: ``-inf`` on
        later keys and on keys ``rope_window`` or more tokens back; None without a
        window."""
        if self.config.rope_window is None:
            return None
        queries, keys = aligned_positions(q_len, k_len, device=self.device)
        far = queries[:, None] - keys[None, :] >= self.config.rope_window
        mask = causal_mask(q_len, k_len, device=self.device)
        return mask.masked_fill(far, float("-inf"))

    def _batch_bias(
        self,
        queries: torch.Tensor,
        keys: torch.Tensor,
        allowed: torch.Tensor,
        dtype: torch.dtype,
    ) -> torch.Tensor:
        """The additive ``(b, h or 1, q, k)`` bias of a batch: ``-inf`` where
        ``allowed`` is False, plus T5 or ALiBi from each row's ``key - query`` positions
        (``queries (b, q)``, ``keys (b, k)``)."""
        mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
        mask = mask.masked_fill(~allowed, float("-inf"))[:, None]  # (b, 1, q, k)
        if self.config.position not in ("t5", "alibi"):
            return mask
        offsets = keys[:, None, :] - queries[:, :, None]  # (b, q, k): key - query
        if self.config.position == "alibi":
            # -m (i - j), (b, h, q, k)
            bias = self.alibi_slopes[:, None, None] * offsets[:, None]
        else:
            bias = self.relative.from_offsets(offsets)  # (b, h, q, k)
        return bias.to(dtype) + mask

    def _batch_inputs(
        self, tokens: torch.Tensor, attention_mask, position_ids, start: int
    ):
        """Checked ``(allowed (b, q, k) bool, position_ids (b, s) int64)`` for
        :meth:`forward`."""
        (b, s), device = tokens.shape, tokens.device
        if attention_mask is None:
            allowed = attention_allowed(
                torch.ones(b, start + s, dtype=torch.bool, device=device), s
            )
        else:
            if not isinstance(attention_mask, torch.Tensor):
                raise TypeError(
                    "attention_mask must be a torch.Tensor, got "
                    f"{type(attention_mask).__name__}"
                )
            expected = {2: (b, start + s), 3: (b, s, start + s)}.get(
                attention_mask.ndim
            )
            if expected is None or tuple(attention_mask.shape) != expected:
                hint = (
                    "; with a cache it covers the cached tokens too (append a 1 per "
                    "new token)"
                    if start
                    else ""
                )
                raise ValueError(
                    "attention_mask must be (batch, cached + new tokens) = "
                    f"{(b, start + s)} of 0/1, or a bool (batch, new tokens, cached + "
                    f"new tokens) = {(b, s, start + s)}, got shape "
                    f"{tuple(attention_mask.shape)}{hint}"
                )
            allowed = attention_allowed(attention_mask.to(device), s)
        if position_ids is None:
            if attention_mask is not None and attention_mask.ndim == 2:
                return allowed, position_ids_from_attention_mask(attention_mask).to(
                    device
                )[:, -s:]
            return allowed, torch.arange(start, start + s, device=device).expand(b, s)
        if not isinstance(position_ids, torch.Tensor):
            kind = type(position_ids).__name__
            raise TypeError(
                f"position_ids must be an int64 torch.Tensor (batch, seq), not {kind}"
            )
        if (
            position_ids.is_floating_point()
            or position_ids.is_complex()
            or position_ids.dtype == torch.bool
        ):
            raise TypeError(
                f"position_ids must be integers, got dtype {position_ids.dtype}; "
                "convert with .long()"
            )
        if tuple(position_ids.shape) != (b, s):
            hint = (
                "; add a batch dimension with .unsqueeze(0)"
                if position_ids.ndim == 1
                else ""
            )
            raise ValueError(
                f"position_ids must have shape (batch, new tokens) = {(b, s)} like "
                f"tokens, got {tuple(position_ids.shape)}{hint}"
            )
        if int(position_ids.min()) < 0:
            raise ValueError(
                f"position_ids must be non-negative, got {int(position_ids.min())}"
            )
        return allowed, position_ids.to(device).long()

    def forward(
        self,
        tokens: torch.Tensor,
        *,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        cache: list[KVCache] | None = None,
    ) -> torch.Tensor:
        """Logits ``(b, s, V)`` of ``tokens (b, s)``.

        Args:
            tokens: int64 ``(b, s)``, the new tokens.
            attention_mask: either ``(b, k)`` of 0/1 (int or bool), 1 for a real token
                and 0 for padding, covering the cached and the new tokens
                (``k = len(cache) + s``), as in ``transformers``; or a bool
                ``(b, s, k)`` of allowed (query, key) pairs, e.g.
                :func:`companion.batching.packed_attention_mask`. It is always combined
                with the causal mask, and every query may see its own key, so padding
                queries give finite logits (that no real token reads).
            position_ids: int64 ``(b, s)``, the positions of the new tokens. Default:
                with a 2-D mask, the last ``s`` columns of
                :func:`~companion.batching.position_ids_from_attention_mask` (what
                ``transformers`` does for generation); otherwise
                ``len(cache) .. len(cache) + s - 1`` in every row.
            cache: from :meth:`new_cache`; the new keys (with their positions) are
                appended.

        With neither ``attention_mask`` nor ``position_ids`` this is the plain forward,
        as fast as before; with either, positions and masks are built per batch row.
        Unlike ``transformers``, no document mask is inferred from restarting position
        ids: a packed row needs its ``attention_mask`` (without it, documents attend to
        each other).
        """
        if not isinstance(tokens, torch.Tensor) or tokens.ndim != 2:
            raise ValueError(
                "tokens must be a (batch, seq) tensor of ids, got "
                f"{getattr(tokens, 'shape', tokens)!r}"
            )
        if tokens.is_floating_point():
            raise TypeError(f"tokens must be integer ids, got dtype {tokens.dtype}")
        if cache is not None and (
            not isinstance(cache, list) or len(cache) != len(self.blocks)
        ):
            raise TypeError("cache must come from model.new_cache()")
        start = 0 if cache is None else len(cache[0])  # tokens already seen
        if attention_mask is not None or position_ids is not None:
            return self._forward_batch(
                tokens, attention_mask, position_ids, cache, start
            )
        s = tokens.shape[1]
        # (b, s, D) or (b, s, D - position_dim)
        x = self.token(tokens) * self.embed_scale
        if self.position is not None:
            x = self._add_positions(x, start)
        x = self.embed_dropout(x)
        bias = self._attention_bias(s, start + s)
        positions = (
            None
            if cache is None
            else torch.arange(start, start + s, device=tokens.device)
        )
        window = self._window_bias(s, start + s)
        for i, block in enumerate(self.blocks):
            if i and self.config.positions_every_layer:
                x = self._add_positions(x, start)
            x = block(
                x,
                bias=window if window is not None and self._windowed(i) else bias,
                positions=positions,
                cache=None if cache is None else cache[i],
            )
        return self.head(self.norm(x))  # (b, s, V)

    def _forward_batch(
        self, tokens, attention_mask, position_ids, cache, start
    ) -> torch.Tensor:
        """:meth:`forward` with a mask or position ids: positions and biases per batch
        row."""
        allowed, position_ids = self._batch_inputs(
            tokens, attention_mask, position_ids, start
        )
        # (b, s, D) or (b, s, D - position_dim)
        x = self.token(tokens) * self.embed_scale
        if self.position is not None:
            self._check_table(int(position_ids.max()) + 1)
            # (b, s, width): each row its own
            rows = self.position.table[position_ids].to(x.dtype)
            x = self._combine(x, rows)
        x = self.embed_dropout(x)
        # (b, k)
        keys = (
            position_ids
            if not start
            else torch.cat([cache[0].positions, position_ids], dim=-1)
        )
        # (b, h or 1, s, k)
        bias = self._batch_bias(position_ids, keys, allowed, x.dtype)
        window = None
        if self.config.rope_window is not None:
            near = keys[:, None, :] > position_ids[:, :, None] - self.config.rope_window
            window = self._batch_bias(position_ids, keys, allowed & near, x.dtype)
        for i, block in enumerate(self.blocks):
            if i and self.config.positions_every_layer:
                x = x + rows
            x = block(
                x,
                bias=window if window is not None and self._windowed(i) else bias,
                positions=position_ids,
                cache=None if cache is None else cache[i],
            )
        return self.head(self.norm(x))  # (b, s, V)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
