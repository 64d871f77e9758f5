"""Tests of the chapter 6 checkers: right answers pass, typical mistakes get a hint, bad input never raises."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from companion.exercises import (
    Feedback,
    check_positions_without_row,
    check_shaw_index_matrix,
    check_t5_buckets_of_offsets,
)

BAD_INPUTS = [None, "abc", 3.5, [1, 2, 3], [[1, 2], [3]], {"a": 1}, np.zeros((3, 3)), np.array([1j, 2j]), [True] * 6]

# ---- ch06-t5-buckets -------------------------------------------------------------------
# Offsets (key - query): 100, 20, 3 back; 0; 5, 40 ahead. Read off T5's bucket ranges by hand:
# back: exact 0..7, then [8,11] -> 8, [12,15] -> 9, [16,22] -> 10, ..., [91, inf) -> 15; ahead: +16,
# except that offset 0 is bucket 0.
T5_RIGHT = [15, 10, 3, 0, 21, 28]
T5_SWAPPED = [31, 26, 19, 0, 5, 12]
T5_DECODER = [30, 17, 3, 0, 0, 0]  # 16 exact buckets back, then log; keys ahead all in bucket 0


def test_t5_buckets_accepts_the_answer_in_many_forms():
    for answer in (T5_RIGHT, tuple(T5_RIGHT), np.array(T5_RIGHT), torch.tensor(T5_RIGHT), np.array(T5_RIGHT, float)):
        assert check_t5_buckets_of_offsets(answer)


def test_t5_buckets_answer_matches_the_companion():
    from companion.relative import t5_bucket

    assert t5_bucket(torch.tensor([-100, -20, -3, 0, 5, 40])).tolist() == T5_RIGHT
    assert t5_bucket(torch.tensor([-100, -20, -3, 0, 5, 40]), bidirectional=False).tolist() == T5_DECODER


@pytest.mark.parametrize(
    "answer, hint",
    [
        (T5_SWAPPED, "key position minus query position"),
        (T5_DECODER, "unidirectional"),
        ([15, 10, 3, 0, 21, 32], "0..31"),
        ([15, 10, 3, 16, 21, 28], "logarithmically"),
        ([15, 11, 3, 0, 21, 28], "1 of the 6"),
    ],
)
def test_t5_buckets_rejects_typical_mistakes(answer, hint):
    feedback = check_t5_buckets_of_offsets(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD_INPUTS + [T5_RIGHT[:5], [1.5] * 6, [np.nan] * 6])
def test_t5_buckets_never_raises(answer):
    feedback = check_t5_buckets_of_offsets(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- ch06-shaw-index -------------------------------------------------------------------

def _shaw(n: int, k: int) -> np.ndarray:
    """Entry (i, j) = clip(j - i, -k, k) + k, by a double loop."""
    out = np.empty((n, n), dtype=int)
    for i in range(n):
        for j in range(n):
            out[i, j] = max(-k, min(k, j - i)) + k
    return out


SHAW = _shaw(5, 3)


def test_shaw_index_accepts_the_matrix_in_many_forms():
    for answer in (SHAW, SHAW.tolist(), torch.tensor(SHAW), SHAW.astype(float)):
        assert check_shaw_index_matrix(answer)


def test_shaw_index_matches_the_companion():
    from companion.relative import clipped_relative_positions

    np.testing.assert_array_equal(clipped_relative_positions(5, max_distance=3).numpy(), SHAW)


@pytest.mark.parametrize(
    "answer, hint",
    [
        (SHAW - 3, "start at 0"),
        (SHAW.T, "swapped"),
        (_shaw(5, 10) - 7, "not clipped"),
        (_shaw(5, 2), "depend on the offset"),
        (np.zeros((5, 5)), "depend on the offset"),
    ],
)
def test_shaw_index_rejects_typical_mistakes(answer, hint):
    feedback = check_shaw_index_matrix(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD_INPUTS + [np.zeros((7, 7)), np.full((5, 5), np.inf)])
def test_shaw_index_never_raises(answer):
    feedback = check_shaw_index_matrix(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- ch06-missing-rows -----------------------------------------------------------------

MISSING = list(range(512, 600))


def test_missing_rows_accepts_the_positions_in_many_forms():
    for answer in (MISSING, np.arange(512, 600), torch.arange(512, 600), MISSING[::-1], tuple(MISSING)):
        assert check_positions_without_row(answer)


def test_missing_rows_agree_with_the_module():
    from companion.learned import LearnedPositionalEmbedding

    table = LearnedPositionalEmbedding(512, 4)
    table(torch.zeros(1, 512, 4))
    with pytest.raises(ValueError):
        table(torch.zeros(1, 513, 4))
    assert len(MISSING) == 88


@pytest.mark.parametrize(
    "answer, hint",
    [
        (list(range(513, 601)), "counted from 1"),
        (list(range(511, 600)), "Off by one"),
        (list(range(513, 600)), "Off by one"),
        (88, "one number"),
        (MISSING + [512], "more than once"),
        (list(range(0, 88)), "Which rows"),
    ],
)
def test_missing_rows_rejects_typical_mistakes(answer, hint):
    feedback = check_positions_without_row(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD_INPUTS + [[], [512.5], [np.inf]])
def test_missing_rows_never_raises(answer):
    feedback = check_positions_without_row(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- float32 answers (a right answer computed in float32 must pass) ----------------------

def test_t5_buckets_accept_float32():
    answer = np.array([15, 10, 3, 0, 21, 28], dtype=np.float32)
    assert check_t5_buckets_of_offsets(answer)
    assert check_t5_buckets_of_offsets(torch.from_numpy(answer))


def test_shaw_index_accepts_float32():
    i, j = np.meshgrid(np.arange(5), np.arange(5), indexing="ij")
    answer = (np.clip(j - i, -3, 3) + 3).astype(np.float32)
    assert check_shaw_index_matrix(answer)
    assert check_shaw_index_matrix(torch.from_numpy(answer))


def test_positions_without_row_accept_float32():
    answer = np.arange(512, 600, dtype=np.float32)
    assert check_positions_without_row(answer)
    assert check_positions_without_row(torch.from_numpy(answer))
