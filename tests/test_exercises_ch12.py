"""Tests of the chapter 12 checkers: right answers pass, typical mistakes get a hint, bad input never raises."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from companion.exercises import (
    Feedback, check_chunk_floor_16, check_early_token_counts, check_order_one_rerun, check_table2_flat_methods,
)
from companion.lab import default_source

BAD = [None, "abc", 3.0j, [1, 2, 3], [[1, 2], [3]], {"a": 1}, np.zeros((3, 3)), object(), float("nan")]


# ---- ch12-floor-16 ---------------------------------------------------------------------

def _floor_16():
    """Independently: H(x1 | x0) from the stationary pair distribution, then h for the other 14 predictions."""
    chain = default_source()
    pairs = chain.stationary.reshape(8, 8)  # p(x0, x1)
    first = float(-(pairs * np.log(pairs / pairs.sum(axis=1, keepdims=True))).sum())
    rate = float(-(chain.stationary[:, None] * chain.transitions * np.log(chain.transitions)).sum())
    return (first + 14 * rate) / 15, first, rate


def test_floor_accepts_the_number_in_many_forms():
    floor, _, _ = _floor_16()
    for answer in (floor, np.float32(floor), torch.tensor(floor), np.array([floor]), round(floor, 4)):
        assert check_chunk_floor_16(answer)


def test_floor_rejects_typical_mistakes():
    floor, first, rate = _floor_16()
    for answer, hint in [
        (rate, "full context"),
        ((first + 15 * rate) / 16, "Off by one"),
        ((first + 13 * rate) / 14, "Off by one"),
        (first + 14 * rate, "total"),
        (first, "first prediction only"),
        (math.log(8), "Not the chunk's floor"),
    ]:
        feedback = check_chunk_floor_16(answer)
        assert isinstance(feedback, Feedback) and not feedback
        assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD + [True, [1.0, 2.0]])
def test_floor_never_raises(answer):
    feedback = check_chunk_floor_16(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- ch12-table2-flat ------------------------------------------------------------------

def test_flat_methods_accepts_any_collection_of_the_names():
    for answer in (["t5", "alibi"], ("alibi", "t5"), {"t5", "alibi"}, ["ALiBi", " T5 "], np.array(["t5", "alibi"])):
        assert check_table2_flat_methods(answer)


@pytest.mark.parametrize(
    "answer, hint",
    [
        (["alibi"], "perplexities"),
        (["t5"], "Getting better counts"),
        (["t5", "alibi", "rotary"], "rotary"),
        (["sinusoidal", "alibi", "t5"], "sinusoidal"),
        ([], "missing"),
        (["rope"], "unknown"),
    ],
)
def test_flat_methods_rejects_typical_mistakes(answer, hint):
    feedback = check_table2_flat_methods(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", [None, "t5", b"alibi", 3, [1, 2], {"a": 1}, np.array([["t5"]]), np.array([1.0]), object()])
def test_flat_methods_never_raises(answer):
    feedback = check_table2_flat_methods(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- ch12-early-tokens -----------------------------------------------------------------

COUNTS = np.array([8192 / 32, 8192 / 64, 8192 / 128, 8192 / 256])  # one starved prediction per chunk


def test_early_counts_accepts_the_counts_in_many_forms():
    for answer in (COUNTS, COUNTS.astype(int).tolist(), torch.tensor(COUNTS), tuple(COUNTS.astype(int))):
        assert check_early_token_counts(answer)


@pytest.mark.parametrize(
    "answer, hint",
    [
        (COUNTS[::-1], "wrong order"),
        (2 * COUNTS, "Two per chunk"),
        (np.ones(4), "per chunk"),
        (1 / np.array([31, 63, 127, 255]), "fractions"),
        (COUNTS * np.array([31, 63, 127, 255]), "every prediction"),
        (COUNTS + 1, "Not the counts"),
    ],
)
def test_early_counts_rejects_typical_mistakes(answer, hint):
    feedback = check_early_token_counts(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD + [np.array(["a", "b", "c", "d"]), np.full(4, np.inf), COUNTS[:3]])
def test_early_counts_never_raises(answer):
    feedback = check_early_token_counts(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- ch12-order-one --------------------------------------------------------------------

def _rerun(none_at_L, alibi_at_L=1.0, order=1, seeds=(0, 1, 2), steps=150):
    """A stand-in for lab.length_extrapolation's result (no training needed to test the checker)."""
    from companion.data import MarkovChain

    n = len(seeds)
    return {"floor": MarkovChain(8, order, seed=0).entropy_rate(), "seeds": list(seeds),
            "loss": {"none": np.full((n, 4), none_at_L), "alibi": np.full((n, 4), alibi_at_L)},
            "history": {"none": np.zeros((n, steps)), "alibi": np.zeros((n, steps))}}


def test_order_one_checks_the_answer_against_the_learners_own_numbers():
    keeps_up, falls_behind = _rerun(1.02), _rerun(1.2, order=2)
    assert check_order_one_rerun(keeps_up, falls_behind, True)
    assert check_order_one_rerun(_rerun(1.2), falls_behind, False)
    assert check_order_one_rerun(keeps_up, _rerun(1.02, order=2), False)  # the control keeps up too
    assert "order-2 control" in repr(check_order_one_rerun(keeps_up, _rerun(1.02, order=2), False))
    assert "Compare the two schemes" in repr(check_order_one_rerun(keeps_up, falls_behind, False))
    assert "Compare the two schemes" in repr(check_order_one_rerun(_rerun(1.2), falls_behind, True))
    assert check_order_one_rerun(_rerun(np.float32(1.02), np.float32(1.0)), falls_behind, np.bool_(True))


@pytest.mark.parametrize("rerun, control, answer, hint", [
    (_rerun(1.0, order=2), _rerun(1.2, order=2), True, "rerun did not use the order-1 chain"),
    (_rerun(1.0), _rerun(1.2), True, "control did not use the order-2 chain"),
    (_rerun(1.0, seeds=(0, 1)), _rerun(1.2, order=2), True, "seeds=(0, 1, 2) in rerun"),
    (_rerun(1.0), _rerun(1.2, order=2, steps=400), True, "Train control for steps=150"),
    (_rerun(1.0), _rerun(1.2, order=2), "yes", "True or False"),
    ({"loss": {}}, _rerun(1.2, order=2), True, "the dict that lab.length_extrapolation"),
    (_rerun(1.0), "result", True, "control should be the dict"),
])
def test_order_one_explains_a_wrong_run(rerun, control, answer, hint):
    feedback = check_order_one_rerun(rerun, control, answer)
    assert not feedback and hint in feedback.message
