"""Relative position bias of T5 (Raffel et al. 2020): a learned scalar per head and
bucket.

Notation: ``h`` heads, ``q`` queries, ``k`` keys. ``relative_position = key - query``.
Small offsets get a bucket each; larger ones share logarithmically wider buckets up to
``max_distance``; everything farther falls into the last bucket of its direction.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from companion import _checks
from companion.attention import aligned_positions


def _bucket_args(
    bidirectional: bool, num_buckets: int, max_distance: int
) -> tuple[int, int, int]:
    if not isinstance(bidirectional, bool):
        raise TypeError(f"bidirectional must be True or False, got {bidirectional!r}")
    num_buckets = _checks.positive_int("num_buckets", num_buckets)
    max_distance = _checks.positive_int("max_distance", max_distance)
    if bidirectional and num_buckets % 2:
        raise ValueError(
            "num_buckets must be even when bidirectional (half for each direction), "
            f"got {num_buckets}"
        )
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    if per_direction < 2:
        raise ValueError(
            f"num_buckets={num_buckets} leaves fewer than 2 buckets per direction; use "
            "at least 4"
        )
    max_exact = per_direction // 2
    if max_distance <= max_exact:
        raise ValueError(
            f"max_distance={max_distance} must exceed the {max_exact} exact buckets "
            "per direction"
        )
    return num_buckets, max_distance, per_direction


def t5_bucket(
    relative_position: torch.Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> torch.Tensor:
    """Map ``key - query`` offsets to T5's bucket indices.

    With ``n = query - key`` (how far back the key is) and ``B`` buckets per direction
    (``num_buckets / 2`` if bidirectional, else ``num_buckets``), ``B / 2`` of them are
    exact (``n = 0 .. B/2 - 1``) and the rest cover ``B/2 .. max_distance``
    logarithmically. Bidirectional: keys *after* the query use buckets ``B .. 2B - 1``.
    Unidirectional: keys after the query share bucket 0 with offset 0 (a causal mask
    hides them anyway).

    Args:
        relative_position: integer tensor of any shape,
            ``key_position - query_position``.

    Returns:
        int64 tensor of the same shape with values in ``[0, num_buckets)``.
    """
    num_buckets, max_distance, per_direction = _bucket_args(
        bidirectional, num_buckets, max_distance
    )
    if not isinstance(relative_position, torch.Tensor):
        raise TypeError(
            "relative_position must be an integer torch.Tensor, got "
            f"{type(relative_position).__name__}"
        )
    if (
        relative_position.is_floating_point()
        or relative_position.is_complex()
        or relative_position.dtype == torch.bool
    ):
        raise TypeError(
            "relative_position must hold integer offsets, got dtype "
            f"{relative_position.dtype}"
        )
    n = -relative_position.long()
    bucket = torch.zeros_like(n)
    if bidirectional:
        bucket = bucket + (n < 0).long() * per_direction
        n = n.abs()
    else:
        n = n.clamp(min=0)
    max_exact = per_direction // 2
    # Offsets in [max_exact, max_distance) spread over the remaining buckets on a log
    # scale.
    log_ratio = torch.log(n.clamp(min=max_exact).double() / max_exact) / math.log(
        max_distance / max_exact
    )
    large = (max_exact + (log_ratio * (per_direction - max_exact)).long()).clamp(
        max=per_direction - 1
    )
    return bucket + torch.where(n < max_exact, n, large)


def clipped_relative_positions(
    q_len: int, k_len: int | None = None, *, max_distance: int
) -> torch.Tensor:
    """Shaw et al. (2018): ``clip(key - query, -K, K) + K``, an index into ``2K + 1``
    learned vectors.

    Offsets beyond ``K = max_distance`` in either direction share the outermost vector.
    The last query is aligned with the last key.

    Returns:
        int64 tensor ``(q_len, k_len)`` with values in ``[0, 2K]``.
    """
    queries, keys = aligned_positions(q_len, q_len if k_len is None else k_len)
    max_distance = _checks.positive_int("max_distance", max_distance)
    return (keys[None, :] - queries[:, None]).clamp(
        -max_distance, max_distance
    ) + max_distance


class T5RelativeBias(nn.Module):
    """Learned ``(h, q, k)`` bias from T5 buckets; a ``score_bias`` hook for attention.

    Args:
        num_heads: number of heads ``h``.
        bidirectional, num_buckets, max_distance: as in :func:`t5_bucket`.

    ``forward(q_len, k_len)`` returns ``(h, q_len, k_len)``; the last query is aligned
    with the last key. T5 computes it in the first layer and shares it with the others.
    :meth:`from_offsets` gives the bias of any ``key - query`` offsets, e.g. per batch
    row.
    """

    def __init__(
        self,
        num_heads: int,
        *,
        bidirectional: bool = True,
        num_buckets: int = 32,
        max_distance: int = 128,
    ):
        super().__init__()
        self.num_heads = _checks.positive_int("num_heads", num_heads)
        self.num_buckets, self.max_distance, _ = _bucket_args(
            bidirectional, num_buckets, max_distance
        )
        self.bidirectional = bidirectional
        self.bias = nn.Embedding(self.num_buckets, self.num_heads)

    def forward(self, q_len: int, k_len: int) -> torch.Tensor:
        queries, keys = aligned_positions(q_len, k_len, device=self.bias.weight.device)
        buckets = t5_bucket(
            keys[None, :] - queries[:, None],  # (q, k): key - query
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        return self.bias(buckets).permute(2, 0, 1)  # (q, k, h) -> (h, q, k)

    def from_offsets(self, relative_position: torch.Tensor) -> torch.Tensor:
        """The bias of given offsets: ``(..., q, k)`` of ``key - query`` ->
        ``(..., h, q, k)``.

        For a padded or packed batch, pass ``(b, q, k)`` offsets computed from each
        row's own position ids; ``forward(q_len, k_len)`` is the case ``keys - queries``
        of :func:`~companion.attention.aligned_positions`.
        """
        if (
            not isinstance(relative_position, torch.Tensor)
            or relative_position.ndim < 2
        ):
            raise ValueError(
                "relative_position must be an integer tensor (..., q, k) of key - "
                "query offsets, got "
                f"{getattr(relative_position,'shape',type(relative_position).__name__)}"
            )
        buckets = t5_bucket(
            relative_position.to(self.bias.weight.device),
            bidirectional=self.bidirectional,
            num_buckets=self.num_buckets,
            max_distance=self.max_distance,
        )
        return self.bias(buckets).movedim(-1, -3)  # (..., q, k, h) -> (..., h, q, k)
