"""Tests of the chapter 15 checkers: right answers pass, typical mistakes get a hint, bad input never raises."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from companion.exercises import (
    Feedback,
    check_left_padded_position_ids,
    check_packed_causal_mask,
    check_schemes_without_position_ids,
)

BAD_INPUTS = [None, "abc", 3.0, [1, 2, 3], [[1, 2], [3]], {"a": 1}, np.zeros((3, 3)), np.array([1j, 2j]), object()]

# ---- ch15-left-position-ids ------------------------------------------------------------

MASK = np.array([[0, 0, 0, 1, 1, 1], [0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])  # the statement's
# Written out by hand for that mask.
POSITIONS = np.array([[0, 0, 0, 0, 1, 2], [0, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]])


def test_position_ids_accept_the_answer_in_many_forms():
    for answer in (POSITIONS, POSITIONS.tolist(), torch.tensor(POSITIONS), POSITIONS.astype(np.float32),
                   POSITIONS.astype(np.float64), torch.tensor(POSITIONS, dtype=torch.int32)):
        assert check_left_padded_position_ids(answer)


@pytest.mark.parametrize(
    "answer, hint",
    [
        (np.tile(np.arange(6), (3, 1)), "column indices"),
        (np.where(MASK == 1, np.cumsum(MASK, axis=1), 0), "Off by one"),
        (np.array([[-1, -1, -1, 0, 1, 2], [-1, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5]]), "0 on every padding"),
        (np.array([[0, 1, 2, 0, 0, 0], [0, 1, 2, 3, 4, 0], [0, 1, 2, 3, 4, 5]]), "right-padded"),
        (np.ones((3, 6)), "running sum"),
        (POSITIONS + 0.5, "whole numbers"),
    ],
)
def test_position_ids_reject_typical_mistakes(answer, hint):
    feedback = check_left_padded_position_ids(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD_INPUTS + [POSITIONS[:2], POSITIONS.T, np.full((3, 6), np.nan), True])
def test_position_ids_never_raise(answer):
    feedback = check_left_padded_position_ids(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- ch15-packed-mask --------------------------------------------------------------------

# Documents of lengths 2, 3, 1: causal blocks on the diagonal, written out by hand.
PACKED = np.array(
    [
        [1, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0],
        [0, 0, 1, 0, 0, 0],
        [0, 0, 1, 1, 0, 0],
        [0, 0, 1, 1, 1, 0],
        [0, 0, 0, 0, 0, 1],
    ],
    dtype=bool,
)
BLOCKS = np.array(
    [[1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [0, 0, 1, 1, 1, 0], [0, 0, 1, 1, 1, 0], [0, 0, 1, 1, 1, 0],
     [0, 0, 0, 0, 0, 1]],
    dtype=bool,
)


def test_packed_mask_accepts_the_answer_in_many_forms():
    for answer in (PACKED, PACKED.astype(int), PACKED.tolist(), torch.tensor(PACKED), PACKED[None],
                   PACKED.astype(np.float32), torch.tensor(PACKED, dtype=torch.float64)):
        assert check_packed_causal_mask(answer)


def test_the_hand_written_mask_is_causal_and_inside_documents():
    assert np.array_equal(PACKED, BLOCKS & np.tril(np.ones((6, 6), dtype=bool)))


@pytest.mark.parametrize(
    "answer, hint",
    [
        (PACKED.T, "transpose"),
        (BLOCKS, "Add the causal part"),
        (np.tril(np.ones((6, 6), dtype=bool)), "plain causal mask"),
        (np.eye(6, dtype=bool), "which tokens share"),
        (PACKED * 2, "True/False"),
    ],
)
def test_packed_mask_rejects_typical_mistakes(answer, hint):
    feedback = check_packed_causal_mask(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD_INPUTS + [PACKED[:5], np.stack([PACKED, PACKED]), np.full((6, 6), np.nan)])
def test_packed_mask_never_raises(answer):
    feedback = check_packed_causal_mask(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- ch15-which-schemes -------------------------------------------------------------------

SHIFT_FREE = {"none", "t5", "rope", "alibi"}


def test_schemes_accept_the_answer_in_many_forms():
    for answer in (SHIFT_FREE, sorted(SHIFT_FREE), tuple(SHIFT_FREE), frozenset(SHIFT_FREE),
                   np.array(sorted(SHIFT_FREE)), ["None", " RoPE", "T5", "alibi"]):
        assert check_schemes_without_position_ids(answer)


@pytest.mark.parametrize(
    "answer, hint",
    [
        (SHIFT_FREE | {"learned"}, "absolute scheme"),
        ({"sinusoidal", "learned"}, "absolute scheme"),
        (SHIFT_FREE - {"none"}, "no position information"),
        (SHIFT_FREE - {"rope"}, "difference of the two positions"),
        (SHIFT_FREE - {"alibi"}, "key position minus query position"),
        ({"xpos"}, "unknown scheme"),
    ],
)
def test_schemes_reject_typical_mistakes(answer, hint):
    feedback = check_schemes_without_position_ids(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", [None, "rope", 3, [1, 2], {"rope": 1}, np.zeros(3), object()])
def test_schemes_never_raise(answer):
    feedback = check_schemes_without_position_ids(answer)
    assert isinstance(feedback, Feedback) and not feedback
