"""Tests of the chapter 16 checkers: right answers pass, typical mistakes get a hint, bad input never raises."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from companion.debugging import find_position_offset
from companion.exercises import (
    Feedback, check_fixes, check_std_ratio, check_suspect_offset, suspect_add_positions,
)
from companion.sinusoidal import sinusoidal_table

BAD_NUMBERS = [None, "abc", True, [1.0, 2.0], np.zeros((2, 2)), {"a": 1}, 1j, float("nan"), object(), ...]


# ---- ch16-suspect-offset ---------------------------------------------------------------------------

def test_suspect_reads_rows_two_and_on_of_the_halves_table():
    added = suspect_add_positions(torch.zeros(1, 10, 16, dtype=torch.float64))[0]
    assert find_position_offset(added, sinusoidal_table(20, 16, layout="halves")) == 2
    assert find_position_offset(added, sinusoidal_table(20, 16)) is None  # interleaved: no match
    assert suspect_add_positions(torch.zeros(2, 5, 8)).dtype == torch.float32


def test_suspect_refuses_bad_input():
    with pytest.raises(TypeError):
        suspect_add_positions(np.zeros((1, 4, 8)))
    with pytest.raises(ValueError, match="even"):
        suspect_add_positions(torch.zeros(1, 4, 7))


def test_suspect_offset_accepts_the_integer_in_many_forms():
    for answer in (2, np.int64(2), torch.tensor(2), 2.0, np.float32(2.0), np.array([2])):
        assert check_suspect_offset(answer)


@pytest.mark.parametrize("answer, hint", [
    (0, "Compare the first row"), (1, "enough shifts"), (-2, "0 or more"), (5, "both layouts"),
    (None, "same layout"), (2.5, "whole number"),
])
def test_suspect_offset_rejects_typical_mistakes(answer, hint):
    feedback = check_suspect_offset(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD_NUMBERS)
def test_suspect_offset_never_raises(answer):
    feedback = check_suspect_offset(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- ch16-std-ratio --------------------------------------------------------------------------------

TABLE_STD = float(np.std(sinusoidal_table(256, 128)))
RATIO = math.sqrt(128) / TABLE_STD


def test_std_ratio_accepts_the_number_and_a_measured_one():
    table = torch.from_numpy(sinusoidal_table(256, 128)).float()
    tokens = torch.nn.Embedding(1000, 128).weight.detach() * math.sqrt(128)  # float32, std about sqrt(128)
    measured = tokens.std() / table.std()
    for answer in (RATIO, np.float32(RATIO), torch.tensor(RATIO), measured, np.array([RATIO])):
        assert check_std_ratio(answer)
    assert 17 < RATIO < 18.5


@pytest.mark.parametrize("answer, hint", [
    (1 / RATIO, "inverse"), (1 / TABLE_STD, "sqrt(d)"), (math.sqrt(128) / math.sqrt(0.5), "RMS"),
    (1.0, "initialisation"), (-RATIO, "initialisation"),
])
def test_std_ratio_rejects_typical_mistakes(answer, hint):
    feedback = check_std_ratio(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD_NUMBERS)
def test_std_ratio_never_raises(answer):
    feedback = check_std_ratio(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- ch16-choose-fix -------------------------------------------------------------------------------

def test_fixes_accept_letters_in_many_forms():
    for answer in (["d", "a", "e"], ("D", "A", "E"), "dae", "d, a, e", [" d", "a ", "e"]):
        assert check_fixes(answer)


@pytest.mark.parametrize("answer, hints, absent", [
    (["a", "a", "e"], ["Symptom 1"], ["Symptom 2", "Symptom 3"]),
    (["d", "b", "e"], ["Symptom 2"], ["Symptom 1", "Symptom 3"]),
    (["d", "a", "c"], ["Symptom 3"], ["Symptom 1"]),
    (["c", "b", "a"], ["Symptom 1", "Symptom 2", "Symptom 3"], []),
])
def test_fixes_hint_at_each_wrong_symptom(answer, hints, absent):
    feedback = check_fixes(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert all(h in feedback.message for h in hints) and not any(a in feedback.message for a in absent)


def test_fixes_hint_for_symptom_3_points_at_the_plain_forward():
    feedback = check_fixes(["d", "a", "c"])
    assert "plain forward" in feedback.message and "absolute table" in feedback.message


@pytest.mark.parametrize("answer, hint", [
    (["d", "a"], "three letters"), ("daef", "three letters"), (["d", "a", "z"], "a to e"),
    ([1, 2, 3], "three letters"), (None, "is None"), (..., "still `...`"), (np.array(["d"]), "three"),
])
def test_fixes_refuse_malformed_answers(answer, hint):
    feedback = check_fixes(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message
