"""Decoding with a KV cache: what the cache holds and where positions come from.

``tests/test_model.py`` shows that cached decoding equals the full forward pass for every
scheme and that RoPE keys are cached rotated; these are the other properties chapter 7
relies on.
"""

import pytest
import torch

from companion.model import ABSOLUTE, ModelConfig, TinyDecoder


def _decoder(position, **kwargs):
    torch.manual_seed(0)
    return TinyDecoder(ModelConfig(vocab_size=7, dim=32, position=position, **kwargs)).eval()


def _layer0_qkv(model, tokens):
    """Layer 0's ``(b, h, s, d)`` queries, keys and values before any position transform."""
    block = model.blocks[0]
    x = block.norm1(model.token(tokens) * model.embed_scale)
    return (block.attn._split_heads(t) for t in block.attn.qkv(x).chunk(3, dim=-1))


@pytest.mark.parametrize("scheme", ["alibi", "t5"])
def test_fewer_queries_get_the_last_rows_of_the_square_bias(scheme):
    model = _decoder(scheme)
    with torch.no_grad():
        square = model._attention_bias(9, 9)  # (h, 9, 9)
        for q_len in (1, 4):
            torch.testing.assert_close(model._attention_bias(q_len, 9), square[:, -q_len:], rtol=0, atol=0)
    # The rows differ, so taking the first ones instead would be caught.
    assert not torch.equal(square[:, -1:], square[:, :1])


def test_values_are_cached_as_projected_and_keys_once_rotated():
    model = _decoder("rope", num_layers=1)
    tokens = torch.randint(0, 7, (2, 10), generator=torch.Generator().manual_seed(1))
    cache = model.new_cache()
    with torch.no_grad():
        model(tokens[:, :6], cache=cache)
        model(tokens[:, 6:], cache=cache)
        _, k, v = _layer0_qkv(model, tokens)
    rotary = model.blocks[0].attn.qk_transform
    torch.testing.assert_close(cache[0].v, v)
    torch.testing.assert_close(cache[0].k, rotary.rotate(k, torch.arange(10)))
    assert (cache[0].v - rotary.rotate(v, torch.arange(10))).abs().max() > 0.1


def test_rescaling_leaves_cached_keys_rotated_the_old_way():
    model = _decoder("rope")
    tokens = torch.randint(0, 7, (1, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        _, k, _ = _layer0_qkv(model, tokens)
        old_rotary = model.blocks[0].attn.qk_transform
        stale = model.new_cache()
        model(tokens[:, :8], cache=stale)
        model.set_rope_scaling({"type": "linear", "factor": 2.0})
        continued = model(tokens[:, 8:], cache=stale)
        recomputed = model(tokens)
        fresh = model.new_cache()
        steps = [model(tokens[:, :8], cache=fresh), model(tokens[:, 8:], cache=fresh)]
    new_rotary = model.blocks[0].attn.qk_transform
    torch.testing.assert_close(stale[0].k[..., :8, :], old_rotary.rotate(k[..., :8, :]))
    torch.testing.assert_close(stale[0].k[..., 8:, :], new_rotary.rotate(k[..., 8:, :], torch.arange(8, 12)))
    assert (continued - recomputed[:, 8:]).abs().max() > 1e-3
    torch.testing.assert_close(torch.cat(steps, dim=1), recomputed, rtol=0, atol=1e-5)


@pytest.mark.parametrize("scheme", ABSOLUTE)
def test_a_step_past_the_table_is_refused_and_leaves_the_cache_usable(scheme):
    model = _decoder(scheme, max_len=10)
    tokens = torch.randint(0, 7, (1, 10), generator=torch.Generator().manual_seed(3))
    cache = model.new_cache()
    with torch.no_grad():
        full = model(tokens)
        first = model(tokens[:, :7], cache=cache)
        with pytest.raises(ValueError, match="positions up to 10 need a table of 11 rows, but max_len=10"):
            model(torch.zeros(1, 4, dtype=torch.long), cache=cache)
        assert len(cache[0]) == 7
        last = model(tokens[:, 7:], cache=cache)  # exactly fills the table
    torch.testing.assert_close(torch.cat([first, last], dim=1), full, rtol=0, atol=1e-5)


@pytest.mark.parametrize("scheme", ABSOLUTE)
def test_cached_decoding_with_concatenated_positions(scheme):
    model = _decoder(scheme, combine="concat", position_dim=8, max_len=16)
    tokens = torch.randint(0, 7, (2, 12), generator=torch.Generator().manual_seed(4))
    cache = model.new_cache()
    with torch.no_grad():
        full = model(tokens)
        pieces = [model(tokens[:, :5], cache=cache)] + [model(tokens[:, i : i + 1], cache=cache) for i in range(5, 12)]
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, rtol=0, atol=1e-5)
