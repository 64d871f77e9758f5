"""Tests of the chapter 13 checkers: right answers pass, typical mistakes get a useful hint,
and nothing a learner might pass makes a checker raise."""

import numpy as np
import pytest
import torch

from companion.exercises import Feedback, check_position_dim_rerun
from companion.exercises.ch13 import check_seed_spread_verdicts, check_widened_concat_parameters
from companion.model import ModelConfig, TinyDecoder


def parameters(dim, **kwargs):
    return TinyDecoder(ModelConfig(vocab_size=8, dim=dim, num_layers=2, position="learned", max_len=32, **kwargs)).num_parameters()


# Independent right answers: the companion's own model, and the intervals worked out by hand.
WIDENED = parameters(128, combine="concat", position_dim=32)
ADDED = parameters(96)
SPLIT = parameters(96, combine="concat", position_dim=32)
# A: X 1.701 +/- 0.0105 = [1.6905, 1.7115], Y 1.6837 +/- 0.0045 = [1.6792, 1.6882]: apart.
# B: X 1.661 +/- 0.0105 = [1.6505, 1.6715], Y 1.6547 +/- 0.0135 = [1.6412, 1.6682]: overlap.
VERDICTS = ["real", "within the spread"]

ODD_INPUTS = [None, "0.5", b"x", {"a": 1}, {1, 2}, object(), [1, [2, 3]], np.array(["a", "b"]),
              np.array([1 + 2j]), torch.zeros(2, 3, requires_grad=True), float("nan"), float("inf"), -1, True,
              ["real"], ["real", 1], ("real", "maybe"), 3.5]


@pytest.mark.parametrize("checker", [check_widened_concat_parameters, check_seed_spread_verdicts])
@pytest.mark.parametrize("answer", ODD_INPUTS, ids=range(len(ODD_INPUTS)))
def test_odd_inputs_are_rejected_without_raising(checker, answer):
    feedback = checker(answer)
    assert isinstance(feedback, Feedback)
    assert not feedback
    assert feedback.message


def test_widened_reference_is_the_learned_concat_model():
    assert WIDENED == 399_624
    assert SPLIT < ADDED < WIDENED


@pytest.mark.parametrize("answer", [WIDENED, np.int64(WIDENED), torch.tensor(WIDENED), np.array(WIDENED)])
def test_widened_accepts(answer):
    feedback = check_widened_concat_parameters(answer)
    assert feedback, feedback.message
    assert repr(feedback).startswith("Correct.")


@pytest.mark.parametrize(
    "answer, words",
    [(ADDED, "adding model"), (2 * ADDED, "square"), (SPLIT, "splits"), (WIDENED - 32 * 32, "learned position table"),
     (float(WIDENED), "integer"), (WIDENED + 1, "build the twin")],
)
def test_widened_rejects_with_hint(answer, words):
    feedback = check_widened_concat_parameters(answer)
    assert not feedback
    assert words in feedback.message


@pytest.mark.parametrize("answer", [VERDICTS, tuple(VERDICTS), ["Real ", "Within  the spread"]])
def test_verdicts_accept(answer):
    feedback = check_seed_spread_verdicts(answer)
    assert feedback, feedback.message


@pytest.mark.parametrize(
    "answer, words",
    [(VERDICTS[::-1], "swapped"), (["real", "real"], "clears zero"), (["within the spread"] * 2, "seed by seed"),
     ("real", "list of two"), (["real", "within"], "one of")],
)
def test_verdicts_reject_with_hint(answer, words):
    feedback = check_seed_spread_verdicts(answer)
    assert not feedback
    assert words in feedback.message


# ---- ch13-position-dim -----------------------------------------------------------------

def _rows(position_dim, losses, steps=400, seeds=(0, 1, 2), options=True):
    """A stand-in for lab.add_vs_concat's rows, with the parameter count of the lab's real model."""
    from companion import lab

    params = TinyDecoder(ModelConfig(8, position="sinusoidal", combine="concat", position_dim=position_dim,
                                     max_len=32, **lab.MODEL)).num_parameters()
    given = {"position_dim": position_dim} if options else {}
    return [{"position": "sinusoidal", "combine": "concat", "scale": True, "options": given, "seed": s,
             "loss": loss, "parameters": params, "history": [0.0] * steps} for s, loss in zip(seeds, losses)]


def test_position_dim_reference_counts_differ_by_the_token_table():
    # Moving 16 features from tokens to positions removes 16 columns of the 8-row token table.
    assert _rows(8, [1.6])[0]["parameters"] - _rows(24, [1.6])[0]["parameters"] == 8 * 16


def test_position_dim_checks_the_verdict_against_the_learners_numbers():
    apart = (_rows(8, [1.70, 1.71, 1.72]), _rows(24, [1.60, 1.61, 1.62]))
    close = (_rows(8, [1.60, 1.62, 1.64]), _rows(24, [1.61, 1.61, 1.63]))
    assert check_position_dim_rerun(*apart, "real")
    assert check_position_dim_rerun(*close, "within the spread")
    assert not check_position_dim_rerun(*apart, "within the spread")
    float32 = (_rows(8, np.float32([1.70, 1.71, 1.72])), _rows(24, np.float32([1.60, 1.61, 1.62])))
    assert check_position_dim_rerun(*float32, "real")
    float64 = (_rows(8, np.float64([1.60, 1.62, 1.64])), _rows(24, np.float64([1.61, 1.61, 1.63])))
    assert check_position_dim_rerun(*float64, "within the spread")


def test_position_dim_accepts_two_separate_calls():
    # lab.add_vs_concat(position_dim=8, ...) gives rows without options; the split is what counts.
    assert check_position_dim_rerun(_rows(8, [1.6] * 3, options=False), _rows(24, [1.7] * 3, options=False),
                                    "real")


def test_position_dim_rejects_the_rows_of_one_call_unsplit():
    both = _rows(8, [1.6] * 3) + _rows(24, [1.6] * 3, seeds=(0, 1, 2))
    feedback = check_position_dim_rerun(both, _rows(24, [1.6] * 3), "real")
    assert not feedback and "one split per list" in feedback.message


@pytest.mark.parametrize("rows_8, rows_24, answer, hint", [
    (_rows(16, [1.6] * 3), _rows(24, [1.6] * 3), "real", "{'position_dim': 8}"),
    (_rows(24, [1.6] * 3), _rows(8, [1.6] * 3), "real", "rows_8: these rows do not have 8 position features"),
    (_rows(8, [1.6] * 3, steps=130), _rows(24, [1.6] * 3), "real", "steps=400"),
    (_rows(8, [1.6] * 2, seeds=(0, 1)), _rows(24, [1.6] * 3), "real", "seeds=(0, 1, 2)"),
    (_rows(8, [1.6] * 3), _rows(24, [1.6] * 3), "maybe", "one of"),
    ("rows", _rows(24, [1.6] * 3), "real", "list of the rows"),
    (_rows(8, [1.6] * 3), [dict(r, position="learned") for r in _rows(24, [1.6] * 3)], "real", "'sinusoidal'"),
])
def test_position_dim_explains_a_wrong_rerun(rows_8, rows_24, answer, hint):
    feedback = check_position_dim_rerun(rows_8, rows_24, answer)
    assert not feedback and hint in feedback.message


@pytest.mark.parametrize("answer", ODD_INPUTS, ids=range(len(ODD_INPUTS)))
def test_position_dim_odd_inputs_are_rejected_without_raising(answer):
    feedback = check_position_dim_rerun(answer, answer, answer)
    assert isinstance(feedback, Feedback) and not feedback and feedback.message
