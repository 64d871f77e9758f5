"""Tests of the chapter 10 checkers, with answers computed independently."""

import numpy as np
import pytest
import torch

from companion.exercises import check_fairseq_mapping, check_ported_query_weight, porting_exercise_weights


def halves_rows(w, heads):
    """Per head: rows 0, 2, 4, ... then 1, 3, 5, ... (written as an explicit loop)."""
    d = w.shape[0] // heads
    order = []
    for h in range(heads):
        order += [h * d + r for r in range(0, d, 2)] + [h * d + r for r in range(1, d, 2)]
    return w[order]


def test_port_accepts_the_right_answer_in_several_types():
    w = porting_exercise_weights()
    good = halves_rows(w, 4)
    assert check_ported_query_weight(good)
    assert check_ported_query_weight(good.numpy())
    assert check_ported_query_weight(good.float())
    assert check_ported_query_weight(good.tolist())


@pytest.mark.parametrize(
    "make, hint",
    [
        (lambda w: w, "unchanged"),
        (lambda w: halves_rows(w, 1), "whole matrix"),
        (lambda w: w[:, torch.randperm(32, generator=torch.Generator().manual_seed(0))], "not a reordering"),
        (lambda w: w[:, list(range(0, 32, 2)) + list(range(1, 32, 2))], "columns"),
        (lambda w: w.flip(0), "not the one"),
        (lambda w: w * 2, "not a reordering"),
    ],
)
def test_port_rejects_typical_mistakes(make, hint):
    feedback = check_ported_query_weight(make(porting_exercise_weights()))
    assert not feedback and hint in feedback.message


def test_port_rejects_the_inverse_permutation():
    w = porting_exercise_weights()
    d = 16
    inverse = []
    for h in range(4):
        inverse += [h * d + (r // 2 if r % 2 == 0 else d // 2 + r // 2) for r in range(d)]
    feedback = check_ported_query_weight(w[inverse])
    assert not feedback and "other way" in feedback.message


@pytest.mark.parametrize("junk", [None, "w", 3.0, [[1, 2], [3]], np.zeros((64, 31)), torch.zeros(64), np.full((64, 32), np.nan)])
def test_port_never_raises(junk):
    feedback = check_ported_query_weight(junk)
    assert not feedback and feedback.message


def test_fairseq_mapping():
    base = 10000 ** (64 / 62)
    assert check_fairseq_mapping((base, 12))
    assert check_fairseq_mapping([torch.tensor(base), torch.tensor(12)])
    assert check_fairseq_mapping((np.float64(base), 12.0))
    for answer, hint in [((10000.0, 12), "paper's spacing"), ((base, 10), "from 0"), ((base, 11), "padding_idx + 1"),
                         ((5000.0, 12), "solve for the base")]:
        feedback = check_fairseq_mapping(answer)
        assert not feedback and hint in feedback.message
    for junk in [None, "12", (base,), (base, 12.5), ("b", 12), (True, 12), (float("nan"), 12)]:
        feedback = check_fairseq_mapping(junk)
        assert not feedback and feedback.message


# ---- float32 answers (a right answer computed in float32 must pass) ----------------------

def test_port_accepts_a_float32_permutation():
    good = halves_rows(porting_exercise_weights().float(), 4)
    assert good.dtype == torch.float32 and check_ported_query_weight(good)
    assert check_ported_query_weight(good.numpy())


def test_fairseq_mapping_accepts_float32():
    assert check_fairseq_mapping((np.float32(10000.0) ** np.float32(64 / 62), np.float32(12.0)))
    assert check_fairseq_mapping((torch.tensor(10000.0) ** (64 / 62), torch.tensor(12.0)))
