"""Checkers for the exercises of chapter 8 (stretching RoPE to longer contexts)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from companion.exercises._answers import (
    FLOAT32_RTOL,
    as_number,
    close,
    counted,
    near_miss,
)
from companion.exercises._feedback import Feedback, checker, right, wrong

__all__ = ["check_ntk_base", "check_yarn_classes", "check_ntk_unseen_pairs"]

_BASE = 10000.0
# The parameters the exercise texts state.
NTK_DIM, NTK_FACTOR = 128, 8
CLASSES_DIM, CLASSES_LEN = 64, 4096
UNSEEN_DIM, UNSEEN_LEN, UNSEEN_FACTOR = 64, 4096, 8

# Relative tolerance of the NTK base: float32 gets base * s ** (d / (d - 2)) within
# ~3e-7; the wrong bases the checker names are 3% off or more.
_BASE_RTOL = FLOAT32_RTOL


def _speeds(dim: int, base: float = _BASE) -> np.ndarray:
    return base ** (-2.0 * np.arange(dim // 2) / dim)


def _as_count(answer: Any) -> int | str:
    """Return ``answer`` as a whole number, or a message saying why it is not one."""
    value = as_number(answer)
    if isinstance(value, str):
        return value
    if value != round(value):
        return f"expected a whole number of pairs, got {value}"
    return int(round(value))


@checker
def check_ntk_base(answer: Any) -> Feedback:
    """Exercise ch08-ntk-base: the NTK-aware base for d = 128, s = 8 (original base
    10000)."""
    feedback = ntk_base_feedback(answer, NTK_DIM, NTK_FACTOR)
    if feedback:
        target = _BASE * NTK_FACTOR ** (NTK_DIM / (NTK_DIM - 2))
        return right(
            f"base {target:,.1f}: the fastest pair keeps its speed, the slowest is 8x "
            "slower."
        )
    return feedback


def ntk_base_feedback(answer: Any, d: int, s: float) -> Feedback:
    """Is ``answer`` the NTK-aware base ``10000 * s ** (d / (d - 2))``? (Also used by
    chapter 14.)"""
    value = as_number(answer)
    if isinstance(value, str):
        return wrong(value)
    target = _BASE * s ** (d / (d - 2))
    if close(value, target, rtol=_BASE_RTOL):
        return right(
            f"With base {target:,.1f} the fastest pair keeps its speed and the slowest "
            f"turns {s} times slower."
        )
    miss = near_miss(value, target, rtol=_BASE_RTOL)
    if miss:
        return wrong(miss)
    if close(value, _BASE * s, rtol=_BASE_RTOL):
        return wrong(
            "multiplying the base by s divides the slowest speed by a bit less than s, "
            "because the slowest pair has exponent (d - 2)/d, not 1. Which power of s "
            "makes it exactly s?"
        )
    if close(value, _BASE * s ** ((d - 2) / d), rtol=_BASE_RTOL):
        return wrong(
            "the exponent is upside down: the slowest pair raises the base to the "
            "power (d - 2)/d, so the factor on the base must undo that power."
        )
    if value <= _BASE:
        return wrong("to slow the rotations down the base has to grow, not shrink.")
    return wrong(
        "choose the new base so that the slowest pair, i = d/2 - 1, turns exactly s "
        "times slower; its speed is base ** (-(d - 2) / d)."
    )


def _as_pair(answer: Any) -> tuple[int, int] | str:
    if isinstance(answer, (str, bytes, dict, set, frozenset)) or not hasattr(
        answer, "__len__"
    ):
        return f"expected two counts (kept, interpolated), got {type(answer).__name__}"
    if hasattr(answer, "shape") and len(answer.shape) != 1:
        return (
            "expected two counts (kept, interpolated), got an array of shape "
            f"{tuple(answer.shape)}"
        )
    values = list(answer)
    if len(values) != 2:
        return (
            "expected two counts (kept, interpolated), got "
            f"{counted(len(values), 'value')}"
        )
    counts = [_as_count(v) for v in values]
    for count in counts:
        if isinstance(count, str):
            return count
    return counts[0], counts[1]


@checker
def check_yarn_classes(answer: Any) -> Feedback:
    """Exercise ch08-yarn-classes: (pairs kept, pairs fully interpolated) by YaRN for
    d = 64, L = 4096."""
    pair = _as_pair(answer)
    if isinstance(pair, str):
        return wrong(pair)
    turns = CLASSES_LEN * _speeds(CLASSES_DIM) / (2 * math.pi)
    kept, interpolated = int(np.sum(turns > 32)), int(np.sum(turns < 1))
    ramp = CLASSES_DIM // 2 - kept - interpolated
    if pair == (kept, interpolated):
        return right(
            f"{kept} pairs (over 32 turns) kept, {interpolated} (under 1 turn) "
            f"interpolated, {ramp} on the ramp."
        )
    if pair == (interpolated, kept):
        return wrong(
            "the two counts are swapped: the fast pairs (many turns) are the ones kept."
        )
    if sum(pair) == CLASSES_DIM // 2:
        return wrong(
            "the two counts add up to all pairs; some pairs are on the ramp, neither "
            "kept nor fully interpolated."
        )
    radians = CLASSES_LEN * _speeds(CLASSES_DIM)
    if pair == (int(np.sum(radians > 32)), int(np.sum(radians < 1))):
        return wrong(
            "the thresholds count full turns, not radians: one turn is 2*pi radians."
        )
    return wrong(
        "count the turns of each pair within the trained length, L * theta_i / (2*pi), "
        "and compare them with beta_fast and beta_slow."
    )


@checker
def check_ntk_unseen_pairs(answer: Any) -> Feedback:
    """Exercise ch08-ntk-unseen: pairs with unseen angles at m < 8L under NTK scaling,
    d = 64, L = 4096."""
    count = _as_count(answer)
    if isinstance(count, str):
        return wrong(count)
    d, length, s = UNSEEN_DIM, UNSEEN_LEN, UNSEEN_FACTOR
    theta = _speeds(d)
    stretched = _speeds(d, _BASE * s ** (d / (d - 2)))
    partial = length * theta < 2 * math.pi
    unseen = int(np.sum(partial & ((s * length - 1) * stretched > length * theta)))
    if count == unseen:
        return right(
            f"{unseen} of the {int(partial.sum())} slow pairs pass their trained arc; "
            "only the slowest is divided by s."
        )
    if count == int(partial.sum()):
        return wrong(
            "that is every pair with less than one turn; is there one that NTK slows "
            "down by exactly s?"
        )
    if count == 0:
        return wrong(
            "NTK slows the slow pairs, but by how much? Compare the largest angle at m "
            "< sL with L * theta_i pair by pair."
        )
    if count < 0 or count > d // 2:
        return wrong(
            f"the model has {d // 2} pairs; the count must lie between 0 and {d // 2}."
        )
    return wrong(
        "a pair can only meet a new angle if it made less than one turn within L; for "
        "those, compare (s L - 1) times the new speed with L times the old one."
    )
