"""Checkers for the exercises of chapter 3 (the sinusoidal formula).

Each checker takes the learner's answer, never raises, and returns a
:class:`~companion.exercises._feedback.Feedback`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from companion.exercises._feedback import Feedback, right, wrong

__all__ = ["check_pe_row", "check_denominators", "check_halves_to_interleaved"]

_BASE = 10000.0

# Exercise ch03-pe-row: PE(pos) for this position and width.
PE_ROW_POS = 5
PE_ROW_DIM = 16

# Exercise ch03-denominators: the denominators 10000^(2i/d) for this width.
DENOMINATORS_DIM = 16

# Exercise ch03-halves-to-interleaved: a (positions, features) table in the halves layout.
HALVES_POSITIONS = 10
HALVES_DIM = 12


def _as_array(answer: Any, shape: tuple[int, ...], what: str) -> tuple[np.ndarray | None, Feedback | None]:
    """Return ``(array, None)`` for a finite float array of ``shape``, else ``(None, feedback)``."""
    try:
        if hasattr(answer, "detach"):  # a torch tensor
            answer = answer.detach().cpu().numpy()
        array = np.asarray(answer, dtype=np.float64)
    except Exception as err:  # noqa: BLE001 - a checker never raises
        return None, wrong(f"Expected {what}, an array of shape {shape}; "
                           f"could not read {type(answer).__name__}: {err}")
    if array.shape != shape:
        return None, wrong(f"Expected {what}, an array of shape {shape}, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        return None, wrong(f"The answer ({what}) contains NaN or infinite values; "
                           "every entry of the formula is finite")
    return array, None


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return bool(np.allclose(a, b, rtol=1e-6, atol=1e-9))


def _pair_denominators(dim: int) -> np.ndarray:
    i = np.arange(dim // 2, dtype=np.float64)
    return _BASE ** (2.0 * i / dim)


def _row(pos: float, dim: int, *, denominators: np.ndarray | None = None) -> np.ndarray:
    """PE(pos) in the interleaved layout, for the given per-pair denominators."""
    den = _pair_denominators(dim) if denominators is None else denominators
    row = np.empty(dim, dtype=np.float64)
    row[0::2] = np.sin(pos / den)
    row[1::2] = np.cos(pos / den)
    return row


def _halves_perm(dim: int) -> np.ndarray:
    return np.concatenate([np.arange(0, dim, 2), np.arange(1, dim, 2)])


def check_pe_row(answer: Any) -> Feedback:
    """Exercise ch03-pe-row: ``PE(5)`` for ``d = 16``, interleaved layout, shape ``(16,)``."""
    pos, dim = PE_ROW_POS, PE_ROW_DIM
    array, problem = _as_array(answer, (dim,), f"PE({pos}) for d = {dim}")
    if problem is not None:
        return problem
    expected = _row(pos, dim)
    if _close(array, expected):
        return right(f"PE({pos}) matches the formula in all {dim} features.")
    if _close(array, expected[_halves_perm(dim)]):
        return wrong("The numbers are right but in the wrong order: the paper puts the sine and cosine "
                     "of pair i next to each other, at features 2i and 2i + 1")
    swapped = expected.reshape(-1, 2)[:, ::-1].reshape(-1)
    if _close(array, swapped):
        return wrong("Sine and cosine are swapped: the even features (2i) hold the sine")
    feature_index = np.arange(dim, dtype=np.float64)
    by_feature = np.where(feature_index % 2 == 0, np.sin(pos / _BASE ** (2 * feature_index / dim)),
                          np.cos(pos / _BASE ** (2 * feature_index / dim)))
    if _close(array, by_feature):
        return wrong("The frequency changes from feature to feature: i in the formula is the pair index, "
                     "so features 2i and 2i + 1 share one denominator")
    for other in (pos - 1, pos + 1):
        if _close(array, _row(other, dim)):
            return wrong(f"This is the encoding of position {other}: use pos = {pos} as given, "
                         "positions count from 0")
    if _close(array, _row(pos, dim, denominators=1.0 / _pair_denominators(dim))):
        return wrong("Divide pos by the denominator 10000^(2i/d); do not multiply by it")
    bad = int(np.argmax(np.abs(array - expected)))
    return wrong(f"Feature {bad} is off by {abs(array[bad] - expected[bad]):.3g}; check which pair it "
                 "belongs to and that pair's denominator")


def check_denominators(answer: Any) -> Feedback:
    """Exercise ch03-denominators: the ``d/2 = 8`` denominators ``10000^(2i/16)``, shape ``(8,)``."""
    dim = DENOMINATORS_DIM
    expected = _pair_denominators(dim)
    try:
        size = np.asarray(answer, dtype=np.float64).size
    except Exception:  # noqa: BLE001 - a checker never raises
        size = None
    if size == dim:
        return wrong(f"There is one denominator per (sin, cos) pair, so d = {dim} features have "
                     f"{dim // 2}, not {dim}")
    if size == dim // 2 + 1:
        return wrong("The pair index i runs from 0 to d/2 - 1, so the list has d/2 entries")
    array, problem = _as_array(answer, (dim // 2,), f"the denominators for d = {dim}")
    if problem is not None:
        return problem
    if _close(array, expected):
        return right(f"All {dim // 2} denominators are right, from 1 up to {expected[-1]:.1f}.")
    if _close(array, 1.0 / expected):
        return wrong("These are the reciprocals (the angular frequencies); the exercise asks for the "
                     "denominators that pos is divided by")
    if _close(array, _BASE ** (np.arange(dim // 2) / dim)):
        return wrong("The exponent is 2i/d: the pair index i is doubled before dividing by d")
    if _close(array, _BASE ** (np.linspace(0.0, 1.0, dim // 2))):
        return wrong("The exponents should be 2i/d for i = 0 .. d/2 - 1, evenly spaced but stopping "
                     "short of 1, so the last denominator is below 10000")
    bad = int(np.argmax(np.abs(array - expected) / expected))
    return wrong(f"Entry i = {bad} is not 10000 to the power 2i/d for d = {dim}")


def _halves_table() -> np.ndarray:
    """The input of exercise ch03-halves-to-interleaved, ``sinusoidal_table(10, 12, layout="halves")``."""
    angles = np.arange(HALVES_POSITIONS, dtype=np.float64)[:, None] / _pair_denominators(HALVES_DIM)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


def check_halves_to_interleaved(answer: Any) -> Feedback:
    """Exercise ch03-halves-to-interleaved: the halves table rearranged to the paper's layout."""
    n, dim = HALVES_POSITIONS, HALVES_DIM
    array, problem = _as_array(answer, (n, dim), "the interleaved table")
    if problem is not None:
        return problem
    halves = _halves_table()
    expected = np.empty_like(halves)
    expected[:, 0::2], expected[:, 1::2] = halves[:, : dim // 2], halves[:, dim // 2:]
    if _close(array, expected):
        return right("Every column is in the paper's place: sine of pair i at 2i, cosine at 2i + 1.")
    if _close(array, halves):
        return wrong("The table is still in the halves layout; the columns need to be rearranged")
    if _close(array, halves[:, _halves_perm(dim)]):
        return wrong("interleaved_to_halves maps the paper's layout to halves; going the other way "
                     "needs the inverse permutation")
    if _close(np.sort(array, axis=1), np.sort(expected, axis=1)):
        return wrong("Each row holds the right numbers but some columns are in the wrong place; "
                     "the sine of pair i goes to feature 2i and its cosine to 2i + 1")
    return wrong("The numbers differ from the given table's; rearrange its columns, do not recompute them")
