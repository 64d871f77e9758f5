"""Tests of companion.model.TinyDecoder."""

import dataclasses

import pytest
import torch

from companion.alibi import alibi_bias
from companion.attention import causal_mask
from companion.model import SCHEMES, ModelConfig, TinyDecoder
from companion.relative import T5RelativeBias


@pytest.mark.parametrize("scheme", SCHEMES)
def test_cached_decoding_equals_the_full_forward(scheme):
    torch.manual_seed(0)
    model = TinyDecoder(ModelConfig(vocab_size=7, dim=32, position=scheme, max_len=64)).eval()
    tokens = torch.randint(0, 7, (2, 21))
    with torch.no_grad():
        full = model(tokens)
        cache = model.new_cache()
        pieces = [model(tokens[:, :9], cache=cache)]  # prefill
        pieces += [model(tokens[:, i : i + 1], cache=cache) for i in range(9, 17)]  # one at a time
        pieces += [model(tokens[:, 17:], cache=cache)]  # and a chunk
    assert len(cache[0]) == 21 and cache[0].k.shape == (2, 4, 21, 8)
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=0, atol=1e-5)


def test_a_cache_past_the_table_is_refused_and_rope_keys_are_stored_rotated():
    model = TinyDecoder(ModelConfig(vocab_size=7, dim=32, position="learned", max_len=8)).eval()
    cache = model.new_cache()
    model(torch.zeros(1, 6, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match="positions up to 8 need a table of 9 rows, but max_len=8"):
        model(torch.zeros(1, 3, dtype=torch.long), cache=cache)
    with pytest.raises(TypeError, match="new_cache"):
        model(torch.zeros(1, 3, dtype=torch.long), cache=[])
    rope = TinyDecoder(ModelConfig(vocab_size=7, dim=32, num_layers=1, position="rope")).eval()
    cache = rope.new_cache()
    x = torch.randn(1, 5, 32)
    rope.blocks[0].attn(x, cache=cache[0], positions=torch.arange(5))
    _, k, _ = (rope.blocks[0].attn._split_heads(t) for t in rope.blocks[0].attn.qkv(x).chunk(3, dim=-1))
    _, rotated = rope.blocks[0].attn.qk_transform(k, k)
    torch.testing.assert_close(cache[0].k, rotated)


def test_relative_biases_hold_the_causal_mask():
    alibi = TinyDecoder(ModelConfig(vocab_size=5, dim=32, position="alibi"))
    expected = alibi_bias(4, 3, 7).float() + causal_mask(3, 7)
    torch.testing.assert_close(alibi._attention_bias(3, 7), expected)
    assert TinyDecoder(ModelConfig(vocab_size=5, dim=32, position="rope"))._attention_bias(3, 7) is None


def test_the_device_follows_the_model():
    model = TinyDecoder(ModelConfig(vocab_size=5, dim=32, position="rope"))
    assert model.device == torch.device("cpu")
    model.set_rope_scaling({"type": "linear", "factor": 2.0})
    assert model.blocks[0].attn.qk_transform.theta.device == model.device


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU on this machine")
@pytest.mark.parametrize("scheme", ["alibi", "t5", "rope"])
def test_on_cuda(scheme):
    model = TinyDecoder(ModelConfig(vocab_size=5, dim=32, position=scheme)).to("cuda")
    model.set_rope_scaling({"type": "linear", "factor": 2.0}) if scheme == "rope" else None
    assert model(torch.zeros(1, 4, dtype=torch.long, device="cuda")).device.type == "cuda"


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
    combined = model._add_positions(x, start=3)
    assert combined.shape == (1, 5, 32)
    torch.testing.assert_close(combined[..., :24], x)
    torch.testing.assert_close(combined[0, :, 24:], model.position.table[3:8].float())


@pytest.mark.parametrize("position", ["sinusoidal", "learned"])
def test_positions_every_layer_adds_the_rows_before_each_block(position):
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=6, dim=16, num_heads=2, num_layers=3, position=position, max_len=12,
                         positions_every_layer=True)
    model = TinyDecoder(config).eval()
    tokens = torch.randint(0, 6, (2, 9))
    rows = model.position.table[:9].float()
    x = model.token(tokens) * model.embed_scale
    for block in model.blocks:  # by hand: the rows go in before every block, the first included
        x = block(x + rows)
    torch.testing.assert_close(model(tokens), model.head(model.norm(x)))
    once = TinyDecoder(dataclasses.replace(config, positions_every_layer=False))
    once.load_state_dict(model.state_dict())
    assert not torch.allclose(once.eval()(tokens), model(tokens))


def test_t5_bias_is_one_module_and_rope_can_be_rescaled():
    t5 = TinyDecoder(ModelConfig(vocab_size=5, dim=32, num_layers=3, position="t5", t5_num_buckets=8, t5_max_distance=20))
    bias_modules = [m for m in t5.modules() if isinstance(m, T5RelativeBias)]
    assert len(bias_modules) == 1 and bias_modules[0].num_buckets == 8 and bias_modules[0].max_distance == 20
    rope = TinyDecoder(ModelConfig(vocab_size=5, dim=32, position="rope")).eval()
    tokens = torch.randint(0, 5, (1, 10))
    before = rope(tokens)
    rope.set_rope_scaling({"type": "linear", "factor": 2.0})
    assert not torch.allclose(rope(tokens), before)
    rope.set_rope_scaling(None)
    torch.testing.assert_close(rope(tokens), before)
    with pytest.raises(ValueError, match="needs a rope model"):
        t5.set_rope_scaling(None)


def test_nope_layers_have_no_positions_and_stay_so_when_rescaled():
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=5, dim=32, num_layers=3, nope_layers=(1,))
    model = TinyDecoder(config).eval()
    assert [b.attn.qk_transform is None for b in model.blocks] == [False, True, False]
    torch.manual_seed(0)
    plain = TinyDecoder(dataclasses.replace(config, nope_layers=())).eval()
    # same weights (RoPE has no parameters, so the draws are the same), other outputs
    for a, b in zip(model.state_dict().values(), plain.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    tokens = torch.randint(0, 5, (2, 12))
    assert not torch.allclose(model(tokens), plain(tokens))
    # positions reach a NoPE layer and change nothing in it
    x = torch.randn(1, 6, 32)
    attn = model.blocks[1].attn
    torch.testing.assert_close(attn(x, causal=True, positions=torch.arange(6)),
                               attn(x, causal=True, positions=torch.arange(6) + 9))
    model.set_rope_scaling({"type": "linear", "factor": 2.0})
    assert model.blocks[1].attn.qk_transform is None and model.blocks[0].attn.qk_transform
    cache = model.new_cache()
    with torch.no_grad():
        pieces = [model(tokens[:, :5], cache=cache), model(tokens[:, 5:], cache=cache)]
        torch.testing.assert_close(torch.cat(pieces, 1), model(tokens), rtol=0, atol=1e-5)


def test_a_rope_window_limits_the_rope_layers_only():
    torch.manual_seed(0)
    one = ModelConfig(vocab_size=5, dim=32, num_layers=1)
    full = TinyDecoder(one).eval()
    windowed = TinyDecoder(dataclasses.replace(one, rope_window=5)).eval()
    windowed.load_state_dict(full.state_dict())
    tokens = torch.randint(0, 5, (2, 16))
    with torch.no_grad():
        out = windowed(tokens)
        # RoPE sees offsets only: the windowed model at t is the full one on t-4 .. t
        for t in (4, 9, 15):
            torch.testing.assert_close(out[:, t], full(tokens[:, t - 4 : t + 1])[:, -1])
        torch.testing.assert_close(out[:, :5], full(tokens)[:, :5], rtol=0, atol=0)
        padded = windowed(tokens, attention_mask=torch.ones(2, 16, dtype=torch.long))
        torch.testing.assert_close(padded, out)
        cache = windowed.new_cache()
        steps = [windowed(tokens[:, :7], cache=cache)]
        steps += [windowed(tokens[:, i : i + 1], cache=cache) for i in range(7, 16)]
        torch.testing.assert_close(torch.cat(steps, 1), out, rtol=0, atol=1e-5)
    hybrid = ModelConfig(vocab_size=5, dim=32, num_layers=2, nope_layers=(1,))
    a = TinyDecoder(hybrid).eval()
    b = TinyDecoder(dataclasses.replace(hybrid, rope_window=5)).eval()
    b.load_state_dict(a.state_dict())
    assert [b._windowed(i) for i in range(2)] == [True, False]
    with torch.no_grad():
        assert not torch.allclose(a(tokens), b(tokens))


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
        ({"t5_max_distance": 4}, ValueError, "max_distance=4 must exceed"),
        ({"rope_base": 1.0}, ValueError, "rope_base must be greater than 1"),
        ({"positions_every_layer": True, "position": "rope"}, ValueError, "needs position in"),
        ({"positions_every_layer": True, "position": "learned", "combine": "concat"}, ValueError,
         "combine='add'"),
        ({"positions_every_layer": 1, "position": "learned"}, TypeError, "True or False"),
        ({"nope_layers": (1,), "position": "alibi"}, ValueError, "needs position='rope'"),
        ({"nope_layers": (2,), "num_layers": 2}, ValueError, r"in \[0, num_layers=2\)"),
        ({"nope_layers": [1]}, ValueError, "must be a tuple"),
        ({"nope_layers": (True,)}, ValueError, "must be a tuple of layer indices"),
        ({"nope_layers": (1, 1)}, ValueError, "names a layer twice"),
        ({"rope_window": 8, "position": "t5"}, ValueError, "needs position='rope'"),
        ({"rope_window": 0}, ValueError, "rope_window"),
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
    with pytest.raises(ValueError, match="max_len=8; build the model with a larger max_len"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(TypeError, match="ModelConfig"):
        TinyDecoder({"vocab_size": 5})
