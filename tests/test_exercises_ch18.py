"""Tests of the chapter 18 checkers: right answers pass, typical mistakes get a hint, bad input never raises."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from companion.alibi import alibi_slopes
from companion.exercises import Feedback, check_alibi_slopes_of_24, check_checkpoint_layouts

# ---- ch18-checkpoint-layouts ---------------------------------------------------------

# Written out by hand from what transformers' rotary code does (book/10_porting.ipynb runs it).
LAYOUTS = {"gpt_neox": "halves", "gptj": "interleaved", "llama": "halves", "roformer": "interleaved"}
OTHER = {"halves": "interleaved", "interleaved": "halves"}


def test_layouts_accept_the_answer_in_several_forms():
    for answer in (
        LAYOUTS,
        dict(reversed(list(LAYOUTS.items()))),  # any key order
        {k.upper().replace("_", "-"): v.upper() for k, v in LAYOUTS.items()},  # GPT-NEOX, HALVES
        {k: f" {v} " for k, v in LAYOUTS.items()},
        [LAYOUTS[f] for f in ("gpt_neox", "gptj", "llama", "roformer")],  # the statement's order
        tuple(LAYOUTS[f] for f in ("gpt_neox", "gptj", "llama", "roformer")),
    ):
        assert check_checkpoint_layouts(answer), answer


@pytest.mark.parametrize(
    "answer, hint",
    [
        ({k: OTHER[v] for k, v in LAYOUTS.items()}, "Every layout is the other one"),
        ({**LAYOUTS, "llama": "interleaved"}, "Meta's reference code"),
        ({**LAYOUTS, "gptj": "halves"}, "1 of the 4"),
        ({**LAYOUTS, "gpt_neox": "interleaved", "roformer": "halves"}, "2 of the 4"),
        ({k: "interleaved" for k in LAYOUTS}, "2 of the 4"),
        ({k: v for k, v in LAYOUTS.items() if k != "llama"}, "missing ['llama']"),
        ({**LAYOUTS, "bert": "halves"}, "unknown ['bert']"),
        ({**LAYOUTS, "gptj": "neighbours"}, "'interleaved' or 'halves'"),
        ({**LAYOUTS, "gptj": 0}, "'interleaved' or 'halves'"),
        (["halves", "interleaved"], "expected 4 layouts"),
    ],
)
def test_layouts_reject_typical_mistakes(answer, hint):
    feedback = check_checkpoint_layouts(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", [None, "halves", 3, 1.5, np.zeros(4), torch.zeros(4), object(), ..., {}, []])
def test_layouts_never_raise(answer):
    feedback = check_checkpoint_layouts(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- ch18-alibi-24 -----------------------------------------------------------------------

# By hand: p = 16; head 5 is 2^(-8 * 6 / 16); head 19 is extra head 3, slope 2 * 3 + 1 = 7 of 32 heads.
M_5, M_19 = 2.0**-3, 2.0**-1.75


def test_the_hand_values_are_the_companions():
    np.testing.assert_allclose(alibi_slopes(24)[[5, 19]], [M_5, M_19], rtol=1e-12)


def test_slopes_accept_the_pair_in_many_forms():
    for answer in (
        (M_5, M_19),
        [M_5, M_19],
        np.array([M_5, M_19]),
        torch.tensor([M_5, M_19], dtype=torch.float64),
        (np.float64(M_5), torch.tensor(M_19)),
        (round(M_5, 9), round(M_19, 9)),
    ):
        assert check_alibi_slopes_of_24(answer), answer


def test_slopes_accept_float32():
    p = 16
    as_float32 = torch.tensor([2.0 ** (-8 * 6 / p), 2.0 ** (-8 * 7 / (2 * p))], dtype=torch.float32)
    assert as_float32.dtype == torch.float32 and check_alibi_slopes_of_24(as_float32)
    assert check_alibi_slopes_of_24(as_float32.numpy())
    assert check_alibi_slopes_of_24((np.float32(M_5), np.float32(M_19)))


@pytest.mark.parametrize(
    "answer, hint",
    [
        ((M_19, M_5), "swapped"),
        ((-M_5, -M_19), "positive"),
        ((1 / M_5, 1 / M_19), "reciprocals"),
        ((2.0 ** (-8 * 6 / 24), 2.0 ** (-8 * 20 / 24)), "geometric sequence"),
        ((2.0 ** (-8 * 5 / 16), 2.0 ** (-8 * 5 / 32)), "heads 4 and 18"),  # counted from 1
        ((2.0 ** (-8 * 5 / 16), 2.0 ** (-8 * 6 / 32)), "one step short"),  # without the + 1
        ((2.0 ** (-8 * 6 / 32), 2.0 ** (-8 * 20 / 32)), "32-head model"),
        ((M_5, 2.0 ** (-8 * 4 / 32)), "not the first ones"),  # extra heads: slopes 1, 2, 3, 4
        ((M_5, 2.0 ** (-8 * 8 / 32)), "1st, 3rd, 5th"),  # extra heads: slopes 2, 4, 6, 8
        ((M_5, 0.6), "head 19 is not one of the first 16"),
        ((0.5, M_19), "Head 19 is right"),
        ((0.3, 0.7), "just below 24"),
    ],
)
def test_slopes_reject_typical_mistakes(answer, hint):
    feedback = check_alibi_slopes_of_24(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize(
    "answer",
    [None, "abc", 0.125, (0.125,), (0.125, 0.3, 0.5), {"m_5": 0.125, "m_19": 0.3}, (True, False),
     (float("nan"), M_19), ("0.125", M_19), np.zeros((2, 2)), object(), ...],
)
def test_slopes_never_raise(answer):
    feedback = check_alibi_slopes_of_24(answer)
    assert isinstance(feedback, Feedback) and not feedback
