"""Multi-head self-attention with no position information of its own.

Notation: ``b`` batch, ``s`` sequence (``q`` queries, ``k`` keys), ``h`` heads,
``d`` head dimension, ``D = h * d`` model dimension.

Position schemes plug in at two places, so later chapters add them without
rewriting this module:

* ``score_bias(q_len, k_len)`` returns an additive bias broadcastable to
  ``(h, q, k)`` (T5 relative bias, ALiBi); it is added *after* the ``1/sqrt(d)``
  scaling.
* ``qk_transform(q, k)`` returns new ``(q, k)`` of shape ``(b, h, s, d)`` (RoPE).
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F

from companion import _checks

ScoreBias = Callable[[int, int], torch.Tensor]
QKTransform = Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]


def aligned_positions(
    q_len: int, k_len: int, *, device=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Positions of ``q_len`` queries and ``k_len`` keys, the last query aligned with
    the last key.

    Keys are ``0 .. k_len - 1`` and queries ``k_len - q_len .. k_len - 1`` (the newest
    tokens, as when queries are computed for the end of a cached sequence). The causal
    mask and every relative scheme in the companion use this one convention.

    Returns:
        int64 tensors ``(q_len,)`` and ``(k_len,)``.
    """
    q_len = _checks.positive_int("q_len", q_len)
    k_len = _checks.positive_int("k_len", k_len)
    if k_len < q_len:
        raise ValueError(f"k_len={k_len} must be at least q_len={q_len}")
    keys = torch.arange(k_len, device=device)
    return keys[k_len - q_len :], keys


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    bias: torch.Tensor | None = None,
    causal: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``softmax(q k^T / sqrt(d) + bias) v``, returning the output and the weights.

    Args:
        q: ``(b, h, q, d)``.
        k: ``(b, h, k, d)``.
        v: ``(b, h, k, d_v)``.
        bias: optional additive bias broadcastable to ``(b, h, q, k)``; its last
            dimension must be exactly ``k`` and the one before it ``q`` or 1 (a bias
            shared by every query).
        causal: if True, query ``i`` sees keys ``j <= i + (k - q)`` only (the last query
            is aligned with the last key).

    Returns:
        ``(output, weights)``: ``(b, h, q, d_v)`` and ``(b, h, q, k)``.
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        _checks.tensor(name, t, ndim=4, shape="(batch, heads, seq, head_dim)")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"q and k must have the same head_dim, got {q.shape[-1]} and {k.shape[-1]}"
        )
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(
            f"k and v must have the same number of positions, got {k.shape[-2]} and "
            f"{v.shape[-2]}"
        )
    q_len, k_len = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (b, h, q, k)
    if bias is not None:
        if not isinstance(bias, torch.Tensor):
            raise TypeError(f"bias must be a torch.Tensor, got {type(bias).__name__}")
        if (
            not 2 <= bias.ndim <= 4
            or bias.shape[-1] != k_len
            or bias.shape[-2] not in (1, q_len)
        ):
            raise ValueError(
                f"bias must end in (q, k) = ({q_len}, {k_len}) or (1, {k_len}) and "
                f"have 2 to 4 dimensions, got shape {tuple(bias.shape)}"
            )
        scores = scores + bias
    if causal:
        queries, keys = aligned_positions(q_len, k_len, device=q.device)
        # the future
        scores = scores.masked_fill(keys[None, :] > queries[:, None], float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights


class KVCache:
    """The keys and values one attention layer has seen so far, for decoding token by
    token.

    Keys are stored as the layer computed them, *after* its ``qk_transform``: a rotary
    key is rotated once, at its own position, and never again. Values are stored as they
    are. The keys' positions are stored too, one row per batch element, for schemes that
    compute a bias from query and key positions (T5, ALiBi) in a padded batch, where
    they differ by row.

    Attributes:
        k, v: ``(b, h, n, d)`` tensors of the ``n`` cached tokens, or None before the
            first.
        positions: int64 ``(b, n)`` positions of the cached keys, or None before the
            first.

    ``len(cache)`` is ``n``, the number of cached tokens (padding included).
    """

    def __init__(self):
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None
        self.positions: torch.Tensor | None = None

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.shape[-2]

    def append(
        self, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the new tokens' ``(b, h, s, d)`` keys and values; return all of them.

        ``positions`` are the new keys' positions, integer ``(s,)`` (shared by every
        row) or ``(b, s)``; by default they continue from ``len(self)``.
        """
        if self.k is not None and (
            k.shape[:2] != self.k.shape[:2] or k.shape[-1] != self.k.shape[-1]
        ):
            raise ValueError(
                f"new keys of shape {tuple(k.shape)} do not continue the cached "
                f"{tuple(self.k.shape)}; use the same batch, or a new cache"
            )
        b, s = k.shape[0], k.shape[-2]
        if positions is None:
            positions = torch.arange(len(self), len(self) + s, device=k.device)
        if (
            not isinstance(positions, torch.Tensor)
            or positions.is_floating_point()
            or positions.dtype == torch.bool
        ):
            raise TypeError(
                "positions must be an integer torch.Tensor, got "
                f"{getattr(positions, 'dtype', positions)}"
            )
        if positions.shape not in ((s,), (b, s)):
            raise ValueError(
                f"positions must have shape ({s},) or ({b}, {s}) to match the new "
                f"keys, got {tuple(positions.shape)}"
            )
        positions = positions.long().expand(b, s)
        self.k = k if self.k is None else torch.cat([self.k, k], dim=-2)
        self.v = v if self.v is None else torch.cat([self.v, v], dim=-2)
        self.positions = (
            positions
            if self.positions is None
            else torch.cat([self.positions, positions], dim=-1)
        )
        return self.k, self.v


def causal_mask(q_len: int, k_len: int, *, device=None) -> torch.Tensor:
    """Additive ``(q, k)`` mask: 0 where query ``i`` may see key ``j``, ``-inf`` on the
    future.

    Uses the alignment of :func:`aligned_positions` (the last query is the last key).
    """
    queries, keys = aligned_positions(q_len, k_len, device=device)
    future = keys[None, :] > queries[:, None]
    return torch.zeros(future.shape, device=device).masked_fill(future, float("-inf"))


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention; position information only through the two hooks.

    Args:
        dim: model dimension ``D``.
        num_heads: number of heads ``h``; must divide ``dim``.
        score_bias: optional callable ``(q_len, k_len) -> bias`` broadcastable to
            ``(h, q, k)``; if it is an ``nn.Module`` its parameters are trained with
            this one.
        qk_transform: optional callable ``(q, k) -> (q, k)`` on ``(b, h, s, d)``
            tensors; called as ``qk_transform(q, k, positions)`` when ``forward`` gets
            ``positions``.
        keep_weights: if True (the default), attention is computed step by step and
            ``last_weights`` holds the ``(b, h, q, k)`` weights of the last call
            (detached from the autograd graph), for plotting. If False, the fused
            ``torch.nn.functional.scaled_dot_product_attention`` computes the same
            output faster and ``last_weights`` stays None; models use it for training.

    ``forward(x, *, causal=False, attn_bias=None, positions=None, cache=None)`` takes
    ``x`` of shape ``(b, s, D)`` and returns ``(b, s, D)``. ``positions`` (int64
    ``(s,)``, or ``(b, s)`` with one row per batch element) are passed on to
    ``qk_transform``; with a :class:`KVCache` the new keys, values and positions are
    appended to it and the queries attend to every cached key too. ``attn_bias`` may be
    ``(b, h or 1, q, k)``, per row.
    """

    def __init__(
        self,
        dim: int,
        num_heads: int,
        *,
        score_bias: ScoreBias | None = None,
        qk_transform: QKTransform | None = None,
        keep_weights: bool = True,
    ):
        super().__init__()
        self.dim = _checks.positive_int("dim", dim)
        self.num_heads = _checks.positive_int("num_heads", num_heads)
        if dim % num_heads:
            raise ValueError(
                f"num_heads={num_heads} must divide dim={dim}; choose a divisor of "
                f"{dim}"
            )
        for name, hook in (("score_bias", score_bias), ("qk_transform", qk_transform)):
            if hook is not None and not callable(hook):
                raise TypeError(
                    f"{name} must be callable or None, got {type(hook).__name__}"
                )
        self.head_dim = dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.score_bias = score_bias
        self.qk_transform = qk_transform
        if not isinstance(keep_weights, bool):
            raise TypeError(f"keep_weights must be True or False, got {keep_weights!r}")
        self.keep_weights = keep_weights
        self.last_weights: torch.Tensor | None = None

    def _split_heads(self, t: torch.Tensor) -> torch.Tensor:
        b, s, _ = t.shape
        # (b, h, s, d)
        return t.view(b, s, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        x: torch.Tensor,
        *,
        causal: bool = False,
        attn_bias: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        cache: KVCache | None = None,
    ) -> torch.Tensor:
        _checks.tensor("x", x, ndim=3, shape="(batch, seq, dim)")
        if x.shape[-1] != self.dim:
            raise ValueError(
                f"x has {x.shape[-1]} features but the layer has dim={self.dim}"
            )
        b, s, _ = x.shape
        q, k, v = (self._split_heads(t) for t in self.qkv(x).chunk(3, dim=-1))
        if self.qk_transform is not None:
            q, k = (
                self.qk_transform(q, k)
                if positions is None
                else self.qk_transform(q, k, positions)
            )
        if cache is not None:
            k, v = cache.append(k, v, positions)  # (b, h, k, d): every token so far
        q_len, k_len = s, k.shape[-2]
        bias = None if self.score_bias is None else self.score_bias(q_len, k_len)
        if attn_bias is not None:
            bias = attn_bias if bias is None else bias + attn_bias
        if self.keep_weights:
            out, weights = scaled_dot_product_attention(
                q, k, v, bias=bias, causal=causal
            )
            # for inspection; keeping the graph would pin memory
            self.last_weights = weights.detach()
        else:
            out = self._fused(q, k, v, bias, causal)
        return self.out(out.transpose(1, 2).reshape(b, s, self.dim))  # (b, s, D)

    @staticmethod
    def _fused(q, k, v, bias, causal) -> torch.Tensor:
        """The same ``(b, h, q, d)`` output from PyTorch's fused kernel."""
        q_len, k_len = q.shape[-2], k.shape[-2]
        if bias is not None:
            if not isinstance(bias, torch.Tensor):
                raise TypeError(
                    f"bias must be a torch.Tensor, got {type(bias).__name__}"
                )
            if bias.shape[-1] != k_len or bias.shape[-2] not in (1, q_len):
                raise ValueError(
                    f"bias must end in (q, k) = ({q_len}, {k_len}) or (1, {k_len}), "
                    f"got {tuple(bias.shape)}"
                )
            bias = bias.to(q.dtype)
        if causal and q_len > 1:
            if bias is None and q_len == k_len:
                return F.scaled_dot_product_attention(q, k, v, is_causal=True)
            mask = causal_mask(q_len, k_len, device=q.device).to(q.dtype)
            bias = mask if bias is None else bias + mask
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
