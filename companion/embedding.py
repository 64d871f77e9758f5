"""The Transformer's input: ``X = sqrt(d) * E[tokens] + P``, then dropout once."""

from __future__ import annotations

import math

import torch
from torch import nn

from companion import _checks


class _Embedding(nn.Embedding):
    """``nn.Embedding`` whose ``reset_parameters`` draws from ``N(0, init_std**2)``, so
    that a model built on the ``meta`` device and materialised (``to_empty`` and then
    each module's ``reset_parameters``, as FSDP does) gets the companion's
    initialisation, not ``N(0, 1)``."""

    def __init__(self, num: int, dim: int, *, init_std: float):
        # nn.Embedding's own draw first, as before: same random stream
        self.init_std = None
        super().__init__(num, dim)
        self.init_std = init_std
        nn.init.normal_(self.weight, mean=0.0, std=init_std)

    def reset_parameters(self) -> None:
        if self.init_std is None:
            super().reset_parameters()
        else:
            nn.init.normal_(self.weight, mean=0.0, std=self.init_std)


class TokenEmbedding(nn.Module):
    """Token embedding, optionally scaled by ``sqrt(dim)``, plus positions, then
    dropout.

    Args:
        vocab_size: number of token ids.
        dim: number of features ``d``.
        position: a module mapping ``(batch, seq, dim) -> (batch, seq, dim)`` that adds
            positions (e.g.
            :class:`~companion.sinusoidal.SinusoidalPositionalEncoding`), or ``None``
            for no positions at all.
        dropout: dropout probability, applied once, to the sum (Vaswani et al. 2017,
            5.4).
        scale: multiply the token vectors by ``sqrt(dim)`` before adding positions.
        init_std: standard deviation of the token table at initialisation. The default,
            ``dim ** -0.5``, makes the scaled token vectors have unit standard
            deviation; PyTorch's own default for ``nn.Embedding`` is 1.0.

    ``forward(tokens)`` takes integer ids ``(batch, seq)`` and returns
    ``(batch, seq, dim)``.
    """

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        position: nn.Module | None = None,
        *,
        dropout: float = 0.1,
        scale: bool = True,
        init_std: float | None = None,
    ):
        super().__init__()
        self.vocab_size = _checks.positive_int("vocab_size", vocab_size)
        self.dim = _checks.positive_int("dim", dim)
        if position is not None and not isinstance(position, nn.Module):
            raise TypeError(
                f"position must be an nn.Module or None, got {type(position).__name__}"
            )
        if not isinstance(scale, bool):
            raise TypeError(f"scale must be True or False, got {scale!r}")
        std = self.dim**-0.5 if init_std is None else _checks.real("init_std", init_std)
        if std < 0:
            raise ValueError(f"init_std must be non-negative, got {std}")
        self.token = _Embedding(self.vocab_size, self.dim, init_std=std)
        self.position = position
        self.scale = scale
        self.dropout = nn.Dropout(_checks.probability("dropout", dropout))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if not isinstance(tokens, torch.Tensor):
            raise TypeError(
                "tokens must be a torch.Tensor of ids (batch, seq), got "
                f"{type(tokens).__name__}"
            )
        if tokens.ndim != 2:
            raise ValueError(
                f"tokens must have shape (batch, seq), got {tuple(tokens.shape)}"
            )
        if tokens.is_floating_point() or tokens.dtype == torch.bool:
            raise TypeError(f"tokens must be integer ids, got dtype {tokens.dtype}")
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(
                f"token ids must lie in [0, {self.vocab_size}), got min "
                f"{int(tokens.min())}, max {int(tokens.max())}"
            )
        x = self.token(tokens)  # (b, s, d)
        if self.scale:
            x = x * math.sqrt(self.dim)
        if self.position is not None:
            x = self.position(x)
        return self.dropout(x)
