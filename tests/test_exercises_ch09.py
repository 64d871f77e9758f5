"""Tests of the chapter 9 checkers: right answers pass, typical mistakes get a hint, bad input never raises."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from companion.exercises import Feedback, check_alibi_bias_entry, check_alibi_half_lives, check_alibi_slopes_12

BAD_VECTORS = [None, "abc", 3.0, [1, 2, 3], [[1, 2], [3]], {"a": 1}, np.zeros((3, 3)), np.array([1j, 2j]), object()]

# Written out by hand from the rule: 8 heads 2^-1..2^-8, then 16-head slopes 1, 3, 5, 7 (2^-0.5, 2^-1.5, ...).
SLOPES_12 = np.array([2.0 ** -p for p in range(1, 9)] + [2.0 ** -(p + 0.5) for p in range(4)])
SLOPES_16 = np.array([2.0 ** (-p / 2) for p in range(1, 17)])


# ---- ch09-slopes-12 --------------------------------------------------------------------

def test_slopes_accepts_the_slopes_in_many_forms():
    for answer in (SLOPES_12, SLOPES_12.tolist(), torch.tensor(SLOPES_12), SLOPES_12.astype(np.float32)):
        assert check_alibi_slopes_12(answer)


@pytest.mark.parametrize(
    "answer, hint",
    [
        (np.sort(SLOPES_12)[::-1], "another order"),
        ((2.0 ** (-8 / 12)) ** np.arange(1, 13), "geometric sequence"),
        (SLOPES_16[:12], "16-head"),
        (1.0 / SLOPES_12, "reciprocals"),
        (np.linspace(0.1, 0.9, 12), "power of two"),
    ],
)
def test_slopes_rejects_typical_mistakes(answer, hint):
    feedback = check_alibi_slopes_12(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD_VECTORS + [SLOPES_12[:8], np.full(12, np.nan)])
def test_slopes_never_raises(answer):
    feedback = check_alibi_slopes_12(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- ch09-bias-entry -------------------------------------------------------------------

ENTRY = -(40 - 33) * 2.0 ** -2.5  # head 10 of 12 is the third extra head


def test_bias_entry_accepts_the_number_in_many_forms():
    for answer in (ENTRY, np.float32(ENTRY), torch.tensor(ENTRY), np.array([ENTRY]), round(ENTRY, 8)):
        assert check_alibi_bias_entry(answer)


@pytest.mark.parametrize(
    "answer, hint",
    [
        (-ENTRY, "sign"),
        (ENTRY / 8, "not scaled"),
        (-7 * 2.0 ** -1.5, "neighbouring head"),  # head 9
        (-7 * 2.0 ** -3.5, "neighbouring head"),  # head 11
        (-7 * (2.0 ** (-8 / 12)) ** 11, "plain geometric"),
        (-8 * 2.0 ** -2.5, "wrong distance"),
        (0.0, "slope"),
    ],
)
def test_bias_entry_rejects_typical_mistakes(answer, hint):
    feedback = check_alibi_bias_entry(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", [None, "abc", True, [1.0, 2.0], np.zeros((2, 2)), {"a": 1}, 1j, float("nan"), object()])
def test_bias_entry_never_raises(answer):
    feedback = check_alibi_bias_entry(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- ch09-half-lives -------------------------------------------------------------------

HALF_LIVES = np.array([math.log(2) * 2.0 ** (p / 2) for p in range(1, 17)])


def test_half_lives_accept_the_values_in_many_forms():
    for answer in (HALF_LIVES, HALF_LIVES.tolist(), torch.tensor(HALF_LIVES), HALF_LIVES * (1 + 1e-9)):
        assert check_alibi_half_lives(answer)


def test_half_lives_really_halve_the_weight():
    for m, life in zip(SLOPES_16, HALF_LIVES):
        assert math.isclose(math.exp(-m * life), 0.5)


@pytest.mark.parametrize(
    "answer, hint",
    [
        (HALF_LIVES[::-1], "reversed"),
        (1.0 / SLOPES_16, "factor e"),
        (SLOPES_16 * math.log(2), "grow as the slope shrinks"),
        (1.0 / SLOPES_16 * math.log10(2), "natural log"),
        (HALF_LIVES + 1, "exp(-m * distance)"),
    ],
)
def test_half_lives_reject_typical_mistakes(answer, hint):
    feedback = check_alibi_half_lives(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD_VECTORS + [HALF_LIVES[:8], np.full(16, np.inf)])
def test_half_lives_never_raise(answer):
    feedback = check_alibi_half_lives(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- float32 answers (a right answer computed in float32 must pass) ----------------------

def _slopes_by_hand_float32(n):
    p = 2 ** int(math.floor(math.log2(n)))
    own = [2.0 ** (-8.0 * k / p) for k in range(1, p + 1)]
    extra = [2.0 ** (-8.0 * k / (2 * p)) for k in range(1, 2 * p + 1, 2)][: n - p]
    return torch.tensor(own + extra, dtype=torch.float32)


def test_slopes_accept_float32():
    assert check_alibi_slopes_12(_slopes_by_hand_float32(12))
    assert check_alibi_slopes_12(_slopes_by_hand_float32(12).numpy())


def test_bias_entry_accepts_float32():
    assert check_alibi_bias_entry(-_slopes_by_hand_float32(12)[10] * 7)


def test_half_lives_accept_float32():
    answer = torch.log(torch.tensor(2.0)) / _slopes_by_hand_float32(16)
    assert answer.dtype == torch.float32 and check_alibi_half_lives(answer)
