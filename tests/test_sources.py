"""Tests of companion.data.HiddenStateChain and RepeatedSegment, against brute force."""

import itertools
import math

import numpy as np
import pytest

from companion.data import HiddenStateChain, RepeatedSegment


def _brute_force_loss(prefix_prob, tokens):
    """-log P(x_t | x_<t) from a function giving P(x_0 .. x_t) of a tuple of tokens."""
    return np.array([[-math.log(prefix_prob(tuple(row[: t + 1])) / prefix_prob(tuple(row[:t])))
                      for t in range(1, len(row))] for row in tokens])


def test_hidden_state_loss_is_the_sum_over_every_hidden_path():
    chain = HiddenStateChain(3, seed=1, num_states=2, switch_prob=0.2, topic_concentration=2.0)

    def prefix_prob(xs):  # P(x_0 .. x_n), summed over all K^n topic paths
        total = 0.0
        for path in itertools.product(range(2), repeat=len(xs)):
            p = chain.initial[path[0], xs[0]] / 2
            for t in range(1, len(xs)):
                p *= chain.switch[path[t - 1], path[t]] * chain.transitions[path[t], xs[t - 1], xs[t]]
            total += p
        return total

    tokens = chain.sample(6, 6, seed=3)
    np.testing.assert_allclose(chain.log_loss(tokens), _brute_force_loss(prefix_prob, tokens), rtol=1e-12)


def test_hidden_state_samples_follow_the_source():
    chain = HiddenStateChain(4, seed=2, num_states=3, switch_prob=0.3)
    pairs = chain.sample(60_000, 2, seed=4)
    exact = np.einsum("za,zy,yab->ab", chain.initial / 3, chain.switch, chain.transitions)
    freq = np.bincount(pairs[:, 0] * 4 + pairs[:, 1], minlength=16).reshape(4, 4) / len(pairs)
    np.testing.assert_allclose(freq, exact, atol=0.006)
    np.testing.assert_allclose(chain.switch.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(chain.initial @ np.ones(4), 1.0, rtol=1e-12)
    for z in range(3):  # each topic's first-token distribution is its chain's fixed point
        np.testing.assert_allclose(chain.initial[z] @ chain.transitions[z], chain.initial[z], atol=1e-13)


@pytest.mark.parametrize("seed", [0, 1])
def test_hidden_state_floor_falls_over_many_positions(seed):
    chain = HiddenStateChain(8, seed=seed)
    floor = chain.optimal_loss_by_position(128)
    early, later = floor[:31].mean(), floor[31:63].mean()  # tokens 1..31 and 32..63
    assert early - later > 0.02, "the topic keeps paying for tens of tokens"
    assert floor[0] - floor[30] > 0.05 and abs(floor[31:63].mean() - floor[63:].mean()) < 0.01
    assert abs(chain.entropy_rate() - floor[63:].mean()) < 0.01


def test_repeated_segment_loss_is_the_sum_over_every_segment_and_period():
    source = RepeatedSegment(3, seed=5, min_period=1, max_period=3)
    q, periods = source.token_probs, source.periods

    def prefix_prob(xs):  # P(x_0 .. x_n) over all periods and all segments of the longest period
        total = 0.0
        for p in periods:
            for segment in itertools.product(range(3), repeat=p):
                sequence = tuple(segment[t % p] for t in range(len(xs)))
                if sequence == xs:
                    total += np.prod(q[list(segment)]) / len(periods)
        return total

    tokens = source.sample(8, 7, seed=2)
    np.testing.assert_allclose(source.log_loss(tokens), _brute_force_loss(prefix_prob, tokens), rtol=1e-12)


def test_repeated_segment_samples_repeat_and_known_copies_cost_nothing():
    source = RepeatedSegment(8, seed=0, min_period=3, max_period=9)
    tokens = source.sample(500, 40, seed=1)
    for row in tokens:
        assert any(np.array_equal(row[p:], row[:-p]) for p in range(3, 10)), "a period in range"
    loss = source.log_loss(tokens)
    assert np.all(loss[:, 2 * 9 - 2 :] == 0.0), "from token 2 * max_period - 1 on, a known copy"
    floor = source.optimal_loss_by_position(40)
    entropy = -(source.token_probs * np.log(source.token_probs)).sum()
    assert np.all(np.abs(floor[:2] - entropy) < 0.05), "tokens before min_period cost H(q)"
    assert source.entropy_rate() == 0.0


def test_sources_are_deterministic_and_instances_differ():
    for cls in (HiddenStateChain, RepeatedSegment):
        a, b = cls(8, seed=0), cls(8, seed=1)
        assert np.array_equal(a.sample(4, 20, seed=7), cls(8, seed=0).sample(4, 20, seed=7))
        assert not np.array_equal(a.sample(4, 20, seed=7), b.sample(4, 20, seed=7))


@pytest.mark.parametrize("make, match", [
    (lambda: HiddenStateChain(1, seed=0), "vocab_size"),
    (lambda: HiddenStateChain(8, seed=0, num_states=1), "num_states"),
    (lambda: HiddenStateChain(8, seed=0, switch_prob=1.0), "switch_prob"),
    (lambda: HiddenStateChain(8, seed=0, topic_concentration=0), "topic_concentration"),
    (lambda: RepeatedSegment(8, seed=0, min_period=5, max_period=4), "min_period"),
    (lambda: RepeatedSegment(8, seed=0, concentration=-1), "concentration"),
    (lambda: RepeatedSegment(8, seed=0).log_loss(np.array([[0, 9]])), "token ids"),
    (lambda: HiddenStateChain(8, seed=0).log_loss(np.zeros((2, 1), dtype=int)), "length >= 2"),
    (lambda: HiddenStateChain(8, seed=0).log_loss(np.zeros((2, 3))), "integer"),
])
def test_bad_arguments_name_the_argument(make, match):
    with pytest.raises((ValueError, TypeError), match=match):
        make()


def test_every_source_trains_and_a_repeated_segment_is_evaluated_on_sequences_of_its_own():
    import torch

    from companion.model import ModelConfig
    from companion.train import TrainConfig, evaluate, train

    config = ModelConfig(vocab_size=8, dim=16, num_heads=2, position="rope", max_len=64)
    source = RepeatedSegment(8, seed=0, min_period=2, max_period=4)
    model, history = train(config, TrainConfig(steps=3, batch_size=4, seq_len=16), source)
    assert len(history) == 3
    best = evaluate(model, source, [16], num_tokens=256, excess=True)[16]
    # excess over the exact loss of the same 16 independent sequences, by hand
    chunks = torch.from_numpy(source.sample(16, 16, seed=10_000))
    with torch.no_grad():
        logits = model.eval()(chunks)[:, :-1]
    nll = torch.nn.functional.cross_entropy(logits.reshape(-1, 8), chunks[:, 1:].reshape(-1),
                                            reduction="none").double()
    by_hand = (nll.numpy() - source.log_loss(chunks.numpy()).ravel()).mean()
    assert abs(best - by_hand) < 1e-6
    with pytest.raises(ValueError, match="stride=None"):
        evaluate(model, source, [16], num_tokens=256, stride=4)
    train(config, TrainConfig(steps=2, batch_size=4, seq_len=16), HiddenStateChain(8, seed=0))
