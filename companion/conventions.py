"""How other libraries write the same position schemes, and how to map them onto the
companion.

:data:`CONVENTIONS` has one row per family of libraries: what a reader porting code must
match, the companion call that computes the same numbers, and (``transformers``) the
function or module of Hugging Face ``transformers`` that chapter 10 and
``tests/test_transformers_agreement.py`` execute against that call. The functions below
write the other libraries' forms in the companion's notation, for readers without
``transformers``; the same tests check them against the library. Shapes follow the
companion: ``(..., s, d)``.
"""

from __future__ import annotations


import numpy as np
import torch

from companion import _checks
from companion.sinusoidal import tensor2tensor_timing_signal
from companion.alibi import alibi_slopes
from companion.rope import apply_rope, rope_frequencies
from companion.sinusoidal import LAYOUTS

# One row per library family. "note" is kept out of the rendered table (it is long).
CONVENTIONS = [
    {
        "scheme": "sinusoidal",
        "where": "paper; XLM (opt-in)",
        "layout": "interleaved",
        "offset": "from 0",
        "companion": "sinusoidal_table(n, d)",
        "transformers": "xlm: create_sinusoidal_embeddings",
        "note": (
            "the formula as written: sin at 2i, cos at 2i + 1; XLM, FlauBERT and "
            "DistilBERT build it only with their sinusoidal flag set (off by default)"
        ),
    },
    {
        "scheme": "sinusoidal",
        "where": "Marian",
        "layout": "halves",
        "offset": "from 0",
        "companion": 'sinusoidal_table(n, d, layout="halves")',
        "transformers": "MarianSinusoidalPositionalEmbedding",
        "note": "the paper's frequencies, all sines first, then all cosines",
    },
    {
        "scheme": "sinusoidal",
        "where": "fairseq; M2M100",
        "layout": "halves",
        "offset": "from padding_idx + 1",
        "companion": 'sinusoidal_table(n, d, base=b, layout="halves")',
        "transformers": "M2M100SinusoidalPositionalEmbedding",
        "note": (
            "b = 10000 ** (d / (d - 2)) gives the frequencies 10000^(-i / (d/2 - 1)), "
            "the last exactly 1/10000; the padding row is zero. tensor2tensor's "
            "get_timing_signal_1d is the same table numbered from 0, with no padding "
            "row. RoBERTa's and BART's learned tables keep the same offset of 2 "
            "(RoBERTa skips left pads as fairseq does; transformers' BART counts them)"
        ),
    },
    {
        "scheme": "RoPE",
        "where": (
            "RoFormer; Meta LLaMA; GPT-J; HF Llama 4; HF Cohere; HF GLM-4 (glm, glm4)"
        ),
        "layout": "interleaved",
        "offset": "from 0",
        "companion": 'apply_rope(x, pos, layout="interleaved")',
        "transformers": "gptj: apply_rotary_pos_emb; RoFormerSelfAttention",
        "note": (
            "GPT-J rotates only the first rotary_dim features of a head; Cohere's and "
            "GLM's functions are called rotate_half but pair neighbours (chapter 7 "
            "runs them): the layout is the model's, whatever the function is called"
        ),
    },
    {
        "scheme": "RoPE",
        "where": "GPT-NeoX; HF Llama; HF GLM-4.5 (glm4_moe)",
        "layout": "halves",
        "offset": "from 0",
        "companion": 'apply_rope(x, pos, layout="halves")',
        "transformers": "LlamaRotaryEmbedding + apply_rotary_pos_emb",
        "note": (
            "HF Llama means Llama 1 to 3 as transformers implements them; NeoX rotates "
            "a fraction rotary_pct of each head, as halves of that part; porting Meta "
            "LLaMA weights permutes the rows of W_Q per head and of W_K per KV head"
        ),
    },
    {
        "scheme": "RoPE scaling",
        "where": "config.json's rope_scaling",
        "layout": "-",
        "offset": "-",
        "companion": 'rope_frequencies(d, scaling={"type": ...})',
        "transformers": "ROPE_INIT_FUNCTIONS",
        "note": (
            'yarn ramps over the pair index (the paper\'s ramp over turns: "ramp": '
            '"rotations"); '
            "llama3 ramps over turns; dynamic grows with the sequence and reads "
            "max_position_embeddings; a rope_parameters dict with rope_type (every "
            "type, longrope and proportional too) goes to "
            "rope_config.from_rope_parameters"
        ),
    },
    {
        "scheme": "T5 bias",
        "where": "T5 (Mesh TF, HF)",
        "layout": "-",
        "offset": "key - query",
        "companion": "t5_bucket(key - query)",
        "transformers": "T5Attention._relative_position_bucket",
        "note": (
            "keys after the query use the upper half of the buckets; T5 does not "
            "divide scores by sqrt(d) (fold it into W_Q to run T5 weights in the "
            "companion)"
        ),
    },
    {
        "scheme": "ALiBi",
        "where": "Press et al. code; BLOOM",
        "layout": "-",
        "offset": "m * j on key j",
        "companion": "alibi_key_bias(h, k), causal",
        "transformers": "bloom: build_alibi_tensor",
        "note": (
            "equals alibi_bias(h, q) after softmax under a causal mask: each row "
            "differs by a constant; j counts non-padding keys"
        ),
    },
]


def rope_partial(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    rotary_dim: int,
    layout: str = "halves",
    base: float = 10000.0,
) -> torch.Tensor:
    """Partial rotary (GPT-NeoX ``rotary_pct``, GPT-J ``rotary_dim``): rotate the first
    ``rotary_dim`` features of each head, pass the others through unchanged.

    Inside the rotated part the pairs follow ``layout``: NeoX pairs
    ``(i, i + rotary_dim/2)`` (halves of the rotated part, not of the head), GPT-J
    ``(2i, 2i + 1)``. The speeds are those of a head of dimension ``rotary_dim``.

    Args:
        x: ``(..., s, d)`` queries or keys.
        positions: integer ``(s,)``; defaults to ``0 .. s-1``.
        rotary_dim: even, at most ``d``.

    Returns:
        Tensor of the same shape and dtype as ``x``.
    """
    if not isinstance(x, torch.Tensor) or x.ndim < 2:
        raise TypeError(
            f"x must be a torch.Tensor of shape (..., seq, dim), got {type(x).__name__}"
        )
    rotary_dim = _checks.even_int("rotary_dim", rotary_dim)
    if rotary_dim > x.shape[-1]:
        raise ValueError(
            f"rotary_dim={rotary_dim} must be at most the {x.shape[-1]} features of x"
        )
    layout = _checks.choice("layout", layout, LAYOUTS)
    rotated = apply_rope(x[..., :rotary_dim], positions, base=base, layout=layout)
    return torch.cat((rotated, x[..., rotary_dim:]), dim=-1)


def _angles(positions: torch.Tensor, dim: int, base: float) -> torch.Tensor:
    theta = torch.from_numpy(rope_frequencies(dim, base=base))
    return positions.to(torch.float64)[:, None] * theta  # (s, d/2)


def rope_rotate_half(
    x: torch.Tensor, positions: torch.Tensor, *, base: float = 10000.0
) -> torch.Tensor:
    """GPT-NeoX / Hugging Face LLaMA form: ``x * cos + rotate_half(x) * sin``.

    ``cos`` and ``sin`` hold each angle twice, ``[angles, angles]``, and
    ``rotate_half([x1, x2]) = [-x2, x1]`` for the two halves of the features.
    """
    angles = _angles(positions, x.shape[-1], base).repeat(1, 2).to(x.dtype)  # (s, d)
    x1, x2 = x.chunk(2, dim=-1)
    return x * angles.cos() + torch.cat((-x2, x1), dim=-1) * angles.sin()


def rope_rotate_every_two(
    x: torch.Tensor, positions: torch.Tensor, *, base: float = 10000.0
) -> torch.Tensor:
    """GPT-J form: ``x * cos + rotate_every_two(x) * sin`` with each angle repeated in
    place.

    ``rotate_every_two`` maps every pair ``(a, b)`` to ``(-b, a)``.
    """
    # (s, d)
    angles = (
        _angles(positions, x.shape[-1], base).repeat_interleave(2, dim=-1).to(x.dtype)
    )
    a, b = x[..., 0::2], x[..., 1::2]
    return x * angles.cos() + torch.stack((-b, a), dim=-1).flatten(-2) * angles.sin()


def rope_complex_pairs(
    x: torch.Tensor, positions: torch.Tensor, *, base: float = 10000.0
) -> torch.Tensor:
    """RoFormer / Meta LLaMA form: adjacent features as one complex number, times
    ``e^{i m theta}``."""
    z = torch.view_as_complex(
        x.to(torch.float64).reshape(*x.shape[:-1], -1, 2).contiguous()
    )
    angles = _angles(positions, x.shape[-1], base)
    rotated = z * torch.polar(torch.ones_like(angles), angles)
    return torch.view_as_real(rotated).flatten(-2).to(x.dtype)


def sinusoidal_fairseq(
    num_positions: int, dim: int, *, padding_idx: int | None = 1
) -> np.ndarray:
    """fairseq / tensor2tensor table: sines then cosines, spacing
    ``ln(10000) / (d/2 - 1)``.

    Row ``r`` holds position number ``r``; fairseq numbers the tokens of a sequence
    ``padding_idx + 1, padding_idx + 2, ...`` and zeroes the padding row.

    Returns:
        float64 array ``(num_positions, dim)``.
    """
    dim = _checks.even_int("dim", dim)
    if dim < 4:  # fairseq's get_embedding divides by d/2 - 1
        raise ValueError(
            f"dim must be at least 4 (fairseq divides by d/2 - 1), got {dim}"
        )
    table = tensor2tensor_timing_signal(num_positions, dim)
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
