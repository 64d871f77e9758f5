"""Tests of the chapter 3 checkers: right answers pass, typical mistakes get a pointed hint,
and nothing the learner passes makes a checker raise.

The expected answers are computed here from the formula, independently of the checkers and of
the notebook's solutions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from companion.exercises import Feedback
from companion.exercises import (
    check_denominators,
    check_halves_to_interleaved,
    check_pe_row,
    check_tensor2tensor_base,
)


def pe_row_5_16() -> list[float]:
    """PE(5) for d = 16, one entry at a time."""
    row = []
    for i in range(8):
        angle = 5 / 10000 ** (2 * i / 16)
        row += [math.sin(angle), math.cos(angle)]
    return row


def interleaved_10_12() -> np.ndarray:
    return np.array([[f(p / 10000 ** (2 * i / 12)) for i in range(6) for f in (math.sin, math.cos)]
                     for p in range(10)])


def halves_10_12() -> np.ndarray:
    t = interleaved_10_12()
    return np.concatenate([t[:, 0::2], t[:, 1::2]], axis=1)


BAD_INPUTS = [None, "abc", {"a": 1}, [[1, 2], [3]], 3.0, np.zeros((2, 3)), [np.nan] * 16, object()]


# ---- check_pe_row ------------------------------------------------------------------------

def test_pe_row_accepts_right_answer_as_list_array_tensor_float32():
    row = pe_row_5_16()
    for answer in (row, np.array(row), torch.tensor(row, dtype=torch.float64),
                   np.array(row, dtype=np.float32)):
        feedback = check_pe_row(answer)
        assert isinstance(feedback, Feedback) and feedback.ok, feedback.message


def test_pe_row_names_typical_mistakes():
    row = np.array(pe_row_5_16())
    halves = np.concatenate([row[0::2], row[1::2]])
    swapped = row.reshape(-1, 2)[:, ::-1].reshape(-1)
    j = np.arange(16)
    by_feature = np.where(j % 2 == 0, np.sin(5 / 10000 ** (2 * j / 16)), np.cos(5 / 10000 ** (2 * j / 16)))
    pos4 = [f(4 / 10000 ** (2 * i / 16)) for i in range(8) for f in (math.sin, math.cos)]
    times = [f(5 * 10000 ** (2 * i / 16)) for i in range(8) for f in (math.sin, math.cos)]
    cases = {"order": halves, "swapped": swapped, "pair index": by_feature,
             "position 4": pos4, "multiply": times}
    for hint, answer in cases.items():
        feedback = check_pe_row(answer)
        assert not feedback.ok and hint in feedback.message, (hint, feedback.message)


def test_pe_row_generic_mistake_points_at_a_feature():
    answer = np.array(pe_row_5_16())
    answer[7] += 0.1
    feedback = check_pe_row(answer)
    assert not feedback.ok and "Feature 7" in feedback.message and "cosine of pair 3" in feedback.message


def test_pe_row_accepts_the_torch_exp_log_code_in_float32():
    # The form most tutorials copy, computed in float32 from the start (not a rounded float64).
    d = 16
    position = torch.tensor([[5.0]])
    div_term = torch.exp(torch.arange(0, d, 2).float() * (-math.log(10000.0) / d))
    row = torch.zeros(d)
    row[0::2], row[1::2] = torch.sin(position * div_term)[0], torch.cos(position * div_term)[0]
    feedback = check_pe_row(row)
    assert feedback.ok, feedback.message


def test_pe_row_names_the_feature_that_breaks_the_tolerance_not_a_small_one():
    # A near-zero feature that is right in float32 must not be blamed for another's error.
    answer = np.array(pe_row_5_16(), dtype=np.float32).astype(np.float64)
    answer[2] = -answer[2]
    feedback = check_pe_row(answer)
    assert not feedback.ok and "Feature 2 (the sine of pair 1)" in feedback.message


@pytest.mark.parametrize("answer", BAD_INPUTS + [np.zeros(15), np.zeros((1, 16))])
def test_pe_row_rejects_bad_input_without_raising(answer):
    feedback = check_pe_row(answer)
    assert isinstance(feedback, Feedback) and not feedback.ok and feedback.message


# ---- check_denominators ------------------------------------------------------------------

def test_denominators_accepts_right_answer():
    right = [10000 ** (i / 8) for i in range(8)]  # 2i/16 = i/8
    for answer in (right, np.array(right), torch.tensor(right), tuple(right)):
        assert check_denominators(answer), check_denominators(answer).message


def test_denominators_names_typical_mistakes():
    right = np.array([10000 ** (i / 8) for i in range(8)])
    cases = {
        "one denominator per": 10000 ** (np.arange(16) / 16),        # one per feature
        "d/2 entries": 10000 ** (np.arange(9) / 8),                   # i up to d/2 inclusive
        "reciprocals": 1 / right,
        "doubled": 10000 ** (np.arange(8) / 16),                      # forgot the 2
        "below 10000": 10000 ** np.linspace(0, 1, 8),                 # last exponent 1
    }
    for hint, answer in cases.items():
        feedback = check_denominators(answer)
        assert not feedback.ok and hint in feedback.message, (hint, feedback.message)
    off = right.copy()
    off[3] *= 1.01
    feedback = check_denominators(off)
    assert not feedback.ok and "i = 3" in feedback.message


@pytest.mark.parametrize("answer", BAD_INPUTS + [np.ones(7), torch.ones(8, requires_grad=True) * 0])
def test_denominators_rejects_bad_input_without_raising(answer):
    feedback = check_denominators(answer)
    assert isinstance(feedback, Feedback) and not feedback.ok and feedback.message


# ---- check_halves_to_interleaved ---------------------------------------------------------

def test_halves_to_interleaved_accepts_right_answer():
    right = interleaved_10_12()
    for answer in (right, right.tolist(), torch.from_numpy(right)):
        feedback = check_halves_to_interleaved(answer)
        assert feedback.ok, feedback.message


def test_halves_to_interleaved_names_typical_mistakes():
    halves = halves_10_12()
    perm = np.concatenate([np.arange(0, 12, 2), np.arange(1, 12, 2)])
    cases = {"still in the halves": halves, "inverse permutation": halves[:, perm]}
    for hint, answer in cases.items():
        feedback = check_halves_to_interleaved(answer)
        assert not feedback.ok and hint in feedback.message, (hint, feedback.message)
    right = interleaved_10_12()
    scrambled = right[:, [1, 0] + list(range(2, 12))]
    assert "wrong place" in check_halves_to_interleaved(scrambled).message
    assert "do not recompute" in check_halves_to_interleaved(right + 0.01).message


@pytest.mark.parametrize("answer", BAD_INPUTS + [np.zeros((12, 10)), np.zeros((10, 12, 1))])
def test_halves_to_interleaved_rejects_bad_input_without_raising(answer):
    feedback = check_halves_to_interleaved(answer)
    assert isinstance(feedback, Feedback) and not feedback.ok and feedback.message


# ---- check_tensor2tensor_base ------------------------------------------------------------

# Independent derivation from pair 1: base^(2/64) = 10000^(1/31).
T2T_BASE_64 = 10000 ** (32 / 31)


def test_t2t_base_reference_reproduces_tensor2tensor_frequencies():
    # tensor2tensor's timescales, written as its docstring describes them: a geometric
    # sequence from 1 to 10000 in d/2 steps.
    timescales = np.geomspace(1.0, 10000.0, 32)
    np.testing.assert_allclose(T2T_BASE_64 ** (2 * np.arange(32) / 64), timescales, rtol=1e-12)


@pytest.mark.parametrize("answer", [T2T_BASE_64, np.float32(T2T_BASE_64), torch.tensor(T2T_BASE_64),
                                    np.array([T2T_BASE_64])])
def test_t2t_base_accepts(answer):
    feedback = check_tensor2tensor_base(answer)
    assert feedback.ok, feedback.message


@pytest.mark.parametrize(
    "answer, hint",
    [
        (10000.0, "paper's base"),
        (10000 ** (62 / 64), "upside down"),
        (10000 ** (64 / 63), "num_timescales - 1"),
        (12000.0, "solve for the base"),
        (0.5, "above 1"),
        ("13459", "expected a number"),
        (np.zeros(3), "expected a single number"),
    ],
)
def test_t2t_base_rejects_with_hint(answer, hint):
    feedback = check_tensor2tensor_base(answer)
    assert not feedback.ok and hint in feedback.message


# ---- float32 versions of the reference answers pass ---------------------------------------

def test_every_checker_accepts_its_reference_answer_in_float32():
    assert check_pe_row(np.array(pe_row_5_16(), dtype=np.float32))
    assert check_denominators(np.array([10000 ** (i / 8) for i in range(8)], dtype=np.float32))
    assert check_halves_to_interleaved(interleaved_10_12().astype(np.float32))
    assert check_halves_to_interleaved(torch.from_numpy(interleaved_10_12()).float())
    assert check_tensor2tensor_base(np.float32(T2T_BASE_64))


def test_every_checker_is_exported():
    from companion.exercises import ch03
    assert set(ch03.__all__) == {"check_pe_row", "check_denominators", "check_halves_to_interleaved",
                                 "check_tensor2tensor_base"}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("check, answer", [
    (check_pe_row, lambda: torch.tensor(pe_row_5_16())),
    (check_denominators, lambda: torch.tensor([10000 ** (2 * i / 16) for i in range(8)])),
    (check_halves_to_interleaved, lambda: torch.from_numpy(interleaved_10_12())),
], ids=["pe_row", "denominators", "halves"])
def test_a_half_precision_answer_is_told_about_precision(check, answer, dtype):
    feedback = check(answer().to(dtype))
    assert not feedback
    assert "float32 or float64" in feedback.message
    assert str(dtype).replace("torch.", "") in feedback.message


@pytest.mark.parametrize("decimals", [0, 1])
def test_denominators_rounded_are_told_so(decimals):
    rounded = np.round([10000 ** (2 * i / 16) for i in range(8)], decimals)
    feedback = check_denominators(rounded)
    assert not feedback and "rounded" in feedback.message
