"""Tests of the chapter 8 checkers: right answers pass, typical mistakes get a hint, bad input never raises."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from companion.exercises import Feedback, check_ntk_base, check_ntk_unseen_pairs, check_yarn_classes

BAD_INPUTS = [None, "abc", [1, 2, 3], {"a": 1}, np.zeros((3, 3)), np.array([1j, 2j]), float("nan"), True]


def _speed(i: int, dim: int, base: float = 10000.0) -> float:
    return base ** (-2 * i / dim)


# ---- ch08-ntk-base ---------------------------------------------------------------------

# The base that divides the slowest speed of d = 128 by exactly 8, solved for directly:
# (b')^(-126/128) = 10000^(-126/128) / 8  =>  b' = 10000 * 8^(128/126).
NTK_BASE = math.exp(math.log(10000.0) + (128 / 126) * math.log(8.0))


def test_ntk_base_value_does_what_the_exercise_says():
    assert math.isclose(_speed(0, 128, NTK_BASE), 1.0)
    assert math.isclose(_speed(63, 128) / _speed(63, 128, NTK_BASE), 8.0, rel_tol=1e-12)


@pytest.mark.parametrize("form", [float, np.float64, np.float32, lambda v: np.array(v), torch.tensor, lambda v: [v]])
def test_ntk_base_accepts_many_forms(form):
    assert check_ntk_base(form(NTK_BASE))


@pytest.mark.parametrize(
    "answer, hint",
    [
        (80000.0, "exactly s"),
        (10000.0 * 8 ** (126 / 128), "upside down"),
        (10000.0 / 8, "grow"),
        (10000.0 * 8**2, "slowest pair"),
    ],
)
def test_ntk_base_rejects_typical_mistakes(answer, hint):
    feedback = check_ntk_base(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD_INPUTS + [np.array([1.0, 2.0]), float("inf")])
def test_ntk_base_never_raises(answer):
    feedback = check_ntk_base(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert "expected" in feedback.message.lower()  # "Expected an answer" for None


# ---- ch08-yarn-classes -----------------------------------------------------------------

def _classes() -> tuple[int, int]:
    """Loop over the pairs of d = 64, L = 4096 and classify each by its turns."""
    kept = interpolated = 0
    for i in range(32):
        turns = 4096 * _speed(i, 64) / (2 * math.pi)
        kept += turns > 32
        interpolated += turns < 1
    return kept, interpolated


def test_yarn_classes_truth_is_not_near_a_threshold():
    for i in range(32):
        turns = 4096 * _speed(i, 64) / (2 * math.pi)
        assert abs(math.log(turns / 32)) > 0.05 and abs(math.log(turns)) > 0.05
    assert _classes() == (11, 9)


def test_yarn_classes_agree_with_the_companion():
    from companion.rope import rope_frequencies

    ratio = rope_frequencies(64, scaling={"type": "yarn", "factor": 4, "original_max_len": 4096}) / rope_frequencies(64)
    assert (int(np.isclose(ratio, 1).sum()), int(np.isclose(ratio, 0.25).sum())) == _classes()


def test_yarn_classes_accepts_many_forms():
    kept, interpolated = _classes()
    for answer in ((kept, interpolated), [kept, interpolated], np.array([kept, interpolated]),
                   torch.tensor([kept, interpolated]), (float(kept), np.int64(interpolated))):
        assert check_yarn_classes(answer)


@pytest.mark.parametrize(
    "answer, hint",
    [
        ((9, 11), "swapped"),
        ((11, 21), "ramp"),
        ((17, 3), "radians"),
        ((21, 18), "count the turns"),
    ],
)
def test_yarn_classes_rejects_typical_mistakes(answer, hint):
    feedback = check_yarn_classes(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize(
    "answer",
    [None, "11,9", 11, (11,), (11, 9, 12), {"kept": 11}, np.ones((2, 2)), (11.5, 9), ("a", "b"), (None, 9),
     (True, 9)],
)
def test_yarn_classes_never_raises(answer):
    feedback = check_yarn_classes(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert "expected" in feedback.message.lower()  # "Expected an answer" for None


# ---- ch08-ntk-unseen -------------------------------------------------------------------

def _unseen() -> int:
    """Loop: a pair with less than one turn in L sees a new angle if (8L - 1) theta' > L theta."""
    d, length, s = 64, 4096, 8
    new_base = 10000.0 * s ** (d / (d - 2))
    count = 0
    for i in range(d // 2):
        old, new = _speed(i, d), _speed(i, d, new_base)
        if length * old < 2 * math.pi and (s * length - 1) * new > length * old:
            count += 1
    return count


def test_ntk_unseen_truth():
    assert _unseen() == 8


@pytest.mark.parametrize("form", [int, float, np.int64, lambda v: np.array(v), torch.tensor])
def test_ntk_unseen_accepts_many_forms(form):
    assert check_ntk_unseen_pairs(form(_unseen()))


@pytest.mark.parametrize(
    "answer, hint",
    [(9, "exactly s"), (0, "how much"), (40, "between 0 and 32"), (-1, "between 0 and 32"), (5, "less than one turn")],
)
def test_ntk_unseen_rejects_typical_mistakes(answer, hint):
    feedback = check_ntk_unseen_pairs(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD_INPUTS + [8.5, np.array([8, 9])])
def test_ntk_unseen_never_raises(answer):
    feedback = check_ntk_unseen_pairs(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert "expected" in feedback.message.lower()  # "Expected an answer" for None


# ---- float32 answers (a right answer computed in float32 must pass) ----------------------

def test_ntk_base_accepts_float32():
    assert check_ntk_base(np.float32(10000.0) * np.float32(8.0) ** np.float32(128 / 126))
    assert check_ntk_base(torch.tensor(10000.0) * torch.tensor(8.0) ** (128 / 126))


def test_yarn_classes_accept_float32():
    assert check_yarn_classes(np.array([11, 9], dtype=np.float32))
    assert check_yarn_classes(torch.tensor([11.0, 9.0]))


def test_ntk_unseen_accepts_float32():
    assert check_ntk_unseen_pairs(np.float32(8))
    assert check_ntk_unseen_pairs(torch.tensor(8.0))
