"""Learned absolute position embeddings (BERT, GPT-2): one trained vector per
position."""

from __future__ import annotations

import torch
from torch import nn

from companion import _checks


class LearnedPositionalEmbedding(nn.Module):
    """Adds a trained ``(max_len, dim)`` table to a batch of embeddings.

    Args:
        max_len: number of positions the table holds. A learned table has no row for
            position ``max_len`` or beyond, so longer inputs are refused.
        dim: number of features.
        init_std: standard deviation of the normal initialisation (0.02, as in BERT).

    ``forward(x)`` takes ``x`` of shape ``(batch, seq, dim)`` with ``seq <= max_len``
    and returns ``x + table[:seq]``.
    """

    def __init__(self, max_len: int, dim: int, *, init_std: float = 0.02):
        super().__init__()
        self.max_len = _checks.positive_int("max_len", max_len)
        self.dim = _checks.positive_int("dim", dim)
        init_std = _checks.real("init_std", init_std)
        if init_std < 0:
            raise ValueError(f"init_std must be non-negative, got {init_std}")
        self.table = nn.Parameter(torch.randn(self.max_len, self.dim) * init_std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq = _checks.sequence_fits("x", x, max_len=self.max_len, dim=self.dim)
        return x + self.table[:seq].to(x.dtype)  # (b, s, d) + (s, d)

    def extra_repr(self) -> str:
        return f"max_len={self.max_len}, dim={self.dim}"
