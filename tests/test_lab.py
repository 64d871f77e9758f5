"""Tests of companion.lab entry points, on tiny budgets (the chapters run the real ones)."""

import pytest

from companion import lab
from companion.model import ModelConfig


def test_length_extrapolation_shape_and_floor():
    result = lab.length_extrapolation(schemes=("alibi", "none"), train_len=8, steps=5, num_tokens=512)
    assert set(result) == {"floor", "floor_by_length", "loss", "by_position"}
    assert set(result["loss"]["alibi"]) == {8, 16, 32, 64}
    assert result["by_position"]["none"].shape == (63,)
    for losses in result["loss"].values():
        for length, loss in losses.items():
            assert loss > result["floor_by_length"][length]


def test_add_vs_concat_rows():
    rows = lab.add_vs_concat(configs=(("learned", "concat", True),), seeds=(0, 1), train_len=8, steps=3, num_tokens=256)
    assert [r["seed"] for r in rows] == [0, 1]
    assert {r["combine"] for r in rows} == {"concat"} and rows[0]["parameters"] > 0


def test_rope_extension_keys():
    result = lab.rope_extension(train_len=8, factors=(2,), steps=3, finetune_factor=2, finetune_steps=2, num_tokens=256)
    assert set(result["zero_shot"]) == {"none", "linear", "ntk", "yarn"}
    assert set(result["zero_shot"]["ntk"]) == {2}
    assert set(result["finetuned"]) == {"none", "linear", "ntk", "yarn"}


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


def test_with_rope_scaling_copies_a_freshly_trained_model():
    import torch

    from companion.model import ModelConfig
    from companion.train import TrainConfig, train

    model, _ = train(ModelConfig(vocab_size=8, dim=32, position="rope"), TrainConfig(steps=2, seq_len=8), lab.default_source())
    stretched = lab.with_rope_scaling(model, {"type": "linear", "factor": 2.0})
    tokens = torch.randint(0, 8, (1, 8))
    assert not torch.allclose(stretched(tokens), model(tokens))  # the copy changed, the original did not
    torch.testing.assert_close(lab.with_rope_scaling(model, None)(tokens), model(tokens))
    with pytest.raises(TypeError, match="TinyDecoder"):
        lab.with_rope_scaling("model", None)
