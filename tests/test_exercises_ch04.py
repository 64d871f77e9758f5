"""Tests of the chapter 4 checkers: right answers pass, typical mistakes get a hint, odd inputs never raise."""

import math

import numpy as np
import pytest
import torch

from companion.exercises import (
    Feedback,
    check_first_negative,
    check_longest_wavelength,
    check_rule_of_thumb_base,
    check_wavelength_ratio,
)

LONGEST_128 = 2 * math.pi * 10000 ** (126 / 128)
RATIO_512 = math.exp(2 * math.log(10000) / 512)


def first_negative_by_loop(d: int, base: float = 10000.0) -> int:
    """Independent reference: walk k = 1, 2, ... summing cosines pair by pair."""
    k = 1
    while True:
        total = sum(math.cos(k / base ** (2 * i / d)) for i in range(d // 2))
        if total < 0:
            return k
        k += 1


FIRST_NEGATIVE_32 = first_negative_by_loop(32)

ODD_INPUTS = ["47117", [1.0, 2.0], np.zeros((2, 2)), True, float("nan"), float("inf"), object(), {"a": 1}]


def test_reference_values():
    assert round(LONGEST_128, 2) == 54410.14
    assert FIRST_NEGATIVE_32 == 474
    assert round(RATIO_512, 6) == 1.036633


@pytest.mark.parametrize("answer", [LONGEST_128, np.float32(LONGEST_128), np.array(LONGEST_128),
                                    torch.tensor(LONGEST_128, dtype=torch.float64), LONGEST_128 * (1 + 1e-8)])
def test_longest_wavelength_right(answer):
    feedback = check_longest_wavelength(answer)
    assert isinstance(feedback, Feedback) and feedback, feedback.message


@pytest.mark.parametrize(
    "answer, hint",
    [
        (2 * math.pi * 10000, "not a pair index"),
        (10000 ** (126 / 128), "2*pi"),
        (2 * math.pi * 10000 ** (127 / 128), "exponent"),
        (2 * math.pi, "smallest frequency"),
        (LONGEST_128 * 1.01, "smallest frequency"),
    ],
)
def test_longest_wavelength_wrong(answer, hint):
    feedback = check_longest_wavelength(answer)
    assert not feedback and hint in feedback.message


@pytest.mark.parametrize("answer", [FIRST_NEGATIVE_32, np.int64(FIRST_NEGATIVE_32), float(FIRST_NEGATIVE_32),
                                    np.array([FIRST_NEGATIVE_32]), torch.tensor(FIRST_NEGATIVE_32)])
def test_first_negative_right(answer):
    feedback = check_first_negative(answer)
    assert feedback, feedback.message


@pytest.mark.parametrize(
    "answer, hint",
    [
        (FIRST_NEGATIVE_32 - 1, "still"),
        (1, "still"),
        (725, "already negative"),      # the d = 64 answer
        (10**12, "already negative"),   # huge offsets are answered quickly
        (0, "positive"),
        (-3, "positive"),
        (474.5, "whole number"),
    ],
)
def test_first_negative_wrong(answer, hint):
    feedback = check_first_negative(answer)
    assert not feedback and hint in feedback.message


@pytest.mark.parametrize("answer", [RATIO_512, np.float64(RATIO_512), np.array([[RATIO_512]]),
                                    1.0366, 1.037, round(RATIO_512, 6)])  # rounded: 4+ digits
def test_wavelength_ratio_right(answer):
    feedback = check_wavelength_ratio(answer)
    assert feedback, feedback.message


@pytest.mark.parametrize(
    "answer, hint",
    [
        (1 / RATIO_512, "frequencies"),
        (10000 ** (1 / 512), "2i/d"),
        (2 * math.pi * RATIO_512, "cancels"),
        (1.04, "Close: give more digits"),
        (1.0367, "off in its last digits"),
        (1.02, "divide"),
        (1.03, "Close: give more digits"),  # cut off after 3 digits
        (10000 ** (2 / 64), "divide"),
    ],
)
def test_wavelength_ratio_wrong(answer, hint):
    feedback = check_wavelength_ratio(answer)
    assert not feedback and hint in feedback.message


def smallest_base_by_search(d=64, goal=20480):
    """Independent reference: walk the integer bases up, wavelength by the loop formula."""
    base = 2
    while 2 * math.pi * base ** ((d - 2) / d) < goal:
        base += 1
    return base


RULE_BASE = smallest_base_by_search()


def test_rule_base_reference():
    assert RULE_BASE == 4232


@pytest.mark.parametrize("answer", [RULE_BASE, float(RULE_BASE), np.float32(RULE_BASE), torch.tensor(RULE_BASE)])
def test_rule_base_right(answer):
    feedback = check_rule_of_thumb_base(answer)
    assert feedback, feedback.message


@pytest.mark.parametrize(
    "answer, hint",
    [
        (RULE_BASE - 1, "short of"),
        (RULE_BASE + 100, "smallest"),
        ((20480 / (2 * math.pi)) ** (64 / 62), "integer"),
        (round(20480 / (2 * math.pi)), "exponent (d - 2)/d"),
        (20480, "2*pi is missing"),
        (1, "greater than 1"),
        (4232.5, "whole-number"),
    ],
)
def test_rule_base_wrong(answer, hint):
    feedback = check_rule_of_thumb_base(answer)
    assert not feedback and hint in feedback.message


def test_every_checker_accepts_its_reference_answer_in_float32():
    assert check_longest_wavelength(np.float32(LONGEST_128))
    assert check_first_negative(np.float32(FIRST_NEGATIVE_32))
    assert check_wavelength_ratio(np.float32(RATIO_512))
    assert check_rule_of_thumb_base(np.float32(RULE_BASE))


@pytest.mark.parametrize(
    "checker",
    [check_longest_wavelength, check_first_negative, check_wavelength_ratio, check_rule_of_thumb_base],
)
@pytest.mark.parametrize("answer", ODD_INPUTS)
def test_odd_inputs_rejected_without_raising(checker, answer):
    feedback = checker(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert feedback.message.startswith("expected")
