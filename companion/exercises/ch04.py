"""Checkers for the exercises of chapter 4 (frequencies and wavelengths)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from companion.exercises._answers import FLOAT32_RTOL, as_number, close, near_miss
from companion.exercises._feedback import Feedback, checker, wrong
from companion.exercises._feedback import right_folded as right



__all__ = [
    "check_longest_wavelength",
    "check_first_negative",
    "check_wavelength_ratio",
    "check_rule_of_thumb_base",
]

_BASE = 10000.0

# Exercise ch04-base-rule: d, the training length, and the margin the rule of thumb asks
# for.
RULE_DIM, RULE_TRAIN_LENGTH, RULE_MARGIN = 64, 2048, 10


def _close(value: float, target: float) -> bool:
    """Relative closeness, float32-safe: in float32 the wavelengths and their ratio,
    built from frequencies exp(-2i/d * ln 10000), are off by up to ~6e-7 relative (that
    is why the old 1e-7 rejected right answers); the wrong answers named here are 1.8%
    off or more. An answer rounded to 4 significant digits passes too (``_answers``,
    "Rounded answers")."""
    return close(value, target, rtol=FLOAT32_RTOL)


def _near_miss(value: float, target: float) -> Feedback | None:
    """The message for the right value given too coarsely, or None."""
    miss = near_miss(value, target, rtol=FLOAT32_RTOL)
    return None if miss is None else wrong(miss)


@checker
def check_longest_wavelength(answer: Any) -> Feedback:
    """Exercise ch04-longest-wavelength: the longest wavelength for d = 128, base
    10000."""
    value = as_number(answer)
    if isinstance(value, str):
        return wrong(value)
    d = 128
    target = 2 * math.pi * _BASE ** ((d - 2) / d)
    if _close(value, target):
        return right(
            f"The last pair (i = {d // 2 - 1}) repeats every {target:,.1f} positions."
        )
    if _near_miss(value, target) is not None:
        return _near_miss(value, target)
    if _close(value, 2 * math.pi * _BASE):
        return wrong("2*pi*10000 belongs to i = d/2, which is not a pair index; "
                     "which values can i take?")
    if _close(value, _BASE ** ((d - 2) / d)) or _close(
        value, 1 / _BASE ** ((d - 2) / d)
    ):
        return wrong(
            "that looks like a frequency or its inverse without the 2*pi: a wavelength "
            "is the number of positions for the angle to grow by a full turn."
        )
    if _close(value, 2 * math.pi * _BASE ** ((d - 1) / d)) or _close(
        value, 2 * math.pi * _BASE ** (2 * (d - 1) / d)
    ):
        return wrong(
            "check the exponent: pair i uses 2i/d, and the largest i is not d - 1."
        )
    return wrong(
        "the wavelength of pair i is 2*pi / w_i; which pair has the smallest frequency?"
    )


@checker
def check_first_negative(answer: Any) -> Feedback:
    """Exercise ch04-first-negative: the first k > 0 with dot(k) < 0 for d = 32, base
    10000."""
    value = as_number(answer)
    if isinstance(value, str):
        return wrong(value)
    if value != round(value):
        return wrong(
            f"an offset counts positions, so it is a whole number; got {value}"
        )
    k = int(round(value))
    if k <= 0:
        return wrong(f"the offset must be positive, got {k}")
    w = _BASE ** (-np.arange(16) * 2.0 / 32)
    ks = np.arange(1, min(k, 5000) + 1)             # the answer is far below 5000
    dots = np.cos(ks[:, None] * w).sum(axis=1)        # dot(1), dot(2), ...
    negative = np.flatnonzero(dots < 0)
    if negative.size and ks[negative[0]] < k:
        return wrong(
            f"the dot product is already negative at an offset smaller than {k}; "
            "you want the first offset where it drops below 0."
        )
    if not negative.size:
        return wrong(
            f"at k = {k} the dot product is still {dots[-1]:.3f}, not negative; "
            "look further out."
        )
    return right(
        f"dot({k}) = {dots[-1]:.3f} is the first negative value; every smaller "
        "offset gives a positive dot product."
    )


@checker
def check_wavelength_ratio(answer: Any) -> Feedback:
    """Exercise ch04-wavelength-ratio: lambda_{i+1} / lambda_i for d = 512, base
    10000."""
    value = as_number(answer)
    if isinstance(value, str):
        return wrong(value)
    d = 512
    target = _BASE ** (2 / d)
    if _close(value, target):
        return right(
            f"Each pair's wavelength is {target:.6f} times the previous one; the "
            "ratio does not depend on i."
        )
    if _near_miss(value, target) is not None:
        return _near_miss(value, target)
    if _close(value, 1 / target):
        return wrong(
            "that is the ratio of frequencies: they shrink from pair to pair, while "
            "wavelengths grow."
        )
    if _close(value, _BASE ** (1 / d)):
        return wrong(
            "pair i has exponent 2i/d, not i/d: moving to the next pair adds 2/d."
        )
    if _close(value, 2 * math.pi * target):
        return wrong(
            "the 2*pi is the same in every wavelength, so it cancels in a ratio."
        )
    if abs(value - target) < 1e-3:
        return wrong(
            f"Close, but {value} is off in its last digits: compute the ratio rather "
            "than rounding it by hand (it is compared to a relative 1e-5)."
        )
    return wrong("Write the wavelengths of pairs i and i + 1 and divide; what is left?")


def _longest(base: float, d: int) -> float:
    return 2 * math.pi * base ** ((d - 2) / d)


@checker
def check_rule_of_thumb_base(answer: Any) -> Feedback:
    """Exercise ch04-base-rule: the smallest integer base whose longest wavelength
    (d = 64) is at least 10 times the training length 2048."""
    value = as_number(answer)
    if isinstance(value, str):
        return wrong(value)
    d, goal = RULE_DIM, RULE_MARGIN * RULE_TRAIN_LENGTH
    exact = (goal / (2 * math.pi)) ** (d / (d - 2))
    target = math.ceil(exact)
    if value != round(value):
        if _close(value, exact):
            return wrong(
                f"{value:.3f} solves the equation exactly; the exercise asks for the "
                "smallest *integer* base that reaches the goal."
            )
        return wrong(f"the exercise asks for a whole-number base, got {value}")
    base = int(round(value))
    if base <= 1:
        return wrong(f"a base must be greater than 1, got {base}")
    if base == target:
        return right(f"Base {base}: the longest wavelength is {_longest(base, d):,.0f} "
                     f"positions, at least {goal:,}; base {base - 1} falls short.")
    if _longest(base, d) < goal:
        if abs(base - goal / (2 * math.pi)) < 1:
            return wrong(
                "that base puts 2*pi*base at the goal, but the last pair has the "
                "exponent (d - 2)/d, not 1: its wavelength is shorter."
            )
        return wrong(
            f"with base {base} the longest wavelength is {_longest(base, d):,.0f} "
            f"positions, short of {goal:,}."
        )
    if abs(base - goal ** (d / (d - 2))) < 1 or abs(base - goal) < 1:
        return wrong("a wavelength is 2*pi times the denominator; the 2*pi is missing.")
    return wrong(
        f"base {base} is long enough (longest wavelength {_longest(base, d):,.0f}), "
        "but a smaller integer base also is: find the smallest."
    )
