"""Tests of the chapter 5 checkers: right answers pass, typical mistakes get a hint, bad input never raises."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from companion.exercises import (
    Feedback,
    check_extend_table,
    check_offset_only_scores,
    check_pair_block,
    check_shift_property,
    rotation_mystery_tables,
)

BAD_INPUTS = [None, "abc", 3.0, [1, 2, 3], [[1, 2], [3]], {"a": 1}, np.zeros((3, 3)), np.array([1j, 2j])]


def _pe_row(pos: float, dim: int) -> np.ndarray:
    """One interleaved row by the paper's formula, written as a plain loop."""
    row = np.empty(dim)
    for i in range(dim // 2):
        angle = pos / 10000.0 ** (2 * i / dim)
        row[2 * i], row[2 * i + 1] = math.sin(angle), math.cos(angle)
    return row


# ---- ch05-pair-block -------------------------------------------------------------------

def _block(angle: float) -> np.ndarray:
    return np.array([[math.cos(angle), math.sin(angle)], [-math.sin(angle), math.cos(angle)]])


ANGLE = 10 / 10000.0 ** (6 / 64)


def test_pair_block_accepts_the_block_in_many_forms():
    block = _block(ANGLE)
    for answer in (block, block.tolist(), torch.tensor(block), block + 1e-12):
        assert check_pair_block(answer)


def test_pair_block_answer_really_moves_the_pair():
    # The block the test accepts must do what the exercise says, at several positions.
    w = 10000.0 ** (-6 / 64)
    for pos in (0, 3, 77):
        start = np.array([math.sin(pos * w), math.cos(pos * w)])
        np.testing.assert_allclose(_block(ANGLE) @ start, [math.sin((pos + 10) * w), math.cos((pos + 10) * w)])


@pytest.mark.parametrize(
    "answer, hint",
    [
        (_block(ANGLE).T, "counter-clockwise"),
        (_block(10 / 10000.0 ** (3 / 64)), "wrong angle"),  # exponent i/d instead of 2i/d
        (_block(math.radians(ANGLE)), "wrong angle"),
        (np.ones((2, 2)), "orthogonal"),
        (np.array([[1.0, 0.0], [0.0, -1.0]]), "reflection"),
    ],
)
def test_pair_block_rejects_typical_mistakes(answer, hint):
    feedback = check_pair_block(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert hint in feedback.message


@pytest.mark.parametrize("answer", BAD_INPUTS + [np.full((2, 2), np.nan)])
def test_pair_block_never_raises(answer):
    feedback = check_pair_block(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- ch05-extend-table -----------------------------------------------------------------

EXTENDED = np.stack([_pe_row(pos, 32) for pos in range(50, 60)])


def test_extend_table_accepts_the_rows():
    for answer in (EXTENDED, EXTENDED.tolist(), torch.tensor(EXTENDED), EXTENDED.astype(np.float32)):
        assert check_extend_table(answer)


def test_extend_table_rejects_rows_moved_backwards():
    backwards = np.stack([_pe_row(pos, 32) for pos in range(30, 40)])
    feedback = check_extend_table(backwards)
    assert not feedback and "backwards" in feedback.message


def test_extend_table_rejects_the_halves_layout():
    halves = np.concatenate([EXTENDED[:, 0::2], EXTENDED[:, 1::2]], axis=1)
    feedback = check_extend_table(halves)
    assert not feedback and "layout" in feedback.message


def test_extend_table_rejects_one_row_repeated():
    repeated = np.repeat(EXTENDED[:1], 10, axis=0)
    feedback = check_extend_table(repeated)
    assert not feedback and "same offset" in feedback.message


def test_extend_table_rejects_other_rows():
    feedback = check_extend_table(np.stack([_pe_row(pos, 32) for pos in range(40, 50)]))
    assert not feedback and "positions 50..59" in feedback.message


def test_extend_table_names_the_entry_that_breaks_the_tolerance():
    answer = EXTENDED.copy()
    answer[3:, 5] += 0.2
    answer[4, 5] += 0.1
    feedback = check_extend_table(answer)
    assert not feedback and "entry [4, 5]" in feedback.message


def test_extend_table_success_says_a_trained_model_is_another_matter():
    assert "chapter 12" in " ".join(check_extend_table(EXTENDED).message.split())


@pytest.mark.parametrize("answer", BAD_INPUTS + [EXTENDED[:9], EXTENDED.T])
def test_extend_table_never_raises(answer):
    feedback = check_extend_table(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert any(w in feedback.message for w in ("shape", "complex", "is None"))


# ---- ch05-which-shift ------------------------------------------------------------------

def _truth() -> list[bool]:
    """Decide each table independently: can one matrix map row pos to row pos + 5?"""
    labels = []
    for name in "ABCD":
        table = rotation_mystery_tables()[name]
        x, y = table[:-5], table[5:]
        solution = np.linalg.pinv(x) @ y
        labels.append(bool(np.linalg.norm(x @ solution - y) < 1e-8 * np.linalg.norm(y)))
    return labels


def test_mystery_tables_are_deterministic_and_well_formed():
    first, second = rotation_mystery_tables(), rotation_mystery_tables()
    assert list(first) == ["A", "B", "C", "D"]
    for name in first:
        assert first[name].shape == (200, 16) and first[name].dtype == np.float64
        np.testing.assert_array_equal(first[name], second[name])


def test_mystery_tables_mix_both_kinds():
    truth = _truth()
    assert truth.count(True) == 2 and truth.count(False) == 2
    # A table passing sin^2 + cos^2 = 1 everywhere must not decide the answer.
    tables = rotation_mystery_tables()
    unit = [np.allclose(np.linalg.norm(tables[n].reshape(200, 8, 2), axis=-1), 1.0) for n in "ABCD"]
    assert unit != truth and any(u and not t for u, t in zip(unit, truth))


def test_shift_property_accepts_the_truth_in_several_forms():
    truth = _truth()
    for answer in (truth, tuple(truth), np.array(truth), torch.tensor(truth), [int(v) for v in truth],
                   dict(zip("ABCD", truth))):
        assert check_shift_property(answer)


@pytest.mark.parametrize("answer", [[True] * 4, [False] * 4, "unit-pairs", "flipped"])
def test_shift_property_rejects_wrong_labels(answer):
    truth = _truth()
    if answer == "unit-pairs":
        tables = rotation_mystery_tables()
        answer = [bool(np.allclose(np.linalg.norm(tables[n].reshape(200, 8, 2), axis=-1), 1.0)) for n in "ABCD"]
    elif answer == "flipped":
        answer = [not v for v in truth]
    feedback = check_shift_property(answer)
    assert not feedback and "least squares" in feedback.message


@pytest.mark.parametrize(
    "answer",
    [None, "TFTF", 1, [True, False], [True] * 5, ["yes", "no", "yes", "no"], [0.0, 0.5, 0.0, 1.0],
     {"A": True}, {True, False}, np.ones((2, 2), dtype=bool), (v for v in [True] * 4)],
)
def test_shift_property_never_raises(answer):
    feedback = check_shift_property(answer)
    assert isinstance(feedback, Feedback) and not feedback
    assert "expected" in feedback.message or answer is None and "is None" in feedback.message


# ---- ch05-offset-scores ----------------------------------------------------------------

def _score_by_loop(a: np.ndarray, m: int, n: int) -> float:
    """s(m, n) = PE(m) A PE(n)^T with halves-layout rows built entry by entry."""
    def row(pos):
        w = [10000.0 ** (-2 * i / 16) for i in range(8)]
        return np.array([math.sin(pos * x) for x in w] + [math.cos(pos * x) for x in w])
    return float(row(m) @ a @ row(n))


def _halves_blocks(a_diag, b_off) -> np.ndarray:
    """Per-pair blocks [[a, b], [-b, a]] placed on features (i, i + 8)."""
    out = np.zeros((16, 16))
    for i, (a, b) in enumerate(zip(a_diag, b_off)):
        out[i, i] = out[i + 8, i + 8] = a
        out[i, i + 8], out[i + 8, i] = b, -b
    return out


BLOCKS = _halves_blocks(np.linspace(1.0, 0.3, 8), np.linspace(0.8, -0.5, 8))


def test_offset_scores_reference_really_depends_on_the_offset_only():
    for c in (3, -3, 7):
        values = [_score_by_loop(BLOCKS, m, m + c) for m in range(10, 40, 7)]
        np.testing.assert_allclose(values, values[0], atol=1e-12)
    assert abs(_score_by_loop(BLOCKS, 20, 23) - _score_by_loop(BLOCKS, 20, 17)) > 0.1


def test_offset_scores_accepts_blocks_in_several_forms():
    for answer in (BLOCKS, BLOCKS.tolist(), torch.tensor(BLOCKS), BLOCKS.astype(np.float32),
                   torch.tensor(BLOCKS).float()):
        feedback = check_offset_only_scores(answer)
        assert feedback, feedback.message


@pytest.mark.parametrize(
    "answer, hint",
    [
        (np.zeros((16, 16)), "All scores are zero"),
        (np.eye(16), "before from after"),
        (_halves_blocks(np.ones(8), np.zeros(8)), "before from after"),
        (np.random.default_rng(0).standard_normal((16, 16)), "still changes with m"),
        (_halves_blocks(np.ones(8), np.ones(8))[np.ix_(np.r_[0:16:2, 1:16:2], np.r_[0:16:2, 1:16:2])],
         "still changes with m"),  # the blocks placed for the interleaved layout
    ],
)
def test_offset_scores_rejects_with_hint(answer, hint):
    feedback = check_offset_only_scores(answer)
    assert not feedback and hint in feedback.message


@pytest.mark.parametrize("answer", BAD_INPUTS + [np.zeros((16, 15))])
def test_offset_scores_never_raises(answer):
    feedback = check_offset_only_scores(answer)
    assert isinstance(feedback, Feedback) and not feedback


# ---- float32 versions of the reference answers pass ------------------------------------

def test_every_checker_accepts_its_reference_answer_in_float32():
    assert check_pair_block(_block(ANGLE).astype(np.float32))
    assert check_extend_table(EXTENDED.astype(np.float32))
    assert check_shift_property(np.array(_truth(), dtype=np.float32))
    assert check_offset_only_scores(BLOCKS.astype(np.float32))
