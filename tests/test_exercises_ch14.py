"""Tests of the chapter 14 checkers: right answers pass, typical mistakes get a hint, bad input never raises."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from companion.exercises import (
    Feedback, check_best_zero_shot_at_4x, check_ntk_base_head16, check_small_base_rerun, check_tiny_yarn_gamma,
)

BAD_INPUTS = [None, "abc", {"a": 1}, np.zeros((3, 3)), np.array([1j, 2j]), float("nan"), True, object()]


def _rejected(feedback, hint):
    assert isinstance(feedback, Feedback) and not feedback
    message = feedback.message.replace("Expected an answer", "expected an answer")  # None
    assert hint in message, feedback.message


# ---- ch14-yarn-gamma -------------------------------------------------------------------

def _gamma_loop() -> np.ndarray:
    """gamma_i written out pair by pair: turns of 10000^(-i/8) rad/position over 32 positions."""
    out = []
    for i in range(8):
        turns = 32 * 10000.0 ** (-2 * i / 16) / (2 * math.pi)
        out.append(min(1.0, max(0.0, (turns - 1) / 31)))
    return np.array(out)


GAMMA = _gamma_loop()


def test_gamma_reference_matches_the_chapter_story():
    assert np.count_nonzero(GAMMA) == 2 and GAMMA.max() < 0.2  # two pairs on the ramp, none kept


@pytest.mark.parametrize("form", [np.asarray, list, torch.tensor, lambda v: v.astype(np.float32)])
def test_gamma_accepts_many_forms(form):
    assert check_tiny_yarn_gamma(form(GAMMA))


@pytest.mark.parametrize(
    "answer, hint",
    [
        ((32 * 10000.0 ** (-np.arange(8) / 8) / (2 * math.pi) - 1) / 31, "negative"),
        (np.clip((32 * 10000.0 ** (-np.arange(8) / 8) - 1) / 31, 0, 1), "radians"),
        (1 - GAMMA, "weight of the original speed"),
        (GAMMA[::-1].copy(), "reversed"),
        (np.full(8, 2.0), "between 0 and 1"),
        (np.full(8, 0.5), "turns of each pair"),
    ],
)
def test_gamma_rejects_typical_mistakes(answer, hint):
    _rejected(check_tiny_yarn_gamma(answer), hint)


@pytest.mark.parametrize("answer", BAD_INPUTS + [np.zeros(7), [1.0, 2.0], np.array([np.nan] * 8)])
def test_gamma_never_raises(answer):
    _rejected(check_tiny_yarn_gamma(answer), "expected")


# ---- ch14-ntk-base ---------------------------------------------------------------------

# Solve (b')^(-14/16) = 10000^(-14/16) / 4 for b' directly, in logs.
NTK_BASE = math.exp(math.log(10000.0) + (16 / 14) * math.log(4.0))


def test_ntk_base_does_what_the_exercise_says():
    slowest_before, slowest_after = 10000.0 ** (-14 / 16), NTK_BASE ** (-14 / 16)
    assert math.isclose(slowest_before / slowest_after, 4.0, rel_tol=1e-12)


@pytest.mark.parametrize("form", [float, np.float64, np.float32, np.array, torch.tensor, lambda v: [v]])
def test_ntk_base_accepts_many_forms(form):
    assert check_ntk_base_head16(form(NTK_BASE))


@pytest.mark.parametrize(
    "answer, hint",
    [(40000.0, "exactly s"), (10000.0 * 4 ** (14 / 16), "upside down"), (2500.0, "grow"), (10000.0 * 16, "slowest pair")],
)
def test_ntk_base_rejects_typical_mistakes(answer, hint):
    _rejected(check_ntk_base_head16(answer), hint)


@pytest.mark.parametrize("answer", BAD_INPUTS + [np.array([1.0, 2.0]), float("inf")])
def test_ntk_base_never_raises(answer):
    _rejected(check_ntk_base_head16(answer), "expected")


# ---- ch14-best-at-4x -------------------------------------------------------------------

@pytest.mark.parametrize("answer", ["linear", "PI", " Linear ", "position interpolation"])
def test_best_at_4x_accepts_the_lowest_loss(answer):
    # In the exercise's dict the 4x losses are none 1.98, linear 1.83, ntk 1.88, yarn 1.85.
    assert check_best_zero_shot_at_4x(answer)


@pytest.mark.parametrize(
    "answer, hint",
    [("ntk", "best at 2L"), ("NTK", "best at 2L"), ("yarn", "best at 8L"), ("none", "highest loss")],
)
def test_best_at_4x_rejects_typical_mistakes(answer, hint):
    _rejected(check_best_zero_shot_at_4x(answer), hint)


@pytest.mark.parametrize("answer", [None, 4, 1.83, ["linear"], {"linear": 1.83}, "rope", ""])
def test_best_at_4x_never_raises(answer):
    _rejected(check_best_zero_shot_at_4x(answer), "expected")


# ---- ch14-small-base -------------------------------------------------------------------

def _result(yarn, linear, options=None, seeds=(0, 1), factors=(4,), steps=200):
    """A stand-in for lab.rope_extension's result."""
    n = len(seeds)
    return {"seeds": list(seeds), "factors": list(factors), "steps": steps,
            "model_options": {"rope_base": 100.0} if options is None else options,
            "zero_shot": {"yarn": np.full((n, 1), yarn), "linear": np.full((n, 1), linear),
                          "none": np.full((n, 1), 2.0), "ntk": np.full((n, 1), 2.0)}}


def test_small_base_counts_kept_pairs_and_reads_the_learners_numbers():
    assert check_small_base_rerun(_result(1.8, 1.9), (1, True))
    assert check_small_base_rerun(_result(1.9, 1.8), (1, False))
    assert check_small_base_rerun(_result(np.float32(1.8), np.float32(1.9)), (np.int64(1), np.bool_(True)))
    assert "Compare result" in check_small_base_rerun(_result(1.9, 1.8), (1, True)).message
    assert "Count the pairs" in check_small_base_rerun(_result(1.8, 1.9), (0, True)).message


@pytest.mark.parametrize("result, answer, hint", [
    (_result(1.8, 1.9, options={}), (1, True), "model_options"),
    (_result(1.8, 1.9, seeds=(0, 1, 2)), (1, True), "seeds=(0, 1)"),
    (_result(1.8, 1.9, factors=(2, 4)), (1, True), "factors=(4,)"),
    (_result(1.8, 1.9, steps=400), (1, True), "steps=200"),
    (_result(1.8, 1.9), 1, "a pair"),
    (_result(1.8, 1.9), (1, "yes"), "True or False"),
    ({"zero_shot": {}}, (1, True), "lab.rope_extension"),
])
def test_small_base_explains_a_wrong_rerun(result, answer, hint):
    feedback = check_small_base_rerun(result, answer)
    assert not feedback and hint in feedback.message
