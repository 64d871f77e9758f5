"""Checkers for the exercises of chapter 9 (ALiBi: attention with linear biases)."""

from __future__ import annotations

import math

import numpy as np

from companion.alibi import alibi_slopes
from companion.exercises._answers import (
    FLOAT32_RTOL,
    as_array,
    as_number,
    close,
    near_miss,
)
from companion.exercises._feedback import Feedback, checker, right, wrong

__all__ = ["check_alibi_slopes_12", "check_alibi_bias_entry", "check_alibi_half_lives"]

# The parameters the exercise texts state.
SLOPE_HEADS = 12
ENTRY_HEADS, ENTRY_HEAD_DIM, ENTRY_HEAD, ENTRY_QUERY, ENTRY_KEY = 12, 64, 10, 40, 33
HALF_LIFE_HEADS = 16
_ATOL = 1e-9


def _as_vector(answer, length: int):
    """Return ``(array, None)`` or ``(None, Feedback)`` explaining why ``answer`` is
    unusable."""
    array = as_array(answer, (length,))
    if isinstance(array, str):
        return None, wrong(array)
    return array, None


def _close(a, b) -> bool:
    """Relative closeness, float32-safe: float32 gets slopes (as start * start ** k, or
    a cumprod), biases and half-lives within ~3e-7; the wrong answers named here are 10%
    off or more. An answer rounded to 4 significant digits passes too (``_answers``,
    "Rounded answers")."""
    return close(a, b, rtol=FLOAT32_RTOL, atol=_ATOL)


def _near_miss(a, b) -> Feedback | None:
    """The message for the right value given too coarsely ("Close: give more digits",
    or half precision), else None."""
    miss = near_miss(a, b, rtol=FLOAT32_RTOL, atol=_ATOL)
    return None if miss is None else wrong(miss)


@checker
def check_alibi_slopes_12(answer) -> Feedback:
    """The 12 head slopes, in head order, by the rule of the ALiBi reference code."""
    slopes, problem = _as_vector(answer, SLOPE_HEADS)
    if problem is not None:
        return problem
    expected = alibi_slopes(SLOPE_HEADS)
    if _close(slopes, expected):
        return right(
            "Eight slopes of the 8-head model, then every other slope of the 16-head "
            "model."
        )
    miss = _near_miss(slopes, expected)
    if miss is not None:
        return miss
    if _close(np.sort(slopes), np.sort(expected)):
        return wrong(
            "These are the right twelve values in another order. Head order matters: "
            "the rule first lists the heads of the nearest lower power of two, then "
            "the extra heads."
        )
    geometric = (2.0 ** (-8.0 / SLOPE_HEADS)) ** np.arange(1, SLOPE_HEADS + 1)
    if _close(slopes, geometric):
        return wrong(
            "This is the geometric sequence with start and ratio 2^(-8/12). The "
            "reference code does not use it when the head count is not a power of two; "
            "start from the nearest lower power of two."
        )
    if _close(slopes, alibi_slopes(16)[:SLOPE_HEADS]):
        return wrong(
            "These are the first 12 slopes of a 16-head model. The rule keeps all "
            "slopes of the smaller power of two and takes only some of the larger "
            "one's."
        )
    if np.all(slopes > 0) and _close(1.0 / slopes, expected):
        return wrong(
            "These are the reciprocals: every slope is a fraction between 0 and 1."
        )
    return wrong(
        "Not the reference slopes for 12 heads. Which power of two lies just below 12, "
        "and which slopes does the next power of two add?"
    )


@checker
def check_alibi_bias_entry(answer) -> Feedback:
    """ALiBi's bias for head 10 (from 0) of 12, query position 40, key position 33 (head
    dim 64)."""
    value = as_number(answer)
    if isinstance(value, str):
        return wrong(value)
    slopes = alibi_slopes(ENTRY_HEADS)
    distance = ENTRY_QUERY - ENTRY_KEY
    expected = -slopes[ENTRY_HEAD] * distance
    if _close(value, expected):
        return right(
            "The slope of that head times the distance, with a minus sign: a penalty."
        )
    miss = _near_miss(value, expected)
    if miss is not None:
        return miss
    if _close(value, -expected):
        return wrong(
            "The size is right but the sign is not: ALiBi lowers the score of a key "
            "that is farther away."
        )
    if _close(value, expected / math.sqrt(ENTRY_HEAD_DIM)):
        return wrong(
            "In the paper's convention (and BLOOM's) ALiBi's bias is added after the "
            "1/sqrt(d) scaling and is not scaled itself (transformers' Falcon divides "
            "it by sqrt(d))."
        )
    if any(
        _close(abs(value), slopes[h] * distance)
        for h in (ENTRY_HEAD - 1, ENTRY_HEAD + 1)
    ):
        return wrong(
            "That is the value of a neighbouring head: heads are counted from 0 here."
        )
    naive = (2.0 ** (-8.0 / ENTRY_HEADS)) ** (ENTRY_HEAD + 1)
    if _close(abs(value), naive * distance):
        return wrong(
            "That slope comes from the plain geometric sequence; 12 is not a power of "
            "two, so use the reference rule."
        )
    if any(
        _close(abs(value), slopes[ENTRY_HEAD] * d)
        for d in (distance - 1, distance + 1, ENTRY_QUERY + ENTRY_KEY)
    ):
        return wrong(
            "Right slope, wrong distance: the bias is proportional to query position "
            "minus key position."
        )
    return wrong(
        "Not the bias of that head for that pair. Find the head's slope, then multiply "
        "by the distance."
    )


@checker
def check_alibi_half_lives(answer) -> Feedback:
    """The half-life ``ln(2) / m`` (in tokens) of each of the 16 heads, in head
    order."""
    lives, problem = _as_vector(answer, HALF_LIFE_HEADS)
    if problem is not None:
        return problem
    slopes = alibi_slopes(HALF_LIFE_HEADS)
    expected = math.log(2.0) / slopes
    if _close(lives, expected):
        return right(
            "From about 1 token for the steepest head to about 177 for the flattest."
        )
    miss = _near_miss(lives, expected)
    if miss is not None:
        return miss
    if _close(lives, expected[::-1]):
        return wrong(
            "The values are right but reversed: head 0 has the steepest slope and the "
            "shortest half-life."
        )
    if _close(lives, 1.0 / slopes):
        return wrong(
            "That is where the bias reaches -1, a factor e. A factor 2 needs a bias of "
            "-ln 2."
        )
    if _close(lives, slopes * math.log(2.0)) or _close(lives, slopes):
        return wrong(
            "The half-life should grow as the slope shrinks: a flatter head forgets "
            "more slowly."
        )
    if _close(lives, math.log10(2.0) / slopes):  # log2(2) / m would be 1 / m, above
        return wrong(
            "Softmax uses the natural exponential: the weight halves where the bias is "
            "-ln 2, natural log."
        )
    return wrong(
        "Not the half-lives. At what distance does exp(-m * distance) equal 1/2?"
    )
