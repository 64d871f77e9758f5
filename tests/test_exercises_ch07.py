"""Tests of the chapter 7 checkers: right answers pass, typical mistakes get a hint, bad input never raises."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from companion.exercises import (
    ROPE_HAND_VECTOR,
    Feedback,
    check_rope_halves_query_weight,
    check_rope_pair_permutation,
    check_rope_rotated_vector,
    rope_interleaved_query_weight,
)

BAD_INPUTS = [None, "abc", 3.0, [1, 2, 3], [[1, 2], [3]], {"a": 1}, np.zeros((3, 3)), np.array([1j, 2j]),
              np.array([np.nan] * 4), object()]
CHECKERS = [check_rope_rotated_vector, check_rope_pair_permutation, check_rope_halves_query_weight]


# ---- ch07-rotate-by-hand ---------------------------------------------------------------

def _rotate_loop(x, m, pairs):
    """RoPE by explicit 2x2 rotations, for the given list of (first, second) feature pairs."""
    out = list(x)
    for i, (a, b) in enumerate(pairs):
        angle = m / 10000.0 ** (2 * i / len(x))
        out[a] = x[a] * math.cos(angle) - x[b] * math.sin(angle)
        out[b] = x[a] * math.sin(angle) + x[b] * math.cos(angle)
    return out


RIGHT_VECTOR = _rotate_loop(ROPE_HAND_VECTOR, 3, [(0, 1), (2, 3)])


@pytest.mark.parametrize("form", [list, np.array, lambda v: torch.tensor(v), lambda v: np.array(v, np.float32)])
def test_rotated_vector_accepts_the_answer_in_many_forms(form):
    feedback = check_rope_rotated_vector(form(RIGHT_VECTOR))
    assert isinstance(feedback, Feedback) and feedback.ok


@pytest.mark.parametrize(
    "answer, hint",
    [
        (list(ROPE_HAND_VECTOR), "unchanged"),
        (_rotate_loop(ROPE_HAND_VECTOR, -3, [(0, 1), (2, 3)]), "wrong way"),
        (_rotate_loop(ROPE_HAND_VECTOR, 3, [(0, 2), (1, 3)]), "halves"),
        (_rotate_loop(ROPE_HAND_VECTOR, 2, [(0, 1), (2, 3)]), "angle"),
        ([1.0, 1.0, 1.0, 1.0], "length"),
    ],
)
def test_rotated_vector_rejects_typical_mistakes(answer, hint):
    feedback = check_rope_rotated_vector(answer)
    assert not feedback.ok and hint in feedback.message


def test_rotated_vector_rejects_complex_answer_with_hint():
    feedback = check_rope_rotated_vector(np.array([1 + 2j, 3 + 4j]))
    assert not feedback.ok and "complex" in feedback.message


# ---- ch07-pair-permutation -------------------------------------------------------------

RIGHT_PERM = [0, 2, 4, 6, 1, 3, 5, 7]


@pytest.mark.parametrize("form", [list, np.array, torch.tensor, lambda v: np.array(v, float)])
def test_pair_permutation_accepts_the_answer(form):
    assert check_rope_pair_permutation(form(RIGHT_PERM)).ok


@pytest.mark.parametrize(
    "answer, hint",
    [
        ([0, 4, 1, 5, 2, 6, 3, 7], "inverse"),
        (list(range(8)), "pair"),
        ([0, 0, 1, 2, 3, 4, 5, 6], "exactly once"),
        ([0, 2, 4, 6, 1, 3, 5, 7.5], "whole"),
        (RIGHT_PERM[:6], "shape"),
    ],
)
def test_pair_permutation_rejects_typical_mistakes(answer, hint):
    feedback = check_rope_pair_permutation(answer)
    assert not feedback.ok and hint in feedback.message


def test_the_right_permutation_really_maps_the_layouts():
    from companion.rope import apply_rope

    x = torch.randn(4, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    p = torch.tensor(RIGHT_PERM)
    torch.testing.assert_close(apply_rope(x[:, p], layout="halves"), apply_rope(x)[:, p])


# ---- ch07-convert-query-weight ---------------------------------------------------------

def _halves_weight():
    w = rope_interleaved_query_weight()
    out = np.empty_like(w)
    for h in range(2):
        for i in range(4):  # halves pair (i, i + 4) takes interleaved pair (2i, 2i + 1)
            out[h * 8 + i] = w[h * 8 + 2 * i]
            out[h * 8 + i + 4] = w[h * 8 + 2 * i + 1]
    return out


def test_query_weight_is_seeded_and_shaped():
    w = rope_interleaved_query_weight()
    assert w.shape == (16, 12)
    np.testing.assert_array_equal(w, rope_interleaved_query_weight())


@pytest.mark.parametrize("form", [np.array, torch.tensor, lambda v: v.tolist()])
def test_query_weight_accepts_the_answer(form):
    assert check_rope_halves_query_weight(form(_halves_weight())).ok


def test_query_weight_rejects_typical_mistakes():
    w = rope_interleaved_query_weight()
    perm16 = np.concatenate([np.arange(0, 16, 2), np.arange(1, 16, 2)])
    inverse8 = np.argsort([0, 2, 4, 6, 1, 3, 5, 7])
    cases = [
        (w, "unchanged"),
        (w[perm16], "within each head"),
        (np.concatenate([w[:8][inverse8], w[8:][inverse8]]), "inverse"),
        (w[::-1], "order within each head"),
        (w * 2, "same rows"),
        (w.T, "shape"),
    ]
    for answer, hint in cases:
        feedback = check_rope_halves_query_weight(answer)
        assert not feedback.ok and hint in feedback.message, (hint, feedback.message)


def test_the_converted_weight_gives_the_same_scores():
    from companion.rope import apply_rope

    w_interleaved, w_halves = torch.from_numpy(rope_interleaved_query_weight()), torch.from_numpy(_halves_weight())
    x = torch.randn(6, 12, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    for h in range(2):
        a = apply_rope((x @ w_interleaved.T)[:, h * 8:(h + 1) * 8])
        b = apply_rope((x @ w_halves.T)[:, h * 8:(h + 1) * 8], layout="halves")
        torch.testing.assert_close(a @ a.T, b @ b.T)


# ---- every checker: bad input never raises ---------------------------------------------

@pytest.mark.parametrize("checker", CHECKERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("bad", BAD_INPUTS, ids=repr)
def test_checkers_never_raise_on_bad_input(checker, bad):
    feedback = checker(bad)
    assert isinstance(feedback, Feedback) and not feedback.ok and feedback.message


# ---- float32 answers (a right answer computed in float32 must pass) ----------------------

def test_rotated_vector_accepts_a_float32_computation():
    v = torch.tensor(ROPE_HAND_VECTOR, dtype=torch.float32)
    z = torch.view_as_complex(v.reshape(2, 2).contiguous())
    angles = 3 * 10000.0 ** (-torch.arange(0, 4, 2, dtype=torch.float32) / 4)
    answer = torch.view_as_real(z * torch.polar(torch.ones(2), angles)).reshape(4)
    assert answer.dtype == torch.float32 and check_rope_rotated_vector(answer)


def test_pair_permutation_accepts_float32():
    assert check_rope_pair_permutation(np.array([0, 2, 4, 6, 1, 3, 5, 7], dtype=np.float32))


def test_halves_query_weight_accepts_float32():
    w = rope_interleaved_query_weight()
    rows = [h * 8 + r for h in range(2) for r in (0, 2, 4, 6, 1, 3, 5, 7)]
    assert check_rope_halves_query_weight(w[rows].astype(np.float32))
    assert check_rope_halves_query_weight(torch.from_numpy(w).float()[rows])
