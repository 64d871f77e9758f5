"""Tests of the chapter 2 checkers: right answers pass, typical mistakes get a useful hint,
and nothing a learner might pass makes a checker raise."""

import math

import numpy as np
import pytest
import torch

from companion.exercises import Feedback
from companion.exercises.ch02 import (
    check_expected_abs_cosine,
    check_matching_init_std,
    check_smallest_max_len,
    check_table_row_rms,
)

# Independent right answers, from the identities rather than from the solutions' code.
MATCHING_STD = 1 / math.sqrt(2 * 768)  # sqrt(d) * s = sqrt(1/2)
ROW_RMS = np.full(50, 1 / math.sqrt(2))  # sin^2 + cos^2 = 1 for each of the 32 pairs
MAX_LEN = 121  # longest document (120) + one start token

ODD_INPUTS = [
    None,
    "0.5",
    b"x",
    {"a": 1},
    {1, 2},
    object(),
    [1, [2, 3]],
    np.array(["a", "b"]),
    np.array([1 + 2j]),
    np.array([True]),
    torch.zeros(2, 3, requires_grad=True),
    float("nan"),
    float("inf"),
    -1,
    True,
]


@pytest.mark.parametrize(
    "checker",
    [check_matching_init_std, check_table_row_rms, check_smallest_max_len, check_expected_abs_cosine],
)
@pytest.mark.parametrize("answer", ODD_INPUTS, ids=range(len(ODD_INPUTS)))
def test_odd_inputs_are_rejected_without_raising(checker, answer):
    feedback = checker(answer)
    assert isinstance(feedback, Feedback)
    assert not feedback
    assert feedback.message


# --- check_matching_init_std -------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [MATCHING_STD, MATCHING_STD * 1.01, np.float32(MATCHING_STD), np.array([MATCHING_STD]), torch.tensor(MATCHING_STD)],
)
def test_matching_init_std_accepts(answer):
    feedback = check_matching_init_std(answer)
    assert feedback, feedback.message
    assert repr(feedback).startswith("Correct.")


@pytest.mark.parametrize(
    "answer, words",
    [
        (math.sqrt(0.5), "sqrt(d)"),
        (1 / math.sqrt(768), "not 1"),
        (math.sqrt(0.5) * math.sqrt(768), "other way"),
        (math.sqrt(0.5) / 768, "not by d"),
        (0.0, "positive"),
        (-MATCHING_STD, "positive"),
        (0.02, "RMS"),
        ([MATCHING_STD, MATCHING_STD], "single number"),
    ],
)
def test_matching_init_std_rejects_with_hint(answer, words):
    feedback = check_matching_init_std(answer)
    assert not feedback
    assert words in feedback.message
    assert f"{MATCHING_STD:.4f}" not in feedback.message  # the hint never gives the answer away


# --- check_table_row_rms -----------------------------------------------------------------


def _table(n=50, d=64):
    pos = np.arange(n)[:, None]
    i = np.arange(d // 2)[None, :]
    angle = pos / 10000.0 ** (2 * i / d)
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)  # halves layout: same rows, permuted


@pytest.mark.parametrize(
    "answer",
    [ROW_RMS, list(ROW_RMS), ROW_RMS.astype(np.float32), torch.tensor(ROW_RMS), torch.tensor(ROW_RMS).float(),
     np.sqrt((_table() ** 2).mean(axis=1))],
)
def test_row_rms_accepts(answer):
    feedback = check_table_row_rms(answer)
    assert feedback, feedback.message


@pytest.mark.parametrize(
    "answer, words",
    [
        (_table().std(axis=1), "standard deviation"),
        ((_table() ** 2).mean(axis=1), "root"),
        (np.linalg.norm(_table(), axis=1), "Euclidean"),
        (np.sqrt((_table() ** 2).mean(axis=0)), "axis 0"),
        (_table(), "single number"),
        (np.zeros(49), "shape (50,)"),
        (np.full(50, np.nan), "NaN"),
        (np.ones(50), "square root of the mean"),
        (0.7071, "shape (50,)"),
    ],
)
def test_row_rms_rejects_with_hint(answer, words):
    feedback = check_table_row_rms(answer)
    assert not feedback
    assert words in feedback.message


# --- check_smallest_max_len --------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [MAX_LEN, np.int64(MAX_LEN), torch.tensor(MAX_LEN), 121.0, np.float32(121), torch.tensor(121.0)],
)
def test_max_len_accepts(answer):
    feedback = check_smallest_max_len(answer)
    assert feedback, feedback.message


def test_max_len_answer_really_is_the_smallest():
    from companion.sinusoidal import SinusoidalPositionalEncoding

    batch = torch.zeros(4, MAX_LEN, 8)
    SinusoidalPositionalEncoding(MAX_LEN, 8)(batch)  # accepted
    with pytest.raises(ValueError):
        SinusoidalPositionalEncoding(MAX_LEN - 1, 8)(batch)


@pytest.mark.parametrize(
    "answer, words",
    [
        (120, "by one"),
        (64, "too short"),
        (312, "per token"),
        (316, "per token"),
        (512, "not the smallest"),
        (99.5, "whole number"),
        (torch.tensor(120.5), "whole number"),
    ],
)
def test_max_len_rejects_with_hint(answer, words):
    feedback = check_smallest_max_len(answer)
    assert not feedback
    assert words in feedback.message
    assert "121" not in feedback.message


def test_row_rms_names_the_rows_that_are_off():
    answer = ROW_RMS.copy()
    answer[[4, 17]] = 0.5
    feedback = check_table_row_rms(answer)
    assert not feedback and "rows [4, 17]" in feedback.message


# --- check_expected_abs_cosine -----------------------------------------------------------


def mean_abs_cosine_by_integration(d, points=200_001):
    """Independent reference: a coordinate t of a random unit vector in d dimensions has
    density proportional to (1 - t^2)^((d - 3) / 2); integrate |t| against it."""
    t = np.linspace(-1.0, 1.0, points)
    density = (1.0 - t**2) ** ((d - 3) / 2)
    return np.trapezoid(np.abs(t) * density, t) / np.trapezoid(density, t)


ABS_COS_768 = mean_abs_cosine_by_integration(768)


def test_abs_cosine_reference_matches_a_seeded_measurement():
    rng = np.random.default_rng(3)
    e = rng.standard_normal((20000, 768))
    p = rng.standard_normal(768)
    cos = e @ p / np.linalg.norm(e, axis=1) / np.linalg.norm(p)
    assert abs(np.abs(cos).mean() / ABS_COS_768 - 1) < 0.02


@pytest.mark.parametrize(
    "answer",
    [ABS_COS_768, math.sqrt(2 / (math.pi * 768)), np.float32(ABS_COS_768), torch.tensor(ABS_COS_768)],
)
def test_abs_cosine_accepts(answer):
    feedback = check_expected_abs_cosine(answer)
    assert feedback, feedback.message


@pytest.mark.parametrize(
    "answer, words",
    [
        (0.0, "mean of the cosine itself"),
        (1 / math.sqrt(768), "root-mean-square"),
        (math.sqrt(2 / math.pi), "norm of the random vector"),
        (1 / 768, "not like 1/d"),
        (0.05, "What is the mean of |z|"),
        (-0.03, "non-negative"),
    ],
)
def test_abs_cosine_rejects_with_hint(answer, words):
    feedback = check_expected_abs_cosine(answer)
    assert not feedback and words in feedback.message


# --- float32 versions of the reference answers pass ------------------------------------


def test_every_checker_accepts_its_reference_answer_in_float32():
    assert check_matching_init_std(np.float32(MATCHING_STD))
    assert check_table_row_rms(ROW_RMS.astype(np.float32))
    assert check_smallest_max_len(np.float32(MAX_LEN))
    assert check_expected_abs_cosine(np.float32(ABS_COS_768))
