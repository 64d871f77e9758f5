"""Tests of companion.lab entry points, on tiny budgets (the chapters run the real ones)."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from companion import lab
from companion.model import ModelConfig
from companion.train import TrainConfig, evaluate, one_thread, train


def test_length_extrapolation_shapes_and_floor():
    result = lab.length_extrapolation(schemes=("alibi", "none"), train_len=8, seeds=(0, 1), steps=5,
                                      num_tokens=512, position_sequences=4, stride=4, workers=1)
    assert result["lens"] == [8, 16, 32, 64] and result["seeds"] == [0, 1] and result["position_sequences"] == 4
    assert result["loss"]["alibi"].shape == (2, 4) and result["history"]["none"].shape == (2, 5)
    assert result["excess_by_position"]["none"].shape == (2, 63)
    assert result["strided_lens"] == [8, 16, 48] and result["strided"]["alibi"].shape == (2, 3)
    floors = np.array([result["floor_by_length"][n] for n in result["lens"]])
    for losses in result["loss"].values():
        assert np.all(losses > floors)


def test_the_learned_model_does_not_depend_on_the_evaluation_lengths():
    kwargs = dict(schemes=("learned",), train_len=8, seeds=(0,), steps=3, num_tokens=256,
                  position_sequences=4, workers=1)
    short = lab.length_extrapolation(eval_lens=(8, 16), **kwargs)
    longer = lab.length_extrapolation(eval_lens=(8, 16, 32, 64), **kwargs)
    assert np.array_equal(short["history"]["learned"], longer["history"]["learned"])
    assert np.array_equal(short["loss"]["learned"], longer["loss"]["learned"][:, :2])


def test_strided_schemes_limit_the_sliding_window_and_change_nothing_else():
    kwargs = dict(schemes=("alibi", "learned"), train_len=8, eval_lens=(8, 16), seeds=(0,), steps=3, num_tokens=256,
                  position_sequences=4, stride=4, strided_tokens=64, workers=1)
    every = lab.length_extrapolation(**kwargs)
    some = lab.length_extrapolation(strided_schemes=("alibi",), **kwargs)
    assert set(every["strided"]) == {"alibi", "learned"} and set(some["strided"]) == {"alibi"}
    assert np.array_equal(some["strided"]["alibi"], every["strided"]["alibi"])
    for key in ("loss", "history", "excess_by_position"):  # same models: learned keeps its 8L = 64 rows
        for scheme in kwargs["schemes"]:
            assert np.array_equal(some[key][scheme], every[key][scheme]), (key, scheme)
    with pytest.raises(ValueError, match="strided_schemes scheme must be one of"):
        lab.length_extrapolation(strided_schemes=("rope",), **kwargs)


def test_parallel_runs_equal_serial_runs_bit_for_bit():
    kwargs = dict(schemes=("rope", "t5"), train_len=8, seeds=(0, 1), steps=4, num_tokens=256, position_sequences=4)
    serial = lab.length_extrapolation(workers=1, **kwargs)
    parallel = lab.length_extrapolation(workers=2, **kwargs)
    for key in ("loss", "history", "excess_by_position"):
        for scheme in kwargs["schemes"]:
            assert np.array_equal(serial[key][scheme], parallel[key][scheme]), key


def test_model_options_reach_the_models():
    result = lab.length_extrapolation(schemes=("rope",), train_len=8, seeds=(0,), steps=3, num_tokens=256,
                                      position_sequences=4, workers=1, model_options={"rope_base": 50.0})
    default = lab.length_extrapolation(schemes=("rope",), train_len=8, seeds=(0,), steps=3, num_tokens=256,
                                       position_sequences=4, workers=1)
    assert not np.array_equal(result["loss"]["rope"], default["loss"]["rope"])
    with pytest.raises(ValueError, match="unknown keys \\['rope_bass'\\]"):
        lab.length_extrapolation(schemes=("rope",), steps=1, model_options={"rope_bass": 50.0})


def test_add_vs_concat_rows():
    configs = (("learned", "concat", True), ("learned", "add", True, {"learned_init_std": 1.0}))
    rows = lab.add_vs_concat(configs=configs, seeds=(0, 1), train_len=8, steps=3, num_tokens=256, workers=1)
    assert [r["seed"] for r in rows] == [0, 1, 0, 1] and len(rows[0]["history"]) == 3
    assert [r["options"] for r in rows[1:3]] == [{}, {"learned_init_std": 1.0}]
    assert rows[0]["combine"] == "concat" and rows[0]["parameters"] > 0
    with pytest.raises(TypeError, match="each config must be"):
        lab.add_vs_concat(configs=(("learned", "add"),), steps=1)


def test_rope_extension_shapes():
    result = lab.rope_extension(train_len=8, factors=(2, 3), seeds=(0, 1), steps=3, finetune_factor=2,
                                finetune_steps=2, num_tokens=256, workers=1)
    assert set(result["zero_shot"]) == {"none", "linear", "ntk", "yarn"}
    assert result["zero_shot"]["ntk"].shape == (2, 2) and result["finetuned"]["yarn"].shape == (2,)
    assert result["trained"].shape == (2,) and result["history"].shape == (2, 3)
    model = result["models"][1]  # the trained model itself: it reproduces its own evaluation
    again = evaluate(model, lab.default_source(), [8], num_tokens=256)[8]
    assert again == result["trained"][1] and not model.training


def test_rope_extension_control_trains_each_seed_on_at_the_training_length():
    kwargs = dict(train_len=8, factors=(2,), seeds=(0, 1), steps=3, finetune_factor=2, finetune_steps=2,
                  finetune_batch_size=3, num_tokens=256)
    result = lab.rope_extension(continued_lrs=(1e-3, 5e-2), workers=2, **kwargs)
    assert set(result["continued"]) == {1e-3, 5e-2} and result["continued"][1e-3].shape == (2,)
    source = lab.default_source()
    for k, (seed, model) in enumerate(zip(result["seeds"], result["models"])):
        for lr in (1e-3, 5e-2):  # by hand, on one thread as the lab: 2 steps of 2 * 3 sequences at L
            more = TrainConfig(steps=2, batch_size=6, seq_len=8, seed=seed + 100, warmup=1, lr=lr)
            with one_thread():
                longer, _ = train(model.config, more, source, model=lab.with_rope_scaling(model, None))
                loss = evaluate(longer, source, [8], num_tokens=256)[8]
            assert loss == result["continued"][lr][k]
    assert result["continued"][1e-3][0] != result["continued"][5e-2][0]
    without = lab.rope_extension(workers=1, **kwargs)  # the control changes nothing else
    for key in ("zero_shot", "finetuned"):
        for method, values in without[key].items():
            assert np.array_equal(values, result[key][method]), (key, method)
    assert without["continued"] == {}
    with pytest.raises(ValueError, match="continued_lrs must be positive"):
        lab.rope_extension(continued_lrs=(0.0,), steps=1)
    with pytest.raises(ValueError, match="finetune_steps > 0"):
        lab.rope_extension(continued_lrs=(1e-3,), finetune_steps=0, steps=1)


def test_flops_and_spread():
    config = ModelConfig(vocab_size=8)
    weights = 2 * (4 * 64 * 64 + 8 * 64 * 64) + 64 * 8
    assert lab.approx_flops_per_token(config, 32) == 2 * weights + 2 * 4 * 32 * 64
    assert lab.mean_and_spread([1.0, 2.0, 4.0]) == (pytest.approx(7 / 3), 1.5)


def test_bad_arguments():
    with pytest.raises(ValueError, match="scheme must be one of"):
        lab.length_extrapolation(schemes=("xpos",), steps=1)
    with pytest.raises(ValueError, match="train_len"):
        lab.length_extrapolation(train_len=0, steps=1)
    with pytest.raises(ValueError, match="seeds must name at least one seed"):
        lab.length_extrapolation(seeds=(), steps=1)
    with pytest.raises(ValueError, match="workers must be a positive integer"):
        lab.run_parallel(print, [(1,)], workers=0)


def test_with_rope_scaling_copies_a_freshly_trained_model():
    model, _ = train(ModelConfig(vocab_size=8, dim=32, position="rope"), TrainConfig(steps=2, seq_len=8), lab.default_source())
    stretched = lab.with_rope_scaling(model, {"type": "linear", "factor": 2.0})
    tokens = torch.randint(0, 8, (1, 8))
    assert not torch.allclose(stretched(tokens), model(tokens))  # the copy changed, the original did not
    torch.testing.assert_close(lab.with_rope_scaling(model, None)(tokens), model(tokens))
    with pytest.raises(TypeError, match="TinyDecoder"):
        lab.with_rope_scaling("model", None)


def test_with_rope_speeds_is_a_named_scaling_given_as_ratios():
    from companion.rope import rope_frequencies

    model, _ = train(ModelConfig(vocab_size=8, dim=32, num_heads=2, position="rope"),
                     TrainConfig(steps=2, seq_len=8), lab.default_source())
    tokens = torch.randint(0, 8, (1, 40))
    ntk = {"type": "ntk", "factor": 4}
    ratios = rope_frequencies(16, scaling=ntk) / rope_frequencies(16)
    # the same speeds, up to the last bit of theta * ratio
    torch.testing.assert_close(lab.with_rope_speeds(model, ratios)(tokens),
                               lab.with_rope_scaling(model, ntk)(tokens), rtol=1e-5, atol=1e-5)
    slowed = lab.with_rope_speeds(model, [0.25] + [1.0] * 7)
    assert not torch.allclose(slowed(tokens), model(tokens))
    torch.testing.assert_close(lab.with_rope_speeds(model, np.ones(8))(tokens), model(tokens))
    with pytest.raises(ValueError, match="ratios must be 8 positive numbers"):
        lab.with_rope_speeds(model, [1.0, 2.0])
    with pytest.raises(ValueError, match="ratios must be 8 positive numbers"):
        lab.with_rope_speeds(model, [0.0] * 8)
    alibi, _ = train(ModelConfig(vocab_size=8, dim=32, position="alibi"), TrainConfig(steps=1, seq_len=8),
                     lab.default_source())
    with pytest.raises(ValueError, match="needs a rope model"):
        lab.with_rope_speeds(alibi, [1.0] * 4)


def test_extra_steps_pass_through_the_short_runs_state():
    kwargs = dict(train_len=8, seeds=(0, 1), steps=4, num_tokens=256, position_sequences=4, workers=1)
    short = lab.length_extrapolation(schemes=("none", "alibi"), **kwargs)
    longer = lab.length_extrapolation(schemes=("none", "alibi"), extra_steps={"none": 3}, **kwargs)
    for key in ("loss", "history", "excess_by_position"):
        for scheme in ("none", "alibi"):
            assert np.array_equal(short[key][scheme], longer[key][scheme]), (key, scheme)
    assert longer["long_steps"] == {"none": 7} and longer["long_history"]["none"].shape == (2, 7)
    assert longer["long_loss"]["none"].shape == (2, 4) and "alibi" not in longer["long_loss"]
    with pytest.raises(ValueError, match="extra_steps scheme must be one of"):
        lab.length_extrapolation(schemes=("none",), extra_steps={"rope": 3}, steps=1)


def test_robust_needs_a_margin_of_twice_the_spread():
    assert lab.robust([0.40, 0.50], above=0.3)  # margin 0.10 >= 2 * 0.05 (spread: half the range)
    assert not lab.robust([0.40, 0.52], above=0.3)  # margin 0.10 < 2 * 0.06
    assert not lab.robust([0.20, 0.21], above=0.3)  # does not hold at all
    assert lab.robust([1.0, 1.01], below=1.1) and not lab.robust([1.0, 1.02], below=1.03)
    with pytest.raises(ValueError, match="exactly one"):
        lab.robust([1.0, 2.0])
    with pytest.raises(ValueError, match="at least two"):
        lab.robust([1.0], above=0.0)
    assert lab.approx(1.23456) == "≈1.23" and lab.approx(2, 3) == "≈2.000"


def test_why_not_robust_says_which_part_of_the_rule_decided():
    short = lab.why_not_robust([0.31, 0.35, 0.39, 0.33, 0.36], above=0.3)
    assert short == (
        "the lowest of 5 seeds, 0.31, is above 0.3, but by 0.01, less than 0.08 = 2x "
        "their spread 0.04 (the lab's margin rule)"
    ), "every seed clears 0.3, but by less than twice the spread"
    assert lab.why_not_robust([0.2, 0.31, 0.5], above=0.3) == (
        "the lowest of 3 seeds, 0.2, is not above 0.3: 1 of 3 seeds is at or below it"
    ), "the claim itself fails in one seed"
    assert "2 of 3 seeds are at or above it" in lab.why_not_robust(
        [1.1, 1.2, 1.0], below=1.1
    ), "below: counts the seeds at or above the threshold"
    held = lab.why_not_robust([1.0, 1.01], below=1.1)
    assert held.endswith(": it holds"), "it also explains a robust verdict"
    assert "the highest of 2 seeds, 1.01, is below 1.1 by 0.09" in held, "with numbers"
    assert "3x their spread" in lab.why_not_robust([0.4, 0.5], above=0.3, factor=3), (
        "factor= is the multiple it names")


def test_why_not_robust_agrees_with_robust_and_refuses_what_it_refuses():
    rng = np.random.default_rng(0)
    for _ in range(200):
        values = rng.normal(0.5, rng.uniform(0.001, 0.2), size=rng.integers(2, 8))
        for side in ({"above": 0.3}, {"below": 0.7}):
            text = lab.why_not_robust(values, **side)
            assert text.endswith(": it holds") == lab.robust(values, **side), text
    with pytest.raises(ValueError, match="exactly one"):
        lab.why_not_robust([1.0, 2.0])
    with pytest.raises(ValueError, match="at least two"):
        lab.why_not_robust([[1.0]], above=0.0)
    assert "of 4 seeds" in lab.why_not_robust(np.ones((2, 2)), above=0.5), "flattened"


def _worker_pid(delay):
    time.sleep(delay)
    return os.getpid()


def _fail_on(task, bad):
    if task == bad:
        raise ValueError(f"task {task} failed")
    return task


def test_helpers_stay_alive_between_calls_until_stopped():
    here, tasks = os.getpid(), [(0.1,)] * 6
    first = set(lab.run_parallel(_worker_pid, tasks, workers=2)) - {here}
    again = set(lab.run_parallel(_worker_pid, tasks, workers=2)) - {here}
    assert len(first) == 1 and again == first  # one helper, reused
    lab.stop_workers()
    fresh = set(lab.run_parallel(_worker_pid, tasks[:3], workers=2)) - {here}
    assert len(fresh) == 1 and not fresh & first
    lab.stop_workers()
    assert lab.run_parallel(_worker_pid, [(0.0,)], workers=2) == [here]  # one task: here


def test_results_keep_the_order_of_the_tasks_and_errors_reach_the_caller():
    tasks = [(k, None) for k in range(20)]
    assert lab.run_parallel(_fail_on, tasks, workers=2) == list(range(20))
    for bad in (0, 19):  # wherever the failing task runs
        with pytest.raises(ValueError, match=f"task {bad} failed"):
            lab.run_parallel(_fail_on, [(k, bad) for k in range(20)], workers=2)
    assert lab.run_parallel(_fail_on, tasks, workers=2) == list(range(20))  # still usable


def test_tasks_run_on_one_thread_in_every_process():
    threads = lab.run_parallel(torch.get_num_threads, [()] * 4, workers=2)
    assert threads == [1, 1, 1, 1] and torch.get_num_threads() >= 1


def test_a_script_read_from_standard_input_can_use_helpers():
    # the helpers must not try to re-run the parent's main script "<stdin>", which is no file
    script = (
        "import time\nfrom companion import lab\n"
        "assert lab.run_parallel(time.sleep, [(0.5,)] * 12, workers=2) == [None] * 12\n"
        "(pool,) = lab._POOL.values()\n"  # the helper started and is still alive
        "assert [p.is_alive() for p in pool._processes.values()] == [True]\n"
        "print('helpers ran')\n"
    )
    out = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "helpers ran" in out.stdout, out.stderr[-2000:]


def test_attention_by_offset_reads_each_query_by_how_far_back_it_looks():
    config = ModelConfig(vocab_size=8, dim=16, num_heads=2, num_layers=2, position="alibi",
                         max_len=12)
    model = lab.TinyDecoder(config).train()
    for block in model.blocks:  # zero queries: the weights are ALiBi's alone
        with torch.no_grad():
            block.attn.qkv.weight[:16] = 0.0
            block.attn.qkv.bias[:16] = 0.0
    tokens = torch.randint(0, 8, (3, 12))
    mass = lab.attention_by_offset(model, tokens)
    assert mass.shape == (2, 2, 12, 12) and model.training  # the caller's mode is back
    assert all(b.attn.keep_weights is False and b.attn.last_weights is None for b in model.blocks)
    np.testing.assert_allclose(mass.sum(-1), 1.0, rtol=1e-6)
    slopes = model.alibi_slopes.double().numpy()  # the closed form: softmax(-m * offset)
    for head, m in enumerate(slopes):
        for t in (0, 5, 11):
            expected = np.exp(-m * np.arange(t + 1))
            np.testing.assert_allclose(mass[:, head, t, : t + 1], np.broadcast_to(
                expected / expected.sum(), (2, t + 1)), rtol=1e-5)
            assert np.all(mass[:, head, t, t + 1 :] == 0.0)


def test_a_task_refuses_a_default_dtype_the_helpers_would_not_share():
    """Helpers start with PyTorch's defaults; the parent must not train under other ones."""
    torch.set_default_dtype(torch.float64)
    try:
        with pytest.raises(RuntimeError, match="set_default_dtype"):
            lab.length_extrapolation(schemes=("alibi",), train_len=8, seeds=(0,), steps=2, num_tokens=256,
                                     position_sequences=2, workers=1)
    finally:
        torch.set_default_dtype(torch.float32)
