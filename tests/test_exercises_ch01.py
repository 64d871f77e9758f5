"""Tests of the chapter 1 checkers: right answers pass, typical mistakes get a hint, junk never raises."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from companion.exercises import (
    Feedback,
    check_distinct_orderings,
    check_equivariance_probe,
    check_permuted_weights,
    check_pooled_groups,
)

# ---- check_permuted_weights -------------------------------------------------------------


def loop_permuted(weights, perm):
    """Reference written differently from the solution: an explicit loop over (query, key)."""
    out = torch.empty_like(weights)
    p = perm.tolist()
    for i, old_i in enumerate(p):
        for j, old_j in enumerate(p):
            out[..., i, j] = weights[..., old_i, old_j]
    return out


def matrix_permuted(weights, perm):
    """The algebra: P A P^T with a permutation matrix, returned as numpy."""
    P = torch.eye(len(perm), dtype=weights.dtype)[perm]
    return (P @ weights @ P.T).numpy()


@pytest.mark.parametrize("fn", [loop_permuted, matrix_permuted])
def test_permuted_weights_accepts_correct(fn):
    feedback = check_permuted_weights(fn)
    assert isinstance(feedback, Feedback) and feedback, feedback.message


@pytest.mark.parametrize(
    "fn, hint",
    [
        (lambda w, p: w, "original weights"),
        (lambda w, p: w[:, :, p], "keys in the old order"),
        (lambda w, p: w[:, :, :, p], "queries (rows) are still"),
        (lambda w, p: w[:, :, torch.argsort(p)][:, :, :, torch.argsort(p)], "opposite way"),
        (lambda w, p: w.transpose(-1, -2), "differ from those of attention"),
        (lambda w, p: w.transpose(-1, -2), "entry ["),
    ],
)
def test_permuted_weights_rejects_typical_mistakes(fn, hint):
    feedback = check_permuted_weights(fn)
    assert not feedback
    assert hint in feedback.message


def test_permuted_weights_rejects_hard_coded_first_case():
    # Right for the first case only (seq 5): the checker must try more than one input.
    def only_first(w, p):
        return loop_permuted(w, p) if len(p) == 5 else w

    assert not check_permuted_weights(only_first)


def _raises(w, p):
    raise RuntimeError("boom")


@pytest.mark.parametrize(
    "answer, hint",
    [
        (None, "Expected a function"),
        (np.eye(3), "Expected a function"),
        (_raises, "raised RuntimeError: boom"),
        (lambda w, p: w[0], "Expected an array of shape (1, 2, 5, 5)"),
        (lambda w, p: "weights", "Expected an array or tensor"),
        (lambda w, p: None, "returned None: did you forget `return`?"),
    ],
)
def test_permuted_weights_junk_never_raises(answer, hint):
    feedback = check_permuted_weights(answer)
    assert not feedback
    assert hint in feedback.message


def test_permuted_weights_leaves_global_rng_alone():
    before = torch.get_rng_state()
    check_permuted_weights(loop_permuted)
    assert torch.equal(before, torch.get_rng_state())


# ---- check_pooled_groups ----------------------------------------------------------------

SENTENCES = ["dog bites man", "man bites dog", "dog bites dog", "bites man dog", "dog dog bites", "bites dog bites"]


def multiset_labels(sentences):
    """Independent truth: same sorted word list <=> same pooled output without positions."""
    return [" ".join(sorted(s.split())) for s in sentences]


def test_pooled_groups_truth_is_three_groups():
    assert len(set(multiset_labels(SENTENCES))) == 3


@pytest.mark.parametrize(
    "labels",
    [
        multiset_labels(SENTENCES),
        [0, 0, 1, 0, 1, 2],
        ("a", "a", "b", "a", "b", "c"),
        np.array([7, 7, 3, 7, 3, 1]),
        torch.tensor([2, 2, 0, 2, 0, 1]),
    ],
)
def test_pooled_groups_accepts_any_labelling_of_the_right_partition(labels):
    feedback = check_pooled_groups(labels)
    assert feedback, feedback.message


@pytest.mark.parametrize(
    "labels, hint",
    [
        ([0, 1, 2, 3, 4, 5], "its own label"),
        ([0] * 6, "one label"),
        ([" ".join(sorted(set(s.split()))) for s in SENTENCES], "counts twice"),
        ([0, 0, 1, 2, 1, 3], "Some groups are off"),
    ],
)
def test_pooled_groups_rejects_typical_mistakes(labels, hint):
    feedback = check_pooled_groups(labels)
    assert not feedback
    assert hint in feedback.message


@pytest.mark.parametrize(
    "labels, hint",
    [
        (None, "is None"),
        ("001012", "Expected a list of 6"),
        ([0, 0, 1], "got 3"),
        ([[0], [0], [1], [0], [1], [2]], "plain value"),
        (np.zeros((2, 3)), "got 2"),
    ],
)
def test_pooled_groups_junk_never_raises(labels, hint):
    feedback = check_pooled_groups(labels)
    assert not feedback
    assert hint in feedback.message


# ---- check_distinct_orderings -----------------------------------------------------------


def distinct_sequences(words):
    """Independent truth: count distinct tuples by brute force."""
    from itertools import permutations

    return len(set(permutations(words)))


def test_distinct_orderings_truth():
    assert distinct_sequences("dog bites dog man".split()) == 12


@pytest.mark.parametrize("answer", [(1, 12), [1, 12], np.array([1, 12]), torch.tensor([1, 12]), (1.0, 12.0)])
def test_distinct_orderings_accepts_correct(answer):
    feedback = check_distinct_orderings(answer)
    assert feedback, feedback.message


@pytest.mark.parametrize(
    "answer, hint",
    [
        ((12, 12), "Check (a)"),
        ((24, 24), "Check (a)"),
        ((1, 24), "two copies of 'dog'"),
        ((1, 1), "Check (b)"),
        ((1, 6), "Check (b)"),
    ],
)
def test_distinct_orderings_rejects_typical_mistakes(answer, hint):
    feedback = check_distinct_orderings(answer)
    assert not feedback
    assert hint in feedback.message


@pytest.mark.parametrize(
    "answer, hint",
    [
        (12, "Expected a pair"),
        (None, "is None"),
        ("1,12", "Expected a pair"),
        ((1, 12, 3), "Expected a pair"),
        ({"a": 1, "b": 12}, "Expected a pair"),
        (("one", "twelve"), "Expected two numbers"),
        ((None, 12), "Expected two numbers"),
        (np.zeros((2, 2)), "Expected two numbers"),
    ],
)
def test_distinct_orderings_junk_never_raises(answer, hint):
    feedback = check_distinct_orderings(answer)
    assert not feedback
    assert hint in feedback.message


# ---- check_equivariance_probe -----------------------------------------------------------


def matrix_probe(layer, dim):
    """Reference probe: a permutation matrix on the sequence axis, relative tolerance."""
    param = next(layer.parameters(), None)
    dtype = torch.float64 if param is None else param.dtype
    x = torch.randn(3, 6, dim, dtype=dtype)
    P = torch.eye(6, dtype=dtype)[[5, 3, 0, 1, 2, 4]]   # moves every token
    with torch.no_grad():
        lhs, rhs = layer(P @ x), P @ layer(x)
    return bool(((lhs - rhs).abs().max() <= 1e-4 * (1 + rhs.abs().max())).item())


def test_equivariance_probe_accepts_a_careful_probe():
    feedback = check_equivariance_probe(matrix_probe)
    assert feedback, feedback.message


@pytest.mark.parametrize(
    "probe, hint",
    [
        (lambda layer, dim: True, "is not equivariant, but your probe says it is"),
        (lambda layer, dim: False, "is equivariant, but your probe says it is not"),
        (lambda layer, dim: np.True_ if dim else None, "is not equivariant"),
        (lambda layer, dim: "yes", "Expected True or False"),
    ],
)
def test_equivariance_probe_rejects_wrong_probes(probe, hint):
    feedback = check_equivariance_probe(probe)
    assert not feedback and hint in feedback.message


def test_equivariance_probe_rejects_a_float64_only_tolerance():
    def exact(layer, dim):
        param = next(layer.parameters(), None)
        dtype = torch.float64 if param is None else param.dtype
        x = torch.randn(2, 6, dim, dtype=dtype)
        perm = torch.tensor([5, 3, 0, 1, 2, 4])
        with torch.no_grad():
            return torch.allclose(layer(x[:, perm]), layer(x)[:, perm], rtol=0, atol=1e-13)

    feedback = check_equivariance_probe(exact)
    assert not feedback and "float32" in feedback.message


def test_equivariance_probe_junk_never_raises():
    assert "Expected a function" in check_equivariance_probe(None).message
    assert "raised ZeroDivisionError" in check_equivariance_probe(lambda layer, dim: 1 / 0).message


# ---- float32 versions of the reference answers pass -------------------------------------


def test_every_checker_accepts_its_reference_answer_in_float32():
    def float32_permuted(weights, perm):
        return loop_permuted(weights, perm).float()

    def float32_probe(layer, dim):
        return matrix_probe(layer.float(), dim)  # run every layer in float32

    assert check_permuted_weights(float32_permuted)
    assert check_pooled_groups(np.array([0, 0, 2, 0, 2, 5], dtype=np.float32))
    assert check_distinct_orderings(np.array([1, 12], dtype=np.float32))
    assert check_equivariance_probe(float32_probe)


def _summary_probe(summary):
    def probe(layer, dim, seq=7):
        param = next(layer.parameters(), None)
        dtype = torch.float64 if param is None else param.dtype
        x = torch.randn(2, seq, dim, dtype=dtype)
        perm = torch.randperm(seq)
        with torch.no_grad():
            lhs, rhs = summary(layer(x[:, perm])), summary(layer(x)[:, perm])
        return bool(torch.allclose(lhs, rhs, rtol=1e-4, atol=1e-5))

    return probe


@pytest.mark.parametrize("summary", [
    lambda out: out.mean(1),
    lambda out: out.norm(),
    lambda out: out.flatten().sort().values,
], ids=["mean", "norm", "sorted"])
def test_equivariance_probe_rejects_probes_that_compare_a_summary(summary):
    feedback = check_equivariance_probe(_summary_probe(summary))
    assert not feedback
    assert "not a mean, a norm or the sorted" in feedback.message


def _fixed_permutation_probe(order):
    def probe(layer, dim, seq=7):
        param = next(layer.parameters(), None)
        dtype = torch.float64 if param is None else param.dtype
        x = torch.randn(2, seq, dim, dtype=dtype)
        perm = torch.tensor(order)
        with torch.no_grad():
            lhs, rhs = layer(x[:, perm]), layer(x)[:, perm]
        return bool(torch.allclose(lhs, rhs, rtol=1e-4, atol=1e-5))

    return probe


@pytest.mark.parametrize("order, fooled_by", [
    ([6, 5, 4, 3, 2, 1, 0], "sequence reversal"),
    ([1, 2, 3, 4, 5, 6, 0], "cyclic shift"),
    ([1, 0, 3, 4, 5, 6, 2], "swap of the first two tokens"),
])
def test_equivariance_probe_rejects_any_one_fixed_permutation(order, fooled_by):
    feedback = check_equivariance_probe(_fixed_permutation_probe(order))
    assert not feedback and fooled_by in feedback.message
    assert "generate them all" in feedback.message


def test_equivariance_probe_accepts_the_two_generators():
    swap, shift = _fixed_permutation_probe([1, 0, 2, 3, 4, 5, 6]), _fixed_permutation_probe(
        [1, 2, 3, 4, 5, 6, 0])
    assert check_equivariance_probe(lambda layer, dim: swap(layer, dim) and shift(layer, dim))
