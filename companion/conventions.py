"""How other libraries write the same position schemes, and how to map them onto the companion.

Each function re-derives, in a few lines and in this package's notation, *what* a family of
libraries computes (not how their code is organised), so that the mapping in
:data:`CONVENTIONS` can be executed and tested. Shapes follow the companion: ``(..., s, d)``.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from companion import _checks
from companion.alibi import alibi_slopes
from companion.rope import rope_frequencies

# One row per library family: what a reader porting code must match.
CONVENTIONS = [
    {"scheme": "sinusoidal", "where": "Vaswani et al. 2017; Annotated Transformer; PyTorch tutorial",
     "companion": 'sinusoidal_table(n, d)', "layout": "interleaved", "offset": "positions from 0",
     "note": "the formula as written"},
    {"scheme": "sinusoidal", "where": "tensor2tensor get_timing_signal_1d; fairseq",
     "companion": 'sinusoidal_table(n, d, base=10000 ** (d / (d - 2)), layout="halves")',
     "layout": "halves", "offset": "fairseq: positions from padding_idx + 1",
     "note": "frequencies 10000^(-i / (d/2 - 1)): the last one is exactly 1/10000"},
    {"scheme": "RoPE", "where": "RoFormer; Meta's LLaMA reference code; GPT-J; torchtune",
     "companion": 'apply_rope(x, layout="interleaved")', "layout": "interleaved (pairs 2i, 2i+1)",
     "offset": "positions from 0", "note": "GPT-J rotates only the first rotary_dim features of a head"},
    {"scheme": "RoPE", "where": "GPT-NeoX; Hugging Face LLaMA (rotate_half)",
     "companion": 'apply_rope(x, layout="halves")', "layout": "halves (pairs i, i + d/2)",
     "offset": "positions from 0",
     "note": "GPT-NeoX rotates only a fraction of a head; converting Meta LLaMA weights permutes W_Q, W_K rows per head"},
    {"scheme": "T5 bias", "where": "T5 (Mesh TensorFlow, Hugging Face)",
     "companion": "t5_bucket(key - query)", "layout": "-", "offset": "relative = key - query",
     "note": "keys after the query use the upper half of the buckets"},
    {"scheme": "ALiBi", "where": "Press et al. reference code; BLOOM in Hugging Face",
     "companion": "alibi_key_bias(h, k) under a causal mask", "layout": "-",
     "offset": "bias m * j on key j, the same for every query",
     "note": "equals alibi_bias(h, q) after softmax, because each row differs by a constant"},
]


def _angles(positions: torch.Tensor, dim: int, base: float) -> torch.Tensor:
    theta = torch.from_numpy(rope_frequencies(dim, base=base))
    return positions.to(torch.float64)[:, None] * theta  # (s, d/2)


def rope_rotate_half(x: torch.Tensor, positions: torch.Tensor, *, base: float = 10000.0) -> torch.Tensor:
    """GPT-NeoX / Hugging Face LLaMA form: ``x * cos + rotate_half(x) * sin``.

    ``cos`` and ``sin`` hold each angle twice, ``[angles, angles]``, and
    ``rotate_half([x1, x2]) = [-x2, x1]`` for the two halves of the features.
    """
    angles = _angles(positions, x.shape[-1], base).repeat(1, 2).to(x.dtype)  # (s, d)
    x1, x2 = x.chunk(2, dim=-1)
    return x * angles.cos() + torch.cat((-x2, x1), dim=-1) * angles.sin()


def rope_rotate_every_two(x: torch.Tensor, positions: torch.Tensor, *, base: float = 10000.0) -> torch.Tensor:
    """GPT-J form: ``x * cos + rotate_every_two(x) * sin`` with each angle repeated in place.

    ``rotate_every_two`` maps every pair ``(a, b)`` to ``(-b, a)``.
    """
    angles = _angles(positions, x.shape[-1], base).repeat_interleave(2, dim=-1).to(x.dtype)  # (s, d)
    a, b = x[..., 0::2], x[..., 1::2]
    return x * angles.cos() + torch.stack((-b, a), dim=-1).flatten(-2) * angles.sin()


def rope_complex_pairs(x: torch.Tensor, positions: torch.Tensor, *, base: float = 10000.0) -> torch.Tensor:
    """RoFormer / Meta LLaMA form: adjacent features as one complex number, times ``e^{i m theta}``."""
    z = torch.view_as_complex(x.to(torch.float64).reshape(*x.shape[:-1], -1, 2).contiguous())
    angles = _angles(positions, x.shape[-1], base)
    rotated = z * torch.polar(torch.ones_like(angles), angles)
    return torch.view_as_real(rotated).flatten(-2).to(x.dtype)


def sinusoidal_fairseq(num_positions: int, dim: int, *, padding_idx: int | None = 1) -> np.ndarray:
    """fairseq / tensor2tensor table: sines then cosines, spacing ``ln(10000) / (d/2 - 1)``.

    Row ``r`` holds position number ``r``; fairseq numbers the tokens of a sequence
    ``padding_idx + 1, padding_idx + 2, ...`` and zeroes the padding row.

    Returns:
        float64 array ``(num_positions, dim)``.
    """
    num_positions = _checks.positive_int("num_positions", num_positions)
    dim = _checks.even_int("dim", dim)
    if dim < 4:
        raise ValueError(f"dim must be at least 4 for this spacing (it divides by d/2 - 1), got {dim}")
    half = dim // 2
    w = np.exp(-np.arange(half) * math.log(10000.0) / (half - 1))
    angles = np.arange(num_positions)[:, None] * w
    table = np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
    if padding_idx is not None:
        table[padding_idx] = 0.0
    return table


def alibi_bloom(num_heads: int, attention_mask: torch.Tensor) -> torch.Tensor:
    """BLOOM form: ``m * j`` with ``j`` the key's index among the non-padding tokens.

    Args:
        attention_mask: ``(b, k)`` of 1 (token) and 0 (padding).

    Returns:
        float64 ``(b, h, 1, k)``.
    """
    m = torch.from_numpy(alibi_slopes(num_heads))[None, :, None, None]   # (1, h, 1, 1)
    position = (attention_mask.cumsum(-1) - 1) * attention_mask             # (b, k)
    return m * position[:, None, None, :].to(torch.float64)
