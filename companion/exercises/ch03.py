"""Checkers for the exercises of chapter 3 (the sinusoidal formula).

Each checker takes the learner's answer, never raises, and returns a
:class:`~companion.exercises._feedback.Feedback`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from companion.exercises._answers import (
    MIN_DIGITS,
    as_array,
    as_number,
    close,
    near_miss,
)
from companion.exercises._feedback import Feedback, checker, wrong
from companion.exercises._feedback import right_folded as right



__all__ = [
    "check_pe_row",
    "check_denominators",
    "check_halves_to_interleaved",
    "check_tensor2tensor_base",
]

_BASE = 10000.0

# Exercise ch03-pe-row: PE(pos) for this position and width.
PE_ROW_POS = 5
PE_ROW_DIM = 16

# Exercise ch03-denominators: the denominators 10000^(2i/d) for this width.
DENOMINATORS_DIM = 16

# Exercise ch03-halves-to-interleaved: a (positions, features) table in the halves
# layout.
HALVES_POSITIONS = 10
HALVES_DIM = 12

# Exercise ch03-t2t-base: the base that turns the paper's formula into tensor2tensor's.
T2T_DIM = 64

# Table entries lie in [-1, 1]. A right answer computed in float32 (numpy or torch, with
# the power or the exp/log form) is within a few 1e-7 of the float64 value; the mistakes
# the checkers look for are off by 1e-3 or more.
_ENTRY_ATOL = 1e-5
# Denominators are compared relative to their size, for the same reason.
_DENOMINATOR_RTOL = 1e-5


def _as_array(
    answer: Any, shape: tuple[int, ...], what: str
) -> tuple[np.ndarray | None, Feedback | None]:
    """Return ``(array, None)`` for a finite float array of ``shape``, else
    ``(None, feedback)``."""
    array = as_array(answer, shape)
    if isinstance(array, str):
        if "NaN" in array:
            return None, wrong(f"The answer ({what}) contains NaN or infinite values; "
                               "every entry of the formula is finite")
        return None, wrong(f"The answer is {what}: {array}")
    return array, None


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    """Entries of a table agree within the float32-safe absolute tolerance (or are
    rounded to at least 4 significant digits: ``_answers``, "Rounded answers")."""
    return close(a, b, atol=_ENTRY_ATOL)


def _close_relative(a: np.ndarray, b: np.ndarray) -> bool:
    return close(a, b, rtol=_DENOMINATOR_RTOL)


def _feature_name(feature: int) -> str:
    kind = "sine" if feature % 2 == 0 else "cosine"
    return f"feature {feature} (the {kind} of pair {feature // 2})"


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


@checker
def check_pe_row(answer: Any) -> Feedback:
    """Exercise ch03-pe-row: ``PE(5)`` for ``d = 16``, interleaved layout, shape
    ``(16,)``."""
    pos, dim = PE_ROW_POS, PE_ROW_DIM
    array, problem = _as_array(answer, (dim,), f"PE({pos}) for d = {dim}")
    if problem is not None:
        return problem
    expected = _row(pos, dim)
    if _close(array, expected):
        return right(f"PE({pos}) matches the formula in all {dim} features.")
    miss = near_miss(array, expected, atol=_ENTRY_ATOL)
    if miss:
        return wrong(miss)
    if _close(array, expected[_halves_perm(dim)]):
        return wrong(
            "The numbers are right but in the wrong order: the paper puts the sine and "
            "cosine of pair i next to each other, at features 2i and 2i + 1"
        )
    swapped = expected.reshape(-1, 2)[:, ::-1].reshape(-1)
    if _close(array, swapped):
        return wrong(
            "Sine and cosine are swapped: the even features (2i) hold the sine"
        )
    feature_index = np.arange(dim, dtype=np.float64)
    by_feature = np.where(
        feature_index % 2 == 0,
        np.sin(pos / _BASE ** (2 * feature_index / dim)),
        np.cos(pos / _BASE ** (2 * feature_index / dim)),
    )
    if _close(array, by_feature):
        return wrong(
            "The frequency changes from feature to feature: i in the formula is the "
            "pair index, so features 2i and 2i + 1 share one denominator"
        )
    for other in (pos - 1, pos + 1):
        if _close(array, _row(other, dim)):
            return wrong(
                f"This is the encoding of position {other}: use pos = {pos} as given, "
                "positions count from 0"
            )
    if _close(array, _row(pos, dim, denominators=1.0 / _pair_denominators(dim))):
        return wrong(
            "Divide pos by the denominator 10000^(2i/d); do not multiply by it"
        )
    off = np.abs(array - expected)
    bad = np.flatnonzero(off > _ENTRY_ATOL)
    worst = int(bad[np.argmax(off[bad])])
    others = (
        ""
        if bad.size == 1
        else f" ({bad.size} features are off in all: {bad.tolist()})"
    )
    return wrong(
        f"{_feature_name(worst).capitalize()} is off by {off[worst]:.3g} "
        f"(tolerance {_ENTRY_ATOL:g}){others}; compute it from the formula for that "
        "pair and check whether it should be a sine or a cosine"
    )


@checker
def check_denominators(answer: Any) -> Feedback:
    """Exercise ch03-denominators: the ``d/2 = 8`` denominators ``10000^(2i/16)``, shape
    ``(8,)``."""
    dim = DENOMINATORS_DIM
    expected = _pair_denominators(dim)
    read = as_array(answer)
    size = None if isinstance(read, str) else read.size
    if size == dim:
        return wrong(
            f"There is one denominator per (sin, cos) pair, so d = {dim} features have "
            f"{dim // 2}, not {dim}"
        )
    if size == dim // 2 + 1:
        return wrong(
            "The pair index i runs from 0 to d/2 - 1, so the list has d/2 entries"
        )
    array, problem = _as_array(answer, (dim // 2,), f"the denominators for d = {dim}")
    if problem is not None:
        return problem
    if _close_relative(array, expected):
        return right(
            f"All {dim // 2} denominators are right, from 1 up to {expected[-1]:.1f}."
        )
    miss = near_miss(array, expected, rtol=_DENOMINATOR_RTOL)
    if miss:
        return wrong(miss)
    if _close_relative(array, 1.0 / expected):
        return wrong(
            "These are the reciprocals (the angular frequencies); the exercise asks "
            "for the denominators that pos is divided by"
        )
    if _close_relative(array, _BASE ** (np.arange(dim // 2) / dim)):
        return wrong(
            "The exponent is 2i/d: the pair index i is doubled before dividing by d"
        )
    if _close_relative(array, _BASE ** (np.linspace(0.0, 1.0, dim // 2))):
        return wrong(
            "The exponents should be 2i/d for i = 0 .. d/2 - 1, evenly spaced but "
            "stopping short of 1, so the last denominator is below 10000"
        )
    relative = np.abs(array - expected) / expected
    bad = int(np.argmax(relative))
    rounded = np.allclose(array, np.round(array, 1), rtol=0, atol=1e-9)
    if rounded and np.abs(array - expected).max() <= 0.5 + 1e-9:
        return wrong(
            "Close: the denominators look rounded (to one decimal or fewer); give "
            f"each to at least {MIN_DIGITS} significant digits, or store the computed "
            "values themselves"
        )
    return wrong(
        f"Entry i = {bad} is {array[bad]:.6g}, off by {relative[bad]:.2g} relative "
        f"(tolerance {_DENOMINATOR_RTOL:g}); it should be 10000 to the power 2i/d "
        f"for d = {dim}"
    )


def _halves_table() -> np.ndarray:
    """The input of exercise ch03-halves-to-interleaved,
    ``sinusoidal_table(10, 12, layout="halves")``."""
    angles = np.arange(HALVES_POSITIONS, dtype=np.float64)[
        :, None
    ] / _pair_denominators(HALVES_DIM)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)


@checker
def check_halves_to_interleaved(answer: Any) -> Feedback:
    """Exercise ch03-halves-to-interleaved: the halves table rearranged to the paper's
    layout."""
    n, dim = HALVES_POSITIONS, HALVES_DIM
    array, problem = _as_array(answer, (n, dim), "the interleaved table")
    if problem is not None:
        return problem
    halves = _halves_table()
    expected = np.empty_like(halves)
    expected[:, 0::2], expected[:, 1::2] = halves[:, : dim // 2], halves[:, dim // 2:]
    if _close(array, expected):
        return right(
            "Every column is in the paper's place: sine of pair i at 2i, cosine at 2i "
            "+ 1."
        )
    miss = near_miss(array, expected, atol=_ENTRY_ATOL)
    if miss:
        return wrong(miss)
    if _close(array, halves):
        return wrong(
            "The table is still in the halves layout; the columns need to be rearranged"
        )
    if _close(array, halves[:, _halves_perm(dim)]):
        return wrong(
            "interleaved_to_halves maps the paper's layout to halves; going the other "
            "way needs the inverse permutation"
        )
    if _close(np.sort(array, axis=1), np.sort(expected, axis=1)):
        wrong_columns = [
            c for c in range(dim) if not _close(array[:, c], expected[:, c])
        ]
        return wrong(
            f"Each row holds the right numbers but columns {wrong_columns} are in the "
            "wrong place; the sine of pair i goes to feature 2i and its cosine to 2i "
            "+ 1"
        )
    off = np.abs(array - expected)
    row, col = np.unravel_index(int(np.argmax(off)), off.shape)
    return wrong(
        f"The numbers differ from the given table's (worst: row {row}, "
        f"{_feature_name(int(col))}, off by {off[row, col]:.3g}); rearrange its "
        "columns, do not recompute them"
    )


@checker
def check_tensor2tensor_base(answer: Any) -> Feedback:
    """Exercise ch03-t2t-base: the ``base`` for which the paper's formula, in the halves
    layout, gives tensor2tensor's timing signal for ``d = 64`` (a single positive
    number)."""
    dim = T2T_DIM
    value = as_number(answer)
    if isinstance(value, str):
        return wrong(f"The answer is a base: {value}")
    if value <= 1:
        return wrong(f"A base is a finite number above 1, got {value}")
    target = _BASE ** (dim / (dim - 2))
    if _close_relative(value, target):
        return right(
            f"The base is 10000^(d/(d-2)) = {target:.1f} for d = {dim}: the exponent "
            "2i/d with this base equals tensor2tensor's i/(d/2 - 1) with base 10000."
        )
    miss = near_miss(value, target, rtol=_DENOMINATOR_RTOL)
    if miss:
        return wrong(miss)
    if _close_relative(value, _BASE):
        return wrong(
            "That is the paper's base: compare the last frequency of each table; "
            "tensor2tensor's reaches 1/10000 exactly, the paper's does not"
        )
    if _close_relative(value, _BASE ** ((dim - 2) / dim)):
        return wrong(
            "The exponent is upside down: the new base must be larger than 10000, so "
            "that the last pair, with exponent (d - 2)/d, still reaches 10000"
        )
    if _close_relative(value, _BASE ** (dim / (dim - 1))) or _close_relative(
        value, _BASE ** ((dim - 1) / (dim - 2))
    ):
        return wrong(
            "Close: tensor2tensor divides by num_timescales - 1 = d/2 - 1; equate "
            "base^(2i/d) with 10000^(i/(d/2 - 1)) for every i"
        )
    return wrong(
        f"{value:.6g} is not it. Write pair i's frequency both ways, base^(-2i/d) and "
        "10000^(-i/(d/2 - 1)), and solve for the base"
    )
