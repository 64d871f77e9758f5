"""Checkers for the exercises of chapter 10 (porting between libraries)."""

from __future__ import annotations

import numpy as np
import torch

from companion.exercises._answers import (
    FLOAT32_RTOL,
    as_array,
    as_number,
    close,
    near_miss,
    resolution,
)
from companion.exercises._feedback import Feedback, checker, right, wrong
from companion.rope import layout_permutation, permute_qk_weights
from companion.sinusoidal import interleaved_to_halves

__all__ = [
    "porting_exercise_weights",
    "check_ported_query_weight",
    "check_fairseq_mapping",
]

_HEADS, _HEAD_DIM, _WIDTH = 4, 16, 32

# The ported weight only moves the seeded N(0, 1) entries around; float32 rounds them by
# 6e-8 relative, far inside these tolerances (any two rows of the weight differ by more
# than 0.1).
_WEIGHT_RTOL, _WEIGHT_ATOL = FLOAT32_RTOL, 1e-6
# fairseq's base 10000 ** (64 / 62): float32 gets it within ~1e-7 (pow or exp/log); the
# wrong base the checker names, 10000, is 25% off.
_BASE_RTOL = FLOAT32_RTOL


def porting_exercise_weights() -> torch.Tensor:
    """The query projection of exercise ch10-port-weights: ``(4 * 16, 32)``, interleaved
    RoPE."""
    g = torch.Generator().manual_seed(1010)
    return torch.randn(_HEADS * _HEAD_DIM, _WIDTH, dtype=torch.float64, generator=g)


def _as_matrix(answer) -> np.ndarray | str:
    """A float64 matrix (NaN allowed, for the checker's own message), or a message."""
    array = as_array(answer, finite=False)
    if isinstance(array, str) or array.ndim == 2:
        return array
    return f"expected a matrix, got an array of shape {array.shape}"


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return close(a, b, rtol=_WEIGHT_RTOL, atol=_WEIGHT_ATOL)


def _is_row_reordering(array: np.ndarray, original: np.ndarray) -> bool:
    """Whether the rows of ``array`` are those of ``original``, each once, in some order
    (each row compared within the tolerance, so that float32 rows count too, and rows
    rounded by hand to the decimals they give)."""
    atol = _WEIGHT_ATOL + resolution(array)
    close_rows = np.isclose(array[:, None, :], original[None, :, :],
                            rtol=_WEIGHT_RTOL, atol=atol).all(axis=-1)
    return bool(
        np.all(close_rows.sum(axis=0) == 1) and np.all(close_rows.sum(axis=1) == 1)
    )


@checker
def check_ported_query_weight(answer) -> Feedback:
    """Is ``answer`` the halves-layout version of :func:`porting_exercise_weights`?"""
    w = porting_exercise_weights()
    shape = tuple(w.shape)
    array = _as_matrix(answer)
    if isinstance(array, str) and "complex" in array:
        return wrong(array)
    if isinstance(array, str) or array.shape != shape:
        got = getattr(answer, "shape", type(answer).__name__)
        return wrong(
            f"expected a tensor or array of shape {shape}, like the weight you started "
            f"from; got {got}"
        )
    if not np.all(np.isfinite(array)):
        return wrong(
            "the answer contains NaN or infinity; a permutation only moves entries "
            "around"
        )
    original = w.numpy()
    expected = permute_qk_weights(w, _HEADS, to="halves").numpy()
    if _same(array, expected):
        return right(
            "Each head's rows now pair feature i with i + d/2, as rotate_half expects."
        )
    miss = near_miss(array, expected, rtol=_WEIGHT_RTOL, atol=_WEIGHT_ATOL)
    if miss:
        return wrong(miss)
    if _same(array, original):
        return wrong(
            "this is the weight unchanged; rotate_half pairs different features than "
            "the interleaved layout"
        )
    if _same(array, original[interleaved_to_halves(_HEADS * _HEAD_DIM)]):
        return wrong(
            "the rows were permuted across the whole matrix; RoPE pairs features "
            "within each head"
        )
    if _same(array, permute_qk_weights(w, _HEADS, to="interleaved").numpy()):
        return wrong(
            "this permutation goes the other way (halves to interleaved); invert it"
        )
    if _same(array, original[:, layout_permutation(_WIDTH)]):
        return wrong(
            "the columns were permuted; the rotation acts on the projection's outputs, "
            "its rows"
        )
    if _is_row_reordering(array, original):
        return wrong(
            "the rows are a permutation of the original rows, but not the one that "
            "maps pairs (2i, 2i+1) of a head to (i, i + d/2)"
        )
    return wrong(
        "the entries are not a reordering of the original rows; porting only moves rows"
    )


@checker
def check_fairseq_mapping(answer) -> Feedback:
    """Is ``answer == (10000 ** (64 / 62), 12)`` for token 10 of a fairseq model with
    d = 64?"""
    if isinstance(answer, (str, bytes, dict, set, frozenset)):
        return wrong("expected a pair (base, position), in that order")
    try:
        base, position = answer  # a tuple, a list, or an array or tensor of two numbers
    # a number, a 0-d array, three things, ...
    except (TypeError, ValueError, RuntimeError):
        return wrong("expected a pair (base, position)")
    value, number = as_number(base), as_number(position)
    if isinstance(value, str):
        return wrong(f"the base must be a real number: {value}")
    if isinstance(number, str) or number != round(number):
        return wrong(f"the position must be a whole number, got {position!r}")
    if not close(value, 10000 ** (64 / 62), rtol=_BASE_RTOL):
        miss = near_miss(value, 10000 ** (64 / 62), rtol=_BASE_RTOL)
        if miss:
            return wrong(miss.replace("more digits", "more digits of the base", 1))
        if close(value, 10000.0, rtol=_BASE_RTOL):
            return wrong(
                "the base 10000 gives the paper's spacing; fairseq spaces frequencies "
                "by ln(10000) / (d/2 - 1)"
            )
        return wrong(
            "write fairseq's frequency 10000^(-i / (d/2 - 1)) as base^(-2i / d) and "
            "solve for the base"
        )
    if int(number) == 10:
        return wrong("the base is right; but fairseq does not number tokens from 0")
    if int(number) != 12:
        return wrong(
            "the base is right; token t reads the row numbered t + padding_idx + 1"
        )
    return right(
        "fairseq's: the halves table, base 10000^(d/(d-2)), read two rows further on."
    )
