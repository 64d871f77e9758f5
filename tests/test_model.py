"""Tests of companion.model.TinyDecoder."""

import pytest
import torch

from companion.model import SCHEMES, ModelConfig, TinyDecoder


@pytest.mark.parametrize("scheme", SCHEMES)
def test_every_scheme_runs_forward_and_backward(scheme):
    torch.manual_seed(0)
    model = TinyDecoder(ModelConfig(vocab_size=7, dim=32, position=scheme, max_len=64))
    logits = model(torch.randint(0, 7, (3, 20)))
    assert logits.shape == (3, 20, 7)
    logits.logsumexp(-1).sum().backward()
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad and p.shape != (64, 32))


@pytest.mark.parametrize("scheme", SCHEMES)
def test_the_model_is_causal(scheme):
    torch.manual_seed(0)
    model = TinyDecoder(ModelConfig(vocab_size=7, dim=32, position=scheme, max_len=64)).eval()
    a = torch.randint(0, 7, (1, 12))
    b = a.clone()
    b[0, 8:] = (b[0, 8:] + 1) % 7  # change the future only
    torch.testing.assert_close(model(a)[:, :8], model(b)[:, :8])


def test_concat_keeps_the_width_and_appends_positions():
    config = ModelConfig(vocab_size=7, dim=32, position="sinusoidal", combine="concat", position_dim=8, max_len=16)
    model = TinyDecoder(config)
    assert model.token.weight.shape == (7, 24)
    x = model.token(torch.zeros(1, 5, dtype=torch.long)) * model.embed_scale
    combined = model.position(x)
    assert combined.shape == (1, 5, 32)
    torch.testing.assert_close(combined[..., :24], x)


def test_t5_bias_is_shared_across_layers_and_rope_can_be_rescaled():
    t5 = TinyDecoder(ModelConfig(vocab_size=5, dim=32, num_layers=3, position="t5"))
    biases = {id(block.attn.score_bias) for block in t5.blocks}
    assert len(biases) == 1
    rope = TinyDecoder(ModelConfig(vocab_size=5, dim=32, position="rope")).eval()
    tokens = torch.randint(0, 5, (1, 10))
    before = rope(tokens)
    rope.set_rope_scaling({"type": "linear", "factor": 2.0})
    assert not torch.allclose(rope(tokens), before)
    rope.set_rope_scaling(None)
    torch.testing.assert_close(rope(tokens), before)
    with pytest.raises(ValueError, match="needs a rope model"):
        t5.set_rope_scaling(None)


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"position": "xpos"}, ValueError, "position must be one of"),
        ({"combine": "concat", "position": "rope"}, ValueError, "applies to absolute positions"),
        ({"combine": "concat", "position": "learned", "position_dim": 64}, ValueError, "must be smaller than dim"),
        ({"combine": "concat", "position": "learned", "position_dim": 7}, ValueError, "position_dim must be even"),
        ({"dim": 30, "num_heads": 4}, ValueError, "must divide dim"),
        ({"dim": 12, "num_heads": 4, "position": "rope"}, ValueError, "even head dimension"),
        ({"dropout": 1.5}, ValueError, "dropout"),
        ({"vocab_size": 0}, ValueError, "vocab_size"),
        ({"combine": "sum"}, ValueError, "combine must be one of"),
    ],
)
def test_bad_configs(kwargs, error, words):
    with pytest.raises(error, match=words):
        ModelConfig(**{"vocab_size": 5, **kwargs})


def test_bad_inputs():
    model = TinyDecoder(ModelConfig(vocab_size=5, dim=32, position="learned", max_len=8))
    with pytest.raises(ValueError, match=r"\(batch, seq\)"):
        model(torch.zeros(8, dtype=torch.long))
    with pytest.raises(TypeError, match="integer ids"):
        model(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="max_len=8"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(TypeError, match="ModelConfig"):
        TinyDecoder({"vocab_size": 5})
