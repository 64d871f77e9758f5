"""ALiBi: attention with linear biases (Press et al. 2022).

Notation: ``h`` heads, ``q`` queries, ``k`` keys. No position vector is added to the
input; each head ``j`` adds ``-m_j * distance`` to its attention scores, with head
slopes ``m`` forming a geometric sequence. The bias is *not* scaled by ``1/sqrt(d)``.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from companion import _checks
from companion.attention import aligned_positions


def _power_of_two_slopes(n: int) -> list[float]:
    start = 2.0 ** (-8.0 / n)
    return [start ** (j + 1) for j in range(n)]


def alibi_slopes(num_heads: int) -> np.ndarray:
    """Head slopes ``m``: for ``n`` a power of two,
    ``2^(-8/n), 2^(-16/n), ..., 2^(-8)``.

    For other head counts, the rule of the paper's reference code: the slopes for the
    largest power of two ``p < n``, followed by every other slope of ``2p`` heads
    (the 1st, 3rd, 5th, ...) until there are ``n``.

    Returns:
        float64 array ``(num_heads,)``, distinct values in ``[2^-8, 1)``; decreasing for
        a power of two, not sorted otherwise (the extra slopes come last).
    """
    num_heads = _checks.positive_int("num_heads", num_heads)
    p = 2 ** math.floor(math.log2(num_heads))
    slopes = _power_of_two_slopes(p)
    if p < num_heads:
        slopes += _power_of_two_slopes(2 * p)[0::2][: num_heads - p]
    return np.array(slopes, dtype=np.float64)



def alibi_bias(
    num_heads: int, q_len: int, k_len: int | None = None, *, causal: bool = True
) -> torch.Tensor:
    """The ``(h, q, k)`` bias ``-m_h * (i - j)`` (causal) or ``-m_h * |i - j|`` (not
    causal).

    Query ``i`` and key ``j`` are positions; with ``k_len > q_len`` the last query is
    aligned with the last key. Under a causal mask only ``j <= i`` is used, where the
    two forms agree; use ``causal=False`` for the symmetric bias of a bidirectional
    model.

    Returns:
        float64 tensor ``(num_heads, q_len, k_len)``.
    """
    queries, keys = aligned_positions(q_len, q_len if k_len is None else k_len)
    if not isinstance(causal, bool):
        raise TypeError(f"causal must be True or False, got {causal!r}")
    m = torch.from_numpy(alibi_slopes(num_heads))[:, None, None]  # (h, 1, 1)
    distance = (queries[:, None] - keys[None, :]).to(torch.float64)  # (q, k), i - j
    return -m * (distance if causal else distance.abs())


def alibi_key_bias(num_heads: int, k_len: int) -> torch.Tensor:
    """The cheaper form ``m_h * j`` most implementations use (the reference code, BLOOM,
    FlashAttention's causal path): one row, shared by every query.

    Under a causal mask it gives the same softmax as :func:`alibi_bias`, because row
    ``i`` differs from ``-m (i - j)`` by the constant ``m i``, and softmax ignores a
    constant added to a row. Without a mask it does not. Add it to scores held in
    float32: in bfloat16 the large entries ``m_h j`` of long rows lose the differences
    that softmax reads (chapter 9 measures it).

    Returns:
        float64 tensor ``(num_heads, 1, k_len)``.
    """
    k_len = _checks.positive_int("k_len", k_len)
    m = torch.from_numpy(alibi_slopes(num_heads))[:, None, None]
    return m * torch.arange(k_len, dtype=torch.float64)[None, None, :]


class ALiBi(nn.Module):
    """ALiBi as a ``score_bias`` hook for
    :class:`~companion.attention.MultiHeadSelfAttention`.

    ``forward(q_len, k_len)`` returns the ``(h, q, k)`` bias in the default dtype.
    """

    def __init__(self, num_heads: int, *, causal: bool = True):
        super().__init__()
        self.num_heads = _checks.positive_int("num_heads", num_heads)
        if not isinstance(causal, bool):
            raise TypeError(f"causal must be True or False, got {causal!r}")
        self.causal = causal

    def forward(self, q_len: int, k_len: int) -> torch.Tensor:
        return alibi_bias(self.num_heads, q_len, k_len, causal=self.causal).to(
            torch.get_default_dtype()
        )
