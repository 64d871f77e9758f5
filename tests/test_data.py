"""Tests of companion.data.MarkovChain."""

import itertools
import math

import numpy as np
import pytest

from companion.data import MarkovChain


def test_transitions_are_distributions_and_stationary_is_fixed():
    chain = MarkovChain(5, 2, seed=3)
    np.testing.assert_allclose(chain.transitions.sum(axis=1), 1.0, rtol=1e-12)
    # One step of the chain leaves the stationary distribution unchanged (written as a loop).
    after = np.zeros(25)
    for (a, b), c in itertools.product(itertools.product(range(5), repeat=2), range(5)):
        after[b * 5 + c] += chain.stationary[a * 5 + b] * chain.transitions[a * 5 + b, c]
    np.testing.assert_allclose(after, chain.stationary, atol=1e-13)


@pytest.mark.parametrize("vocab_size, order", [(8, 2), (4, 1), (3, 3)])
def test_entropy_rate_matches_a_monte_carlo_estimate(vocab_size, order):
    chain = MarkovChain(vocab_size, order, seed=0)
    tokens = chain.sample(400, 500, seed=1)
    contexts = np.zeros((400, 500 - order), dtype=np.int64)
    for j in range(order):
        contexts = contexts * vocab_size + tokens[:, j : 500 - order + j]
    nll = -np.log(chain.transitions[contexts, tokens[:, order:]])
    stderr = nll.std() / math.sqrt(nll.size)
    assert abs(nll.mean() - chain.entropy_rate()) < 4 * stderr + 1e-3
    assert 0 < chain.entropy_rate() < math.log(vocab_size)


def test_first_tokens_follow_the_stationary_distribution_and_floors_are_exact():
    chain = MarkovChain(4, 2, seed=2)
    tokens = chain.sample(40_000, 3, seed=5)
    first_two = tokens[:, 0] * 4 + tokens[:, 1]
    freq = np.bincount(first_two, minlength=16) / len(first_two)
    np.testing.assert_allclose(freq, chain.stationary, atol=0.01)
    floors = chain.optimal_loss_by_position(5)
    assert floors.shape == (4,)
    # Token 1 sees one previous token: H(x1 | x0) = H(x0, x1) - H(x0).
    joint = chain.stationary
    marginal = joint.reshape(4, 4).sum(axis=1)
    h = lambda p: -np.sum(p[p > 0] * np.log(p[p > 0]))  # noqa: E731
    assert floors[0] == pytest.approx(h(joint) - h(marginal), rel=1e-12)
    np.testing.assert_allclose(floors[1:], chain.entropy_rate(), rtol=1e-12)
    assert floors[0] > floors[1]


def test_sampling_is_seeded():
    chain = MarkovChain(6, 2, seed=0)
    np.testing.assert_array_equal(chain.sample(3, 20, seed=7), chain.sample(3, 20, seed=7))
    assert not np.array_equal(chain.sample(3, 20, seed=7), chain.sample(3, 20, seed=8))
    assert chain.sample(2, 1, seed=0).shape == (2, 1)


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda: MarkovChain(1, 2, 0), ValueError, "vocab_size must be at least 2"),
        (lambda: MarkovChain(8, 0, 0), ValueError, "order must be a positive"),
        (lambda: MarkovChain(8, 2.0, 0), TypeError, "order must be an integer"),
        (lambda: MarkovChain(100, 4, 0), ValueError, "too many"),
        (lambda: MarkovChain(8, 2, 0, concentration=0), ValueError, "concentration must be positive"),
        (lambda: MarkovChain(8, 2, 0).sample(0, 5, seed=0), ValueError, "num_sequences"),
        (lambda: MarkovChain(8, 2, 0).optimal_loss_by_position(1), ValueError, "at least 2"),
    ],
)
def test_bad_arguments(make, error, words):
    with pytest.raises(error, match=words):
        make()


def _reference_log_loss(chain, row):
    """-log P(x_t | x_<t), by enumerating every sequence's probability (tiny chains only)."""
    import itertools

    v, k = chain.vocab_size, chain.order

    def prob(prefix):  # P(x_0 .. x_{n-1} = prefix) for a stationary start
        if len(prefix) < k:
            return sum(prob(list(prefix) + list(rest)) for rest in itertools.product(range(v), repeat=k - len(prefix)))
        context = sum(t * v ** (k - 1 - j) for j, t in enumerate(prefix[:k]))
        p = chain.stationary[context]
        for t in range(k, len(prefix)):
            context = sum(x * v ** (k - 1 - j) for j, x in enumerate(prefix[t - k : t]))
            p *= chain.transitions[context, prefix[t]]
        return p

    return np.array([-np.log(prob(row[: t + 1]) / prob(row[:t])) for t in range(1, len(row))])


@pytest.mark.parametrize("order", [1, 2, 3])
def test_log_loss_is_the_chains_own_conditional_loss(order):
    chain = MarkovChain(3, order, seed=5)
    tokens = chain.sample(4, 6, seed=1)
    expected = np.stack([_reference_log_loss(chain, list(row)) for row in tokens])
    np.testing.assert_allclose(chain.log_loss(tokens), expected, rtol=1e-12)


def test_log_loss_averages_to_the_floor_and_refuses_bad_tokens():
    chain = MarkovChain(5, 2, seed=1)
    mean = chain.log_loss(chain.sample(20_000, 6, seed=3)).mean(axis=0)
    np.testing.assert_allclose(mean, chain.optimal_loss_by_position(6), atol=0.02)
    with pytest.raises(ValueError, match="token ids must be in"):
        chain.log_loss(np.array([[0, 5, 1]]))
    with pytest.raises(ValueError, match="length >= 2"):
        chain.log_loss(np.array([0, 1, 2]))
    with pytest.raises(TypeError, match="integer ids"):
        chain.log_loss(np.zeros((2, 3)))
