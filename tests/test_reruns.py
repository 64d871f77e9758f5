"""The grader verifies the rerun exercises against its own run of the same training
(companion.exercises.reruns): made-up numbers fail, the real run passes."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from companion.exercises import reruns
from companion.exercises.registry import EXERCISES, grade_value


def _fake_order_one():
    def run(none, alibi):
        return {"floor": 0.0, "seeds": [0, 1, 2], "history": {},
                "loss": {"none": np.full((3, 1), none),
                         "alibi": np.full((3, 1), alibi)}}
    return run(1.60, 1.60), run(1.90, 1.60)


@pytest.fixture
def grader_run(monkeypatch):
    ours = _fake_order_one()
    monkeypatch.setattr(reruns, "_order_one", lambda: ours)
    return ours


def test_the_grader_s_own_numbers_pass(grader_run):
    assert reruns.verify("ch12-order-one", *grader_run, True) is None, (
        "the run the grader trained itself is accepted")


def test_numbers_within_the_tolerance_pass(grader_run):
    rerun, control = copy.deepcopy(grader_run)
    rerun["loss"]["none"] += 0.8 * reruns.TOLERANCE  # another CPU's rounding
    assert reruns.verify("ch12-order-one", rerun, control, True) is None


def test_made_up_numbers_fail_and_say_so(grader_run):
    rerun, control = copy.deepcopy(grader_run)
    control["loss"]["none"][:] = 1.61  # typed in, so that the verdict comes out True
    problem = reruns.verify("ch12-order-one", rerun, control, False)
    assert problem is not None, "numbers no training gives are refused"
    assert "control['loss']['none']" in problem, f"it names which numbers: {problem}"


def test_a_wrong_shape_is_named(grader_run):
    rerun, control = copy.deepcopy(grader_run)
    rerun["loss"]["alibi"] = np.zeros(5)
    assert "shape" in reruns.verify("ch12-order-one", rerun, control, True)


def test_grade_value_turns_a_verified_mismatch_into_not_yet(monkeypatch):
    from companion.exercises._feedback import Feedback

    ex = EXERCISES["ch12-order-one"]

    class Ex:  # the registry's entry, with a checker that accepts anything
        label = ex.label
        checker = staticmethod(lambda *values: Feedback(True, "Correct."))

    monkeypatch.setattr(reruns, "verify", lambda label, *values: "made up")
    verdict = grade_value(Ex, 1, 2, 3)
    assert not verdict.ok, "the checker's Correct is overruled"
    assert "made up" in verdict.message, "with the reason"


def test_only_the_three_rerun_exercises_are_verified():
    assert set(reruns.VERIFIERS) == {"ch12-order-one", "ch13-position-dim",
                                     "ch14-small-base"}
    assert set(reruns.VERIFIERS) <= set(EXERCISES), "each is a registered exercise"
    assert reruns.verify("ch03-pe-row", 1.0) is None, "other exercises pass through"
