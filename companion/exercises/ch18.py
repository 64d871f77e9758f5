"""Checkers for the exercises of chapter 18 (the cheat sheet)."""

from __future__ import annotations

import math

import numpy as np

from companion.exercises._answers import (
    as_number,
    close,
    count_off,
    counted,
    near_miss,
)
from companion.exercises._feedback import Feedback, checker, right_folded, wrong

__all__ = ["check_checkpoint_layouts", "check_alibi_slopes_of_24"]

# The parameters the exercise texts state.
FAMILIES = ("gpt_neox", "gptj", "llama", "roformer")
LAYOUTS = ("interleaved", "halves")
SLOPE_HEADS, SLOPE_ASKED = 24, (5, 19)

# What each family's rotary code in `transformers` computes (book/10_porting.ipynb runs
# it).
_LAYOUT_OF = {
    "gpt_neox": "halves",
    "gptj": "interleaved",
    "llama": "halves",
    "roformer": "interleaved",
}


def _as_layouts(answer):
    """Return ``({family: layout}, None)`` or ``(None, Feedback)`` explaining why
    not."""
    if isinstance(answer, dict):
        keys = {str(k).strip().lower().replace("-", "_"): v for k, v in answer.items()}
        missing = [f for f in FAMILIES if f not in keys]
        extra = sorted(k for k in keys if k not in FAMILIES)
        if missing or extra:
            parts = ([f"missing {missing}"] if missing else []) + (
                [f"unknown {extra}"] if extra else []
            )
            return None, wrong(
                f"expected one entry for each of {list(FAMILIES)}; "
                f"{' and '.join(parts)}"
            )
        values = [keys[f] for f in FAMILIES]
    elif isinstance(answer, (list, tuple)):
        if len(answer) != len(FAMILIES):
            return None, wrong(
                f"expected {len(FAMILIES)} layouts, in the order {list(FAMILIES)}; got "
                f"{len(answer)}"
            )
        values = list(answer)
    else:
        return None, wrong(
            f"expected a dict {{family: layout}} for {list(FAMILIES)}, got "
            f"{type(answer).__name__}"
        )
    layouts = {}
    for family, value in zip(FAMILIES, values):
        if not isinstance(value, str) or value.strip().lower() not in LAYOUTS:
            return None, wrong(
                f"the layout of {family!r} must be 'interleaved' or 'halves', got "
                f"{value!r}"
            )
        layouts[family] = value.strip().lower()
    return layouts, None


@checker
def check_checkpoint_layouts(answer) -> Feedback:
    """The rotary layout of the ``transformers`` families gpt_neox, gptj, llama and
    roformer."""
    layouts, problem = _as_layouts(answer)
    if problem is not None:
        return problem
    off = [f for f in FAMILIES if layouts[f] != _LAYOUT_OF[f]]
    if not off:
        return right_folded(
            "GPT-NeoX and Llama in transformers rotate halves (rotate_half), GPT-J and "
            "RoFormer rotate neighbours; a checkpoint keeps the layout of the code it "
            "was trained with."
        )
    if len(off) == len(FAMILIES):
        return wrong(
            "Every layout is the other one. Interleaved pairs neighbouring features "
            "(2i, 2i + 1); halves pairs feature i with i + d/2."
        )
    if off == ["llama"]:
        return wrong(
            "Look again at llama: Meta's reference code pairs neighbours, but the "
            "family's code in transformers is not Meta's; the conversion to "
            "transformers permuted the rows of W_Q and W_K."
        )
    return wrong(
        f"{count_off(len(off), len(FAMILIES), 'layouts')}. Rotate a vector whose "
        "only nonzero feature is feature 0, at position 1: with interleaved pairs it "
        "moves into feature 1, with halves into feature d/2."
    )


def _power_of_two_slope(h: int, n: int) -> float:
    return 2.0 ** (-8.0 * (h + 1) / n)


def _slope(h: int, n: int) -> float:
    """The reference code's slope of head ``h`` (from 0) of ``n`` heads, written apart
    from alibi_slopes."""
    p = 2 ** int(math.floor(math.log2(n)))
    if h < p:
        return _power_of_two_slope(h, p)
    # every other slope of 2p heads: 1st, 3rd, ...
    return _power_of_two_slope(2 * (h - p), 2 * p)


def _as_pair(answer):
    """Return ``(array of 2, None)`` or ``(None, Feedback)``."""
    if isinstance(answer, (str, bytes, dict)) or not hasattr(answer, "__len__"):
        return None, wrong(f"expected a pair (m_5, m_19), got {type(answer).__name__}")
    try:
        items = list(answer)
    except TypeError:
        return None, wrong(f"expected a pair (m_5, m_19), got {type(answer).__name__}")
    if len(items) != 2:
        return None, wrong(
            f"expected a pair (m_5, m_19), got {counted(len(items), 'value')}"
        )
    values = []
    for name, item in zip(("m_5", "m_19"), items):
        value = as_number(item)
        if isinstance(value, str):
            return None, wrong(f"{name}: {value}")
        values.append(value)
    return np.array(values), None


_SLOPE_RTOL = 1e-6  # float32 gets a slope 2^(-8k/n) within ~1e-7


def _close(a, b) -> bool:
    return close(a, b, rtol=_SLOPE_RTOL)


@checker
def check_alibi_slopes_of_24(answer) -> Feedback:
    """ALiBi slopes ``(m_5, m_19)`` of heads 5 and 19 (from 0) of a 24-head model."""
    got, problem = _as_pair(answer)
    if problem is not None:
        return problem
    n = SLOPE_HEADS
    expected = np.array([_slope(h, n) for h in SLOPE_ASKED])
    if _close(got, expected):
        return right_folded(
            "Head 5 is one of the 16 heads of the nearest lower power of two; head 19 "
            "is the fourth extra head, with the 7th slope of a 32-head model."
        )
    miss = near_miss(got, expected, rtol=_SLOPE_RTOL)
    if miss:
        return wrong(miss)
    if _close(got, expected[::-1]):
        return wrong("Both values are right but swapped: give head 5's slope first.")
    if _close(-got, expected):
        return wrong(
            "The slopes are positive; the minus sign belongs to the bias, -m (i - j)."
        )
    if np.all(got > 0) and _close(1.0 / got, expected):
        return wrong("These are the reciprocals: every slope lies between 0 and 1.")
    if _close(got, [_power_of_two_slope(h, n) for h in SLOPE_ASKED]):
        return wrong(
            "That is the geometric sequence 2^(-8(h+1)/24), which the reference code "
            "uses only when the head count is a power of two."
        )
    if _close(got, [_slope(h - 1, n) for h in SLOPE_ASKED]):
        return wrong(
            "Those are the slopes of heads 4 and 18: heads are counted from 0 here."
        )
    if _close(got, [_power_of_two_slope(h - 1, 16) for h in SLOPE_ASKED[:1]]
              + [_power_of_two_slope(2 * (SLOPE_ASKED[1] - 16) - 1, 32)]):
        return wrong(
            "The exponents are one step short: head 0's slope is 2^(-8/n), not 2^0 = 1."
        )
    if _close(got, [_power_of_two_slope(h, 32) for h in SLOPE_ASKED]):
        return wrong(
            "Those are the slopes of a 32-head model. The first 16 heads keep the "
            "slopes of a 16-head model; only the extra heads borrow from 32."
        )
    if _close(got[0], expected[0]):
        contiguous = _power_of_two_slope(SLOPE_ASKED[1] - 16, 32)
        other_parity = _power_of_two_slope(2 * (SLOPE_ASKED[1] - 16) + 1, 32)
        if _close(got[1], contiguous):
            return wrong(
                "Head 5 is right. The extra heads take every other slope of 32 heads, "
                "not the first ones."
            )
        if _close(got[1], other_parity):
            return wrong(
                "Head 5 is right. The extra heads take the 1st, 3rd, 5th, ... slopes "
                "of 32 heads."
            )
        return wrong(
            "Head 5 is right; head 19 is not one of the first 16. Which slopes do the "
            "extra heads take?"
        )
    if _close(got[1], expected[1]):
        return wrong(
            "Head 19 is right; head 5 is one of the first 16 heads. Which power of two "
            "do they follow?"
        )
    return wrong(
        "Not the reference slopes. Which power of two lies just below 24, and what do "
        "the extra heads take?"
    )
