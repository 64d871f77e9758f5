"""Tests of companion.train: determinism, the floor, evaluation by length and position."""

import numpy as np
import pytest
import torch

from companion.data import MarkovChain
from companion.model import ModelConfig, TinyDecoder
from companion.train import TrainConfig, evaluate, floor_by_length, loss_by_position, next_token_loss, one_thread, train

SOURCE = MarkovChain(6, 2, seed=4)
CONFIG = ModelConfig(vocab_size=6, dim=32, position="alibi")
MODEL = TinyDecoder(CONFIG)


def test_evaluate_runs_in_eval_mode_and_restores_the_callers_mode():
    model = TinyDecoder(ModelConfig(vocab_size=6, dim=32, position="alibi", dropout=0.5)).train()
    first = evaluate(model, SOURCE, [8], num_tokens=256)
    assert model.training  # the caller's mode is back
    assert evaluate(model, SOURCE, [8], num_tokens=256) == first  # no dropout noise
    assert evaluate(model.eval(), SOURCE, [8], num_tokens=256) == first and not model.training


def test_cosine_decay_warms_up_then_falls_to_its_final_fraction():
    config = TrainConfig(steps=100, warmup=10, lr=1e-2, decay="cosine", final_lr_fraction=0.1)
    factors = [config.lr_factor(step) for step in range(100)]
    assert factors[:10] == [(step + 1) / 10 for step in range(10)]  # linear warm-up
    assert all(a > b for a, b in zip(factors[9:], factors[10:]))  # then falls at every step
    assert abs(factors[-1] - 0.1) < 1e-12 and abs(factors[54] - 0.55) < 0.02  # halfway: half
    constant = TrainConfig(steps=100, warmup=10)
    assert [constant.lr_factor(s) for s in range(10, 100)] == [1.0] * 90
    seen = []  # the optimizer really uses these rates
    model, _ = train(CONFIG, TrainConfig(steps=12, warmup=3, batch_size=4, seq_len=8,
                                         decay="cosine", final_lr_fraction=0.2), SOURCE,
                     callback=lambda step, m: seen.append(step))
    assert seen == list(range(1, 13))


def test_decay_reaches_the_optimizer():
    rates = []
    config = TrainConfig(steps=6, warmup=2, batch_size=4, seq_len=8, lr=1e-2, decay="cosine",
                         final_lr_fraction=0.25)
    original = torch.optim.AdamW.step

    def spy(self, *args, **kwargs):
        rates.append(self.param_groups[0]["lr"])
        return original(self, *args, **kwargs)

    torch.optim.AdamW.step = spy
    try:
        train(CONFIG, config, SOURCE)
    finally:
        torch.optim.AdamW.step = original
    np.testing.assert_allclose(rates, [1e-2 * config.lr_factor(s) for s in range(6)], rtol=1e-12)
    assert abs(rates[-1] - 2.5e-3) < 1e-12


def test_converged_reads_the_last_fifth_of_a_curve():
    from companion.train import converged

    falling = np.linspace(2.0, 1.0, 11)  # still improving by 0.2 over the last fifth
    assert not converged(falling)
    flat = np.concatenate([np.linspace(2.0, 1.6, 8), [1.6, 1.598, 1.597]])
    assert converged(flat)  # 0.003 over the last fifth
    assert not converged(flat, tol=0.002)
    with pytest.raises(ValueError, match="enough checkpoints"):
        converged([1.0, 0.9])


def test_strided_evaluation_scores_each_prediction_once_with_long_context():
    model, _ = train(CONFIG, TrainConfig(steps=5, seed=0), SOURCE)
    stream = torch.from_numpy(SOURCE.sample(1, 64, seed=10_000)[0])
    with torch.no_grad():
        # Reference, written as a loop: window i covers tokens [4 i, 4 i + 16).
        scored = []
        for start in range(0, 64 - 16 + 1, 4):
            losses = next_token_loss(model, stream[None, start : start + 16], reduction="none")[0]
            scored.append(losses if start == 0 else losses[-4:])
        expected = torch.cat(scored).double().mean().item()
    assert evaluate(model, SOURCE, [16], num_tokens=64, stride=4)[16] == pytest.approx(expected, rel=1e-6)
    assert evaluate(model, SOURCE, [16], num_tokens=64, stride=16) == evaluate(model, SOURCE, [16], num_tokens=64)


def test_excess_is_the_loss_minus_the_chains_own_loss_on_the_same_tokens():
    model, _ = train(CONFIG, TrainConfig(steps=5, seed=0), SOURCE)
    plain = loss_by_position(model, SOURCE, 12, num_sequences=16, seed=3)
    excess = loss_by_position(model, SOURCE, 12, num_sequences=16, seed=3, excess=True)
    chain = SOURCE.log_loss(SOURCE.sample(16, 12, seed=3)).mean(axis=0)
    np.testing.assert_allclose(plain - excess, chain, rtol=1e-12)
    by_length = evaluate(model, SOURCE, [12], num_tokens=48, excess=True)[12]
    chunks = SOURCE.sample(1, 48, seed=10_000)[0].reshape(4, 12)
    np.testing.assert_allclose(evaluate(model, SOURCE, [12], num_tokens=48)[12] - by_length,
                               SOURCE.log_loss(chunks).mean(), rtol=1e-9)


def test_train_on_the_cpu_device_and_refuse_a_missing_gpu():
    model, _ = train(CONFIG, TrainConfig(steps=2), SOURCE, device="cpu")
    assert model.device == torch.device("cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="sees no CUDA GPU"):
            train(CONFIG, TrainConfig(steps=2), SOURCE, device="cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
def test_train_and_evaluate_on_cuda():
    model, _ = train(CONFIG, TrainConfig(steps=2), SOURCE, device="cuda")
    assert model.device.type == "cuda"
    assert set(evaluate(model, SOURCE, [8], num_tokens=64)) == {8}


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
        (lambda: train(CONFIG, TrainConfig(steps=1), "markov"), TypeError, "source must be one of"),
        (lambda: train(ModelConfig(vocab_size=9), TrainConfig(steps=1), SOURCE), ValueError, "vocab_size is 9"),
        (lambda: evaluate(MODEL, SOURCE, [1], num_tokens=64), ValueError, "eval length must be in"),
        (lambda: evaluate(MODEL, SOURCE, [128], num_tokens=64), ValueError, "eval length must be in"),
        (lambda: evaluate(MODEL, SOURCE, [8], num_tokens=64, stride=9), ValueError, "stride must be at most"),
        (lambda: evaluate(None, SOURCE, [8], num_tokens=64), TypeError, "model must be a TinyDecoder"),
        (lambda: train(CONFIG, TrainConfig(steps=1), SOURCE, device="tpu0"), ValueError, "device must be"),
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
