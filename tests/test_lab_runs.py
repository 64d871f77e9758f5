"""companion.lab_runs: the lab's trained runs, their record, and the check that retrains them."""

import json
import math

import numpy as np
import pytest
import torch

from companion import lab_runs
from companion.lab_runs import CONFIGS, GROUPS, RECORD, SOURCES, STEPS, Run
from companion.train import _losses


@pytest.fixture(scope="module")
def tiny():
    """A 10-step run on the order-2 chain: its record and weights."""
    return lab_runs.train_run(Run("markov", "alibi", 32, 0, steps=10))


def test_every_group_names_known_sources_and_configs_and_runs_are_unique():
    every = lab_runs.runs()
    assert len({(r.key, r.seed) for r in every}) == len(every) == 452
    for group in GROUPS:
        assert set(group.sources) <= set(SOURCES) and set(group.configs) <= set(CONFIGS)
    # seeds 0-4 of the first instances come first, then their seeds 5-9, then the second instances
    order = [(r.steps != lab_runs.budget(r.source, r.config), r.source.endswith("-b"), r.seed >= 5)
             for r in every]
    assert order == sorted(order)


def test_learned_gpt2_starts_its_table_at_the_tokens_scale():
    torch.manual_seed(0)
    model = lab_runs.TinyDecoder(lab_runs.model_config("learned-gpt2", 32))
    tokens = model.token.weight * model.embed_scale
    table = model.position.table
    assert model.embed_scale == 1.0
    assert abs(tokens.pow(2).mean().sqrt() / table.pow(2).mean().sqrt() - 1) < 0.2
    default = lab_runs.TinyDecoder(lab_runs.model_config("learned", 32))
    ratio = default.position.table.pow(2).mean().sqrt() / (default.token.weight * default.embed_scale).pow(2).mean().sqrt()
    assert 0.01 < ratio < 0.03  # the lab's default: 1 to 50


def test_a_run_records_what_the_module_says(tiny):
    record, state = tiny
    assert set(record) == {"loss", "excess", "curve", "converged", "by_position", "attention", "history", "strided"}
    assert len(record["loss"]) == len(record["excess"]) == 4 and len(record["by_position"]) == 8 * 32 - 1
    assert record["curve"]["step"] == list(range(1, 11)) and set(record["curve"]["excess"]) == {"32", "64", "256"}
    for share in ("unseen_far", "near_in", "near_far"):
        values = np.array(record["attention"][share])
        assert values.shape == (2, 4) and np.all((values >= 0) & (values <= 1 + 1e-9))
    assert all(v.device.type == "cpu" for v in state.values())


def test_compare_finds_a_difference_beyond_the_tolerance(tiny):
    record, _ = tiny
    assert lab_runs.compare(record, record) == []
    moved = json.loads(json.dumps(record))
    moved["excess"][2] += 0.05
    differences = lab_runs.compare(record, moved)
    assert len(differences) == 1 and differences[0].startswith("excess:")
    moved["excess"][2] -= 0.04  # 0.01 off: within 0.03
    assert lab_runs.compare(record, moved) == []


def test_write_load_and_trained_model_round_trip(tiny, tmp_path):
    record, state = tiny
    lab_runs._write(Run("markov", "alibi", 32, 0, steps=10), record, state, tmp_path)
    lab_runs._write(Run("markov", "alibi", 32, 3, steps=10), record, state, tmp_path)
    data = lab_runs.load("markov", "alibi", steps=10, root=tmp_path)
    assert data["seeds"] == [0, 3] and data["loss"].shape == (2, 4) and data["curve"].shape == (2, 3, 10)
    assert data["attention_unseen_far"].shape == (2, 2, 4)
    assert not (tmp_path / "weights").exists()  # weights are kept for the full budget only
    lab_runs._write(Run("markov", "alibi", 32, 0), record, state, tmp_path)
    model = lab_runs.trained_model("markov", "alibi", root=tmp_path)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())
    with pytest.raises(ValueError, match=r"no recorded seeds \[1\].*make lab-train"):
        lab_runs.load("markov", "alibi", steps=10, seeds=[1], root=tmp_path)
    with pytest.raises(FileNotFoundError, match="make lab-train"):
        lab_runs.load("markov", "rope", root=tmp_path)
    with pytest.raises(FileNotFoundError, match="make lab-train"):
        lab_runs.trained_model("markov", "rope", root=tmp_path)


def test_sliding_excess_scores_the_last_stride_of_every_window_but_the_first(tiny):
    _, state = tiny
    model = lab_runs.TinyDecoder(lab_runs.model_config("alibi", 32))
    model.load_state_dict(state)
    src = lab_runs.source("markov")
    stream = torch.from_numpy(src.sample(1, 256, seed=lab_runs.EVAL_SEED)[0])
    by_hand = []
    for start in range(16, 256 - 32 + 1, 16):  # the windows after the first
        window = stream[start : start + 32][None]
        own = _losses(model, window)[0, -16:] - torch.from_numpy(src.log_loss(window.numpy()))[0, -16:]
        by_hand.append(own)
    assert math.isclose(lab_runs.sliding_excess(model, src, 32, 16, 256), torch.cat(by_hand).mean().item(),
                        rel_tol=1e-9)


def test_a_run_refuses_another_default_dtype():
    torch.set_default_dtype(torch.float64)
    try:
        with pytest.raises(RuntimeError, match="float32"):
            lab_runs.train_run(Run("markov", "alibi", 32, 0, steps=10))
    finally:
        torch.set_default_dtype(torch.float32)


def test_the_record_holds_every_run_at_the_current_settings():
    """What the chapters read is what make lab-train would write: every run, converged."""
    for run in lab_runs.runs():
        data = json.loads((RECORD / f"{run.key}.json").read_text(encoding="utf-8"))
        assert data["steps"] == run.steps, run.key
        config = lab_runs.model_config(run.config, run.train_len)
        assert data["model"] == json.loads(json.dumps(config.__dict__)), run.key
        entry = data["seeds"][str(run.seed)]
        assert entry["converged"] or lab_runs.unconverged(run), f"{run.key} seed {run.seed} did not converge"
        if run.config in lab_runs.EVERY_SEED_WEIGHTS:
            assert {"stretched", "finetuned", "continued"} <= set(entry), run.key
            assert (RECORD / "weights" / lab_runs._weights_path(run.key, RECORD, run.seed).name).is_file()
        elif run.seed == 0 and not run.source.endswith("-b") and run.steps == STEPS:
            assert (RECORD / "weights" / f"{run.key}.pt").is_file(), run.key


def test_the_command_line_lists_runs(capsys):
    assert lab_runs._main(["list", "--only", "markov--rope--L48"]) == 0
    assert capsys.readouterr().out.split("\n")[0] == "markov--rope--L48 seed 0"


def test_the_stretch_methods_are_the_named_scalings_and_two_controls():
    from companion.rope import rope_frequencies

    theta = rope_frequencies(16)
    methods = lab_runs.stretch_methods(4, 32, 16)
    assert set(methods) == {"none", "linear", "ntk", "yarn", "yarn-notemp", "yarn-paper", "pair0-slowed",
                            "pair0-kept"}
    ntk = rope_frequencies(16, scaling={"type": "ntk", "factor": 4})
    np.testing.assert_allclose(methods["ntk"][0] * theta, ntk, rtol=1e-12)
    np.testing.assert_allclose(methods["linear"][0], 0.25)
    assert methods["yarn"][1] > 1 and methods["yarn-notemp"][1] == 1.0
    assert np.array_equal(methods["yarn"][0], methods["yarn-notemp"][0])
    assert methods["pair0-slowed"][0].tolist() == [0.25] + [1.0] * 7
    assert methods["pair0-kept"][0].tolist() == [1.0] + [0.25] * 7


def test_the_recorded_stretch_of_the_unscaled_model_is_its_own_record():
    """'none' at s * L is the same evaluation as the record's excess at s * L."""
    data = lab_runs.load("hidden", "rope-2x16")
    entry = json.loads((RECORD / "hidden--rope-2x16--L32.json").read_text(encoding="utf-8"))["seeds"]["0"]
    none = np.array(entry["stretched"]["none"])  # (factors, 2): at L, at s * L
    np.testing.assert_allclose(none[:, 0], data["excess"][0, 0], atol=1e-5)
    np.testing.assert_allclose(none[:, 1], data["excess"][0, 1:], atol=1e-5)


def test_every_seeds_weights_reproduce_its_recorded_loss():
    from companion.train import evaluate

    src = lab_runs.source("hidden")
    data = lab_runs.load("hidden", "rope-2x16", seeds=[3])
    model = lab_runs.trained_model("hidden", "rope-2x16", seed=3)
    value = evaluate(model, src, [32], num_tokens=lab_runs.EVAL_TOKENS, seed=lab_runs.EVAL_SEED, excess=True)[32]
    assert abs(value - data["excess"][0, 0]) < 1e-5
    with pytest.raises(FileNotFoundError, match="kept for seed 0"):
        lab_runs.trained_model("hidden", "rope", seed=3)


def test_unconverged_runs_are_named_with_a_reason_and_are_recorded():
    every = {(r.source, r.config) for r in lab_runs.runs()}
    seeds = {(r.source, r.config, r.seed) for r in lab_runs.runs()}
    for key, reason in lab_runs.UNCONVERGED.items():
        assert (key in every if len(key) == 2 else key in seeds) and len(reason) > 20, key
    exempt = [r for r in lab_runs.runs() if lab_runs.unconverged(r)]
    assert {(r.source, r.config) for r in exempt} == {
        ("repeat", "none"), ("repeat", "alibi"), ("repeat", "rope-nope")}
    assert len(exempt) == 7  # the five runs without positions, one ALiBi, one RoPE + NoPE


def test_windowed_excess_runs_the_same_weights_with_a_rope_window():
    model = lab_runs.trained_model("markov", "rope-nope")
    windowed = lab_runs.windowed_excess(model, lab_runs.source("markov"), 32, [32, 256])
    recorded = lab_runs.load("markov", "rope-nope", seeds=[0])["windowed"][0]
    assert abs(windowed[32] - recorded[0]) < 1e-4 and abs(windowed[256] - recorded[3]) < 1e-4
    assert model.config.rope_window is None, "the model itself is left unchanged"
    with pytest.raises(ValueError, match="window"):
        lab_runs.windowed_excess(model, lab_runs.source("markov"), 0, [32])
