"""Checkers for the exercises of chapter 2 (the input ``X = sqrt(d) * E + P``)."""

from __future__ import annotations

import math
import numbers

import numpy as np

from companion.exercises._answers import as_array, as_number, close, near_miss
from companion.exercises._feedback import Feedback, checker, wrong
from companion.exercises._feedback import right_folded as right



__all__ = [
    "check_matching_init_std",
    "check_table_row_rms",
    "check_smallest_max_len",
    "check_expected_abs_cosine",
]

# The exercises' fixed data (stated in the exercise texts of chapter 2).
MATCHING_DIM = 768
ROW_RMS_SHAPE = (50, 64)  # sinusoidal_table(50, 64)
DOCUMENT_LENGTHS = (37, 120, 64, 91)  # one start token is prepended to each document
COSINE_DIM = 768  # ch02-random-cosine: E |cos(e, p)| for a random e and a fixed p
# The RMS of a row: float32 gets it within a few 1e-7.
_RMS_RTOL, _RMS_ATOL = 1e-5, 1e-6


def _describe(answer) -> str:
    shape = getattr(answer, "shape", None)
    kind = type(answer).__name__
    return f"{kind} of shape {tuple(shape)}" if shape is not None else kind


def _as_real_array(answer) -> np.ndarray | str:
    """``answer`` as a float64 array of any shape, or a message saying why not."""
    return as_array(answer, finite=False)


def _near(value, target: float, rtol: float = 0.02) -> bool:
    return close(value, target, rtol=rtol)


@checker
def check_matching_init_std(answer) -> Feedback:
    """Exercise ch02-matching-init: the ``init_std`` for which ``sqrt(d) * E`` (d = 768)
    has the RMS of a row of the sinusoidal table, ``sqrt(1/2)``."""
    value = as_number(answer)
    if isinstance(value, str):
        return wrong(f"The answer is a standard deviation: {value}")
    d = MATCHING_DIM
    target = math.sqrt(0.5) / math.sqrt(d)
    if _near(value, target):
        return right(
            f"init_std = {value:.4f}: after the sqrt(d) scaling the token vectors have "
            "the same RMS as the position vectors."
        )
    miss = near_miss(value, target, rtol=0.02)
    if miss:
        return wrong(miss)
    if not math.isfinite(value) or value <= 0:
        return wrong(
            "a standard deviation is a positive finite number; check the sign and the "
            "formula."
        )
    if _near(value, math.sqrt(0.5)):
        return wrong(
            "that is the RMS the scaled token vectors should reach; but forward "
            "multiplies the token table by sqrt(d) before adding P, so the table "
            "itself must start smaller."
        )
    if _near(value, 1 / math.sqrt(d)):
        return wrong(
            "with this init_std the scaled token vectors have standard deviation 1; "
            "the target is the RMS of a sinusoidal row, which is not 1. Measure it."
        )
    if _near(value, math.sqrt(0.5) * math.sqrt(d)):
        return wrong(
            "the scaling multiplies the table by sqrt(d); undoing it goes the other "
            "way."
        )
    if _near(value, math.sqrt(0.5) / d) or _near(value, 0.5 / d):
        return wrong("the forward pass scales by sqrt(d), not by d.")
    return wrong(
        f"{value:.4g} is off. Write the RMS of sqrt(d) * E in terms of init_std and d, "
        "and set it equal to the RMS of one row of sinusoidal_table(..., 768)."
    )


@checker
def check_table_row_rms(answer) -> Feedback:
    """Exercise ch02-row-rms: the RMS of each row of ``sinusoidal_table(50, 64)``."""
    arr = _as_real_array(answer)
    if isinstance(arr, str):
        return wrong(f"The answer is 50 numbers, one per row: {arr}")
    rows, features = ROW_RMS_SHAPE
    if arr.shape == (features,):
        return wrong(
            f"got {features} numbers: you reduced over the positions (axis 0); "
            "the RMS of a row is taken over its features."
        )
    if arr.shape == ROW_RMS_SHAPE:
        return wrong("got the whole table's shape: reduce each row to a single number.")
    if arr.shape != (rows,):
        return wrong(
            f"expected an array of shape ({rows},), one number per position, got shape "
            f"{arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        return wrong("the answer contains NaN or infinite values.")
    target = math.sqrt(0.5)
    if close(arr, target, rtol=_RMS_RTOL, atol=_RMS_ATOL):
        return right(
            f"Every row has RMS {target:.4f}: each (sin, cos) pair contributes "
            "exactly 1 to the sum of squares."
        )
    miss = near_miss(arr, target, rtol=_RMS_RTOL, atol=_RMS_ATOL)
    if miss:
        return wrong(miss)
    off = np.abs(arr - target) - 1e-5 * target
    # nearly all rows right: name the ones that are not
    if np.count_nonzero(off > 0) <= 3:
        bad = [int(p) for p in np.flatnonzero(off > 0)]
        return wrong(f"rows {bad} are off (e.g. row {bad[0]} gives {arr[bad[0]]:.6g}); "
                     "the others are right. Compute every row the same way.")
    if close(arr, 0.5, rtol=_RMS_RTOL, atol=_RMS_ATOL):
        return wrong("These are mean squares: take their square root to get the RMS.")
    if close(arr, math.sqrt(features / 2), rtol=_RMS_RTOL, atol=_RMS_ATOL):
        return wrong(
            "these are Euclidean norms; RMS divides the sum of squares by the number "
            "of features first."
        )
    if np.ptp(arr) > 1e-3 and np.all(arr < target):
        return wrong(
            "the values change from row to row and stay below the RMS: a standard "
            "deviation subtracts each row's mean first, which RMS does not."
        )
    return wrong(
        "the RMS of a row is the square root of the mean of its squared entries."
    )


@checker
def check_smallest_max_len(answer) -> Feedback:
    """Exercise ch02-max-len: the smallest ``max_len`` that accepts the padded batch."""
    if isinstance(answer, bool) or isinstance(answer, (str, bytes)):
        return wrong(
            f"expected an integer number of positions, got {_describe(answer)}"
        )
    if isinstance(answer, numbers.Integral):
        value = int(answer)
    else:
        # float32/float64 answers that hold a whole number
        number = as_number(answer)
        if isinstance(number, str):
            return wrong(f"The answer is a whole number of positions: {number}")
        if number != round(number):
            return wrong(
                f"a number of positions is a whole number (an integer), got {number}"
            )
        value = int(round(number))
    longest = max(DOCUMENT_LENGTHS)
    target = longest + 1
    if value == target:
        return right(
            f"max_len = {value}: the longest document plus its start token fills every "
            "row."
        )
    if value in (sum(DOCUMENT_LENGTHS), sum(DOCUMENT_LENGTHS) + len(DOCUMENT_LENGTHS)):
        return wrong(
            "the table needs one row per position of one sequence, not one per token "
            "of the whole batch."
        )
    if value == longest:
        return wrong(
            "too short by one: count every token the model sees, including the ones "
            "the tokenizer adds."
        )
    if value < longest:
        return wrong(
            "too short: the padded batch is longer than that, and the module would "
            "refuse it."
        )
    return wrong("that table is long enough, but not the smallest one that works.")


def _mean_abs_cosine(d: int) -> float:
    """E|cos| between a fixed vector and a uniformly random direction in d dimensions:
    Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)), computed with log-gamma to avoid
    overflow."""
    return math.exp(math.lgamma(d / 2) - math.lgamma((d + 1) / 2)) / math.sqrt(math.pi)


@checker
def check_expected_abs_cosine(answer) -> Feedback:
    """Exercise ch02-random-cosine: the expected ``|cos|`` between a freshly initialised
    token vector (i.i.d. normal entries) and a fixed position vector, for
    ``d = 768``."""
    value = as_number(answer)
    if isinstance(value, str):
        return wrong(f"The answer is a mean |cosine|: {value}")
    d = COSINE_DIM
    target = _mean_abs_cosine(d)
    if _near(value, target, rtol=0.02):
        return right(
            f"E|cos| = {value:.4f} at d = {d}: about sqrt(2 / (pi d)), small because "
            "a random direction in many dimensions is nearly orthogonal to any fixed "
            "one, whatever that one's mean."
        )
    miss = near_miss(value, target, rtol=0.02)
    if miss:
        return wrong(miss)
    if not math.isfinite(value) or value < 0:
        return wrong("a mean of absolute values is a non-negative number.")
    if abs(value) < 1e-3:
        return wrong(
            "the mean of the cosine itself is 0; the exercise asks for the mean of "
            "its absolute value."
        )
    if _near(value, 1 / math.sqrt(d), rtol=0.02):
        return wrong(
            "1/sqrt(d) is the root-mean-square of the cosine; the mean of |z| for a "
            "normal z with that spread is smaller. By what factor?"
        )
    if _near(value, math.sqrt(2 / math.pi), rtol=0.02):
        return wrong(
            "that is E|z| for one standard normal coordinate; the cosine divides by "
            "the norm of the random vector, about sqrt(d)."
        )
    if _near(value, 1 / d, rtol=0.02) or _near(value, 2 / (math.pi * d), rtol=0.02):
        return wrong("the cosine shrinks like 1/sqrt(d), not like 1/d.")
    return wrong(
        f"{value:.4g} is off. The cosine with a fixed unit vector is one coordinate "
        "of a random unit vector: roughly z / sqrt(d) with z standard normal. "
        "What is the mean of |z|?"
    )
