"""Checkers for the exercises of chapter 10 (porting between libraries)."""

from __future__ import annotations

import numbers

import numpy as np
import torch

from companion.exercises._feedback import Feedback, right, wrong
from companion.rope import layout_permutation, permute_qk_weights
from companion.sinusoidal import interleaved_to_halves

__all__ = ["porting_exercise_weights", "check_ported_query_weight", "check_fairseq_mapping"]

_HEADS, _HEAD_DIM, _WIDTH = 4, 16, 32


def porting_exercise_weights() -> torch.Tensor:
    """The query projection of exercise ch10-port-weights: ``(4 * 16, 32)``, interleaved RoPE."""
    g = torch.Generator().manual_seed(1010)
    return torch.randn(_HEADS * _HEAD_DIM, _WIDTH, dtype=torch.float64, generator=g)


def _as_matrix(answer) -> np.ndarray | None:
    if isinstance(answer, torch.Tensor):
        answer = answer.detach().cpu().numpy()
    try:
        array = np.asarray(answer, dtype=np.float64)
    except (TypeError, ValueError):
        return None
    return array if array.ndim == 2 else None


def check_ported_query_weight(answer) -> Feedback:
    """Is ``answer`` the halves-layout version of :func:`porting_exercise_weights`?"""
    w = porting_exercise_weights()
    shape = tuple(w.shape)
    array = _as_matrix(answer)
    if array is None or array.shape != shape:
        got = getattr(answer, "shape", type(answer).__name__)
        return wrong(f"expected a tensor or array of shape {shape}, like the weight you started from; got {got}")
    if not np.all(np.isfinite(array)):
        return wrong("the answer contains NaN or infinity; a permutation only moves entries around")
    original = w.numpy()
    if np.allclose(array, permute_qk_weights(w, _HEADS, to="halves").numpy(), atol=1e-6):
        return right("each head's rows now pair feature i with i + d/2, as rotate_half expects.")
    if np.allclose(array, original, atol=1e-6):
        return wrong("this is the weight unchanged; rotate_half pairs different features than the interleaved layout")
    if np.allclose(array, original[interleaved_to_halves(_HEADS * _HEAD_DIM)], atol=1e-6):
        return wrong("the rows were permuted across the whole matrix; RoPE pairs features within each head")
    if np.allclose(array, permute_qk_weights(w, _HEADS, to="interleaved").numpy(), atol=1e-6):
        return wrong("this permutation goes the other way (halves to interleaved); invert it")
    if np.allclose(array, original[:, layout_permutation(_WIDTH)], atol=1e-6):
        return wrong("the columns were permuted; the rotation acts on the projection's outputs, its rows")
    if sorted(map(tuple, np.round(array, 9))) == sorted(map(tuple, np.round(original, 9))):
        return wrong("the rows are a permutation of the original rows, but not the one that maps pairs "
                     "(2i, 2i+1) of a head to (i, i + d/2)")
    return wrong("the entries are not a reordering of the original rows; porting only moves rows")


def check_fairseq_mapping(answer) -> Feedback:
    """Is ``answer == (10000 ** (64 / 62), 12)`` for token 10 of a fairseq model with d = 64?"""
    if isinstance(answer, (str, bytes)) or not hasattr(answer, "__len__") or len(answer) != 2:
        return wrong("expected a pair (base, position)")
    base, position = answer
    if isinstance(base, torch.Tensor):
        base = base.item() if base.numel() == 1 else base
    if isinstance(position, torch.Tensor):
        position = position.item() if position.numel() == 1 else position
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or not np.isfinite(base):
        return wrong(f"the base must be a real number, got {base!r}")
    if isinstance(position, bool) or not isinstance(position, numbers.Real) or position != int(position):
        return wrong(f"the position must be a whole number, got {position!r}")
    base_ok = np.isclose(base, 10000 ** (64 / 62), rtol=1e-6)  # float32 answers welcome
    if not base_ok:
        if np.isclose(base, 10000.0):
            return wrong("the base 10000 gives the paper's spacing; fairseq spaces frequencies by ln(10000) / (d/2 - 1)")
        return wrong("write fairseq's frequency 10000^(-i / (d/2 - 1)) as base^(-2i / d) and solve for the base")
    if int(position) == 10:
        return wrong("the base is right; but fairseq does not number tokens from 0")
    if int(position) != 12:
        return wrong("the base is right; token t reads the row numbered t + padding_idx + 1")
    return right("fairseq's: the halves table, base 10000^(d/(d-2)), read two rows further on.")
