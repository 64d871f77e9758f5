"""Tests of companion.train: determinism, the floor, evaluation by length and position."""

import numpy as np
import pytest
import torch

from companion.data import MarkovChain
from companion.model import ModelConfig
from companion.train import TrainConfig, evaluate, floor_by_length, loss_by_position, one_thread, train

SOURCE = MarkovChain(6, 2, seed=4)
CONFIG = ModelConfig(vocab_size=6, dim=32, position="alibi")


def test_training_is_deterministic_for_a_fixed_seed():
    a, history_a = train(CONFIG, TrainConfig(steps=15, seed=3), SOURCE)
    b, history_b = train(CONFIG, TrainConfig(steps=15, seed=3), SOURCE)
    c, history_c = train(CONFIG, TrainConfig(steps=15, seed=4), SOURCE)
    assert history_a == history_b and history_a != history_c
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(p, q), name


def test_training_does_not_depend_on_the_callers_thread_count():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _, two = train(CONFIG, TrainConfig(steps=10, seed=0), SOURCE)
        torch.set_num_threads(1)
        _, one = train(CONFIG, TrainConfig(steps=10, seed=0), SOURCE)
        assert one == two
        assert torch.get_num_threads() == 1  # restored to the caller's setting
    finally:
        torch.set_num_threads(before)


def test_training_lowers_the_loss_and_never_beats_the_floor():
    model, history = train(CONFIG, TrainConfig(steps=150, seed=0), SOURCE)
    assert np.mean(history[-10:]) < np.mean(history[:10]) - 0.2
    # On the same tokens, model loss minus the true conditional log loss estimates a KL
    # divergence, which cannot be negative (up to sampling noise).
    tokens = torch.from_numpy(SOURCE.sample(200, 64, seed=99))
    with torch.no_grad():
        logp = model(tokens[:, :-1]).log_softmax(-1)
    model_nll = -logp.gather(-1, tokens[:, 1:, None])[..., 0][:, 1:].double().numpy()  # tokens 2..63
    t = tokens.numpy()
    true_nll = -np.log(SOURCE.transitions[t[:, :-2] * 6 + t[:, 1:-1], t[:, 2:]])
    gap = model_nll - true_nll
    assert gap.mean() > -3 * gap.std() / np.sqrt(gap.size)


def test_evaluation_and_its_floor():
    model, _ = train(CONFIG, TrainConfig(steps=30, seed=0), SOURCE)
    losses = evaluate(model, SOURCE, [8, 32], num_tokens=1024)
    floors = floor_by_length(SOURCE, [8, 32])
    assert set(losses) == {8, 32}
    for length in (8, 32):
        assert losses[length] > floors[length]
    assert floors[8] > floors[32] > SOURCE.entropy_rate()  # shorter chunks: more early tokens
    by_position = loss_by_position(model, SOURCE, 16, num_sequences=32)
    assert by_position.shape == (15,)


def test_one_thread_restores_the_setting():
    before = torch.get_num_threads()
    with one_thread():
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == before


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: TrainConfig(steps=0), ValueError, "steps must be a positive"),
        (lambda: TrainConfig(seq_len=1), ValueError, "seq_len must be at least 2"),
        (lambda: TrainConfig(lr=-1.0), ValueError, "lr must be positive"),
        (lambda: train(CONFIG, TrainConfig(steps=1), "markov"), TypeError, "source must be a MarkovChain"),
        (lambda: train(ModelConfig(vocab_size=9), TrainConfig(steps=1), SOURCE), ValueError, "vocab_size is 9"),
        (lambda: evaluate(None, SOURCE, [1], num_tokens=64), ValueError, "eval length must be in"),
        (lambda: evaluate(None, SOURCE, [128], num_tokens=64), ValueError, "eval length must be in"),
    ],
)
def test_bad_arguments(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_progress_bar_only_when_asked_or_on_a_terminal(capsys):
    train(CONFIG, TrainConfig(steps=3, seed=0), SOURCE)  # progress=None: stderr is not a terminal here
    assert capsys.readouterr().err == ""
    train(CONFIG, TrainConfig(steps=3, seed=0), SOURCE, progress=True)
    assert "training (alibi)" in capsys.readouterr().err
