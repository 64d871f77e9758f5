"""Each row of companion.conventions.CONVENTIONS, executed: the other library's formula
(re-derived in companion.conventions) against the companion call the table names."""

import numpy as np
import pytest
import torch

from companion.alibi import alibi_bias, alibi_key_bias
from companion.attention import scaled_dot_product_attention
from companion.conventions import (
    CONVENTIONS,
    alibi_bloom,
    rope_complex_pairs,
    rope_rotate_every_two,
    rope_rotate_half,
    rope_partial,
    sinusoidal_fairseq,
)
from companion.relative import T5RelativeBias, t5_bucket
from companion.rope import apply_rope, layout_permutation, permute_qk_weights
from companion.sinusoidal import sinusoidal_table


@pytest.fixture
def x():
    return torch.randn(2, 3, 9, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


POS = torch.tensor([0, 1, 2, 3, 5, 8, 13, 21, 1000])


def test_the_table_covers_every_scheme():
    assert {row["scheme"] for row in CONVENTIONS} == {"sinusoidal", "RoPE", "RoPE scaling", "T5 bias", "ALiBi"}
    for row in CONVENTIONS:
        assert set(row) == {"scheme", "where", "companion", "transformers", "layout", "offset", "note"}


def test_paper_sinusoids_are_the_interleaved_table():
    table = sinusoidal_table(20, 8)
    pos = np.arange(20)[:, None]
    w = 10000.0 ** (-np.arange(0, 8, 2) / 8)
    np.testing.assert_allclose(table[:, 0::2], np.sin(pos * w), atol=1e-12)
    np.testing.assert_allclose(table[:, 1::2], np.cos(pos * w), atol=1e-12)


@pytest.mark.parametrize("d", [4, 16, 512])
def test_fairseq_table_is_the_halves_table_with_another_base_and_an_offset(d):
    padding_idx = 1
    fairseq = sinusoidal_fairseq(40, d, padding_idx=padding_idx)
    ours = sinusoidal_table(40, d, base=10000 ** (d / (d - 2)), layout="halves")
    np.testing.assert_allclose(fairseq[padding_idx + 1 :], ours[padding_idx + 1 :], atol=1e-9)
    assert np.all(fairseq[padding_idx] == 0)
    # Token t of a sequence reads row t + padding_idx + 1: it sees position t + 2, not t.
    assert not np.allclose(fairseq[padding_idx + 1 : padding_idx + 11], ours[:10])
    # The last frequency is exactly 1/10000 (the paper's is 10000^(-(d-2)/d)).
    half = d // 2
    np.testing.assert_allclose(fairseq[25, half - 1], np.sin(25 / 10000), rtol=1e-12)


def test_interleaved_rope_is_gptj_and_meta_llama(x):
    ours = apply_rope(x, POS, layout="interleaved")
    torch.testing.assert_close(rope_rotate_every_two(x, POS), ours, rtol=0, atol=1e-10)
    torch.testing.assert_close(rope_complex_pairs(x, POS), ours, rtol=0, atol=1e-10)


def test_halves_rope_is_rotate_half(x):
    torch.testing.assert_close(rope_rotate_half(x, POS), apply_rope(x, POS, layout="halves"), rtol=0, atol=1e-10)


def test_permuting_projection_rows_ports_interleaved_weights_to_rotate_half():
    g = torch.Generator().manual_seed(1)
    heads, head_dim, width = 2, 8, 12
    w_q = torch.randn(heads * head_dim, width, dtype=torch.float64, generator=g)
    w_k = torch.randn(heads * head_dim, width, dtype=torch.float64, generator=g)
    tokens = torch.randn(7, width, dtype=torch.float64, generator=g)
    pos = torch.arange(7)

    def scores(wq, wk, rope):
        q = (tokens @ wq.T).view(7, heads, head_dim).transpose(0, 1)  # (h, s, d)
        k = (tokens @ wk.T).view(7, heads, head_dim).transpose(0, 1)
        return rope(q, pos) @ rope(k, pos).transpose(-2, -1)

    meta = scores(w_q, w_k, rope_complex_pairs)
    wrong = scores(w_q, w_k, rope_rotate_half)
    ported = scores(permute_qk_weights(w_q, heads, to="halves"), permute_qk_weights(w_k, heads, to="halves"), rope_rotate_half)
    torch.testing.assert_close(ported, meta, rtol=0, atol=1e-9)
    assert (wrong - meta).abs().max() > 1.0
    back = permute_qk_weights(permute_qk_weights(w_q, heads, to="halves"), heads, to="interleaved")
    torch.testing.assert_close(back, w_q, rtol=0, atol=0)


def test_permute_qk_weights_is_layout_permutation_per_head():
    w = torch.arange(12.0)
    perm = layout_permutation(6).tolist()
    assert permute_qk_weights(w, 2, to="halves").tolist() == perm + [6 + p for p in perm]
    with pytest.raises(ValueError, match="must divide"):
        permute_qk_weights(torch.zeros(10, 3), 4, to="halves")
    with pytest.raises(ValueError, match="must be even"):
        permute_qk_weights(torch.zeros(6, 3), 2, to="halves")
    with pytest.raises(ValueError, match="to must be one of"):
        permute_qk_weights(torch.zeros(8, 3), 2, to="neox")
    with pytest.raises(ValueError, match="or a"):
        permute_qk_weights(torch.zeros(8, 3, 1), 2, to="halves")


def test_t5_offsets_are_key_minus_query():
    torch.manual_seed(0)
    module = T5RelativeBias(2)
    bias = module(6, 6)
    key_minus_query = torch.arange(6)[None, :] - torch.arange(6)[:, None]
    torch.testing.assert_close(bias, module.bias(t5_bucket(key_minus_query)).permute(2, 0, 1))
    assert t5_bucket(torch.tensor([3])).item() >= 16  # a key after the query: upper half
    assert t5_bucket(torch.tensor([-3])).item() < 16


def test_bloom_alibi_matches_after_softmax_with_a_causal_mask():
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 4, 6, 8, dtype=torch.float64, generator=g) for _ in range(3))
    bloom = alibi_bloom(4, torch.ones(1, 6, dtype=torch.long))
    torch.testing.assert_close(bloom[0], alibi_key_bias(4, 6))
    _, w_bloom = scaled_dot_product_attention(q, k, v, bias=bloom, causal=True)
    _, w_ours = scaled_dot_product_attention(q, k, v, bias=alibi_bias(4, 6), causal=True)
    torch.testing.assert_close(w_bloom, w_ours)


def test_bloom_positions_skip_left_padding():
    mask = torch.tensor([[0, 0, 1, 1, 1]])
    bias = alibi_bloom(1, mask)
    slope = 2.0**-8  # the one slope of a single head
    torch.testing.assert_close(bias[0, 0, 0], slope * torch.tensor([0, 0, 0, 1, 2], dtype=torch.float64))


def test_bad_arguments():
    with pytest.raises(ValueError, match="at least 4"):
        sinusoidal_fairseq(5, 2)
    with pytest.raises(ValueError, match="dim must be even"):
        sinusoidal_fairseq(5, 7)
    with pytest.raises(TypeError, match="num_positions must be an integer"):
        sinusoidal_fairseq(5.0, 8)


def test_partial_rotary_rotates_the_first_features_only(x):
    out = rope_partial(x, POS, rotary_dim=4, layout="halves")
    torch.testing.assert_close(out[..., 4:], x[..., 4:], rtol=0, atol=0)
    # The rotated part is a head of dimension 4 of its own: pairs (0, 2) and (1, 3).
    torch.testing.assert_close(out[..., :4], apply_rope(x[..., :4], POS, layout="halves"), rtol=0, atol=0)
    torch.testing.assert_close(rope_partial(x, POS, rotary_dim=16), apply_rope(x, POS, layout="halves"))
    with pytest.raises(ValueError, match="at most"):
        rope_partial(x, POS, rotary_dim=18)
    with pytest.raises(ValueError, match="rotary_dim must be even"):
        rope_partial(x, POS, rotary_dim=3)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        rope_partial([1.0, 2.0], rotary_dim=2)
