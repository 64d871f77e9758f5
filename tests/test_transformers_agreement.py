"""The companion against Hugging Face ``transformers`` itself, one test per row of
companion.conventions.CONVENTIONS (and the details chapter 10 shows).

Every module is built from a small config: nothing is downloaded. ``transformers`` computes
in float32, so the tolerances are float32 ones; each test also shows that the *other*
convention is far off, so a tolerance that is too loose would be caught.
"""

import math

import numpy as np
import pytest
import torch
from transformers import GPTNeoXConfig, LlamaConfig, T5Config
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.bloom.modeling_bloom import _get_alibi_slopes, build_alibi_tensor
from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding
from transformers.models.gpt_neox.modeling_gpt_neox import apply_rotary_pos_emb as neox_apply_rotary_pos_emb
from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb as gptj_apply_rotary_pos_emb
from transformers.models.gptj.modeling_gptj import create_sinusoidal_positions
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb, repeat_kv
from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding
from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding
from transformers.models.roformer.modeling_roformer import RoFormerSelfAttention, RoFormerSinusoidalPositionalEmbedding
from transformers.models.t5.modeling_t5 import T5Attention
from transformers.models.xlm.modeling_xlm import create_sinusoidal_embeddings

from companion.alibi import alibi_bias, alibi_key_bias, alibi_slopes
from companion.attention import MultiHeadSelfAttention, scaled_dot_product_attention
from companion.conventions import CONVENTIONS, alibi_bloom, rope_partial, sinusoidal_fairseq
from companion.relative import T5RelativeBias, t5_bucket
from companion.rope import apply_rope, permute_qk_weights, rope_frequencies, yarn_attention_scale
from companion.sinusoidal import sinusoidal_table

F32 = dict(rtol=0, atol=2e-5)  # float32 rounding of values in [-1, 1] or of products of a few of them


def llama_config(head_dim=16, heads=2, kv_heads=None, *, max_len=64, rope_parameters=None):
    return LlamaConfig(
        hidden_size=heads * head_dim, num_attention_heads=heads, num_key_value_heads=kv_heads or heads,
        head_dim=head_dim, num_hidden_layers=1, vocab_size=8, intermediate_size=8,
        max_position_embeddings=max_len, rope_parameters=rope_parameters or {"rope_type": "default", "rope_theta": 1e4},
    )


@pytest.fixture
def qk():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2, 3, 9, 16, generator=g), torch.randn(2, 3, 9, 16, generator=g)  # (b, h, s, d)


POS = torch.tensor([0, 1, 2, 3, 5, 8, 13, 21, 99])


def test_every_row_names_a_transformers_function():
    assert {row["scheme"] for row in CONVENTIONS} == {"sinusoidal", "RoPE", "RoPE scaling", "T5 bias", "ALiBi"}
    assert all(row["transformers"] for row in CONVENTIONS)


# Sinusoidal tables -------------------------------------------------------------------------

def test_xlm_table_is_the_papers_interleaved_table():
    out = create_sinusoidal_embeddings(50, 16, torch.empty(50, 16))
    np.testing.assert_allclose(out.numpy(), sinusoidal_table(50, 16), **F32)
    assert np.abs(out.numpy() - sinusoidal_table(50, 16, layout="halves")).max() > 0.5


def test_marian_table_is_the_halves_table():
    weight = MarianSinusoidalPositionalEmbedding(50, 16).create_weight()
    np.testing.assert_allclose(weight.numpy(), sinusoidal_table(50, 16, layout="halves"), **F32)
    roformer = RoFormerSinusoidalPositionalEmbedding(50, 16).create_weight()
    np.testing.assert_allclose(roformer.numpy(), sinusoidal_table(50, 16, layout="halves"), **F32)


def test_m2m100_is_fairseq_with_positions_from_padding_idx_plus_one():
    d, padding_idx = 16, 1
    table = M2M100SinusoidalPositionalEmbedding.get_embedding(40, d, padding_idx).numpy()
    ours = sinusoidal_table(40, d, base=10000 ** (d / (d - 2)), layout="halves")
    np.testing.assert_allclose(table[padding_idx + 1:], ours[padding_idx + 1:], **F32)
    assert np.all(table[padding_idx] == 0)
    np.testing.assert_allclose(table, sinusoidal_fairseq(40, d, padding_idx=padding_idx), **F32)
    module = M2M100SinusoidalPositionalEmbedding(40, d, padding_idx)
    tokens = torch.tensor([[5, 6, 7, 8], [padding_idx, padding_idx, 7, 8]])  # the second is left-padded
    out = module(tokens).numpy()
    np.testing.assert_allclose(out[0], ours[[2, 3, 4, 5]], **F32)  # token t reads row t + 2
    np.testing.assert_allclose(out[1, 2:], ours[[2, 3]], **F32)  # padding is skipped
    assert np.all(out[1, :2] == 0)


# RoPE --------------------------------------------------------------------------------------

def test_gptj_rotate_every_two_is_the_interleaved_layout(qk):
    q, _ = qk
    sincos = create_sinusoidal_positions(100, 16)[POS][None]  # (1, s, d): [sin | cos]
    sin, cos = torch.split(sincos, 8, dim=-1)
    theirs = gptj_apply_rotary_pos_emb(q.transpose(1, 2), sin, cos).transpose(1, 2)  # GPT-J is (b, s, h, d)
    torch.testing.assert_close(theirs, apply_rope(q, POS, layout="interleaved"), **F32)
    assert (theirs - apply_rope(q, POS, layout="halves")).abs().max() > 0.5


def test_roformer_is_the_interleaved_layout(qk):
    q, k = qk
    sinusoidal_pos = RoFormerSinusoidalPositionalEmbedding(100, 16).create_weight()[POS]  # (s, d)
    rq, rk = RoFormerSelfAttention.apply_rotary_position_embeddings(sinusoidal_pos, q, k)
    torch.testing.assert_close(rq, apply_rope(q, POS), **F32)
    torch.testing.assert_close(rk, apply_rope(k, POS), **F32)


def test_llama_rotate_half_is_the_halves_layout(qk):
    q, k = qk
    cos, sin = LlamaRotaryEmbedding(llama_config())(q, POS[None])
    rq, rk = apply_rotary_pos_emb(q, k, cos, sin)
    torch.testing.assert_close(rq, apply_rope(q, POS, layout="halves"), **F32)
    torch.testing.assert_close(rk, apply_rope(k, POS, layout="halves"), **F32)
    assert (rq - apply_rope(q, POS)).abs().max() > 0.5


def test_llama_angles_are_float32_even_for_bfloat16_inputs():
    x = torch.zeros(1, 1, 3, 16, dtype=torch.bfloat16)
    positions = torch.tensor([[0, 257, 2047]])
    cos, _ = LlamaRotaryEmbedding(llama_config())(x, positions)
    assert cos.dtype == torch.bfloat16
    angles32 = positions[..., None].float() * torch.from_numpy(rope_frequencies(16)).float()
    torch.testing.assert_close(cos, torch.cat([angles32, angles32], -1).cos().bfloat16(), rtol=0, atol=0)
    angles_bf16 = positions[..., None].bfloat16() * torch.from_numpy(rope_frequencies(16)).bfloat16()
    assert (cos.float() - torch.cat([angles_bf16, angles_bf16], -1).float().cos()).abs().max() > 0.1


@pytest.mark.parametrize("rotary_pct", [0.25, 0.5, 1.0])
def test_neox_partial_rotary_rotates_halves_of_the_rotated_part(qk, rotary_pct):
    q, k = qk
    config = GPTNeoXConfig(hidden_size=48, num_attention_heads=3, rotary_pct=rotary_pct, num_hidden_layers=1,
                           vocab_size=8, intermediate_size=8, max_position_embeddings=128)
    cos, sin = GPTNeoXRotaryEmbedding(config)(q, POS[None])
    rq, rk = neox_apply_rotary_pos_emb(q, k, cos, sin)
    rot = int(16 * rotary_pct)
    torch.testing.assert_close(rq, rope_partial(q, POS, rotary_dim=rot, layout="halves"), **F32)
    torch.testing.assert_close(rk, rope_partial(k, POS, rotary_dim=rot, layout="halves"), **F32)
    if rot < 16:  # halves of the whole head would pair other features
        assert (rq - apply_rope(q, POS, layout="halves")).abs().max() > 0.1


def test_gqa_key_weights_are_permuted_per_kv_head():
    """Meta-layout (interleaved) weights with 4 query heads and 2 KV heads, ported to HF Llama's
    rotate_half: W_Q per query head, W_K per KV head; permuting W_K per query head is wrong."""
    g = torch.Generator().manual_seed(3)
    heads, kv_heads, d, width, s = 4, 2, 8, 12, 6
    w_q = torch.randn(heads * d, width, generator=g, dtype=torch.float64)
    w_k = torch.randn(kv_heads * d, width, generator=g, dtype=torch.float64)
    x = torch.randn(1, s, width, generator=g, dtype=torch.float64)
    pos = torch.arange(s)

    def heads_of(w, n):
        return (x @ w.T).view(1, s, n, d).transpose(1, 2)  # (b, n, s, d)

    meta = apply_rope(heads_of(w_q, heads), pos) @ repeat_kv(apply_rope(heads_of(w_k, kv_heads), pos), 2).transpose(-2, -1)
    cos, sin = LlamaRotaryEmbedding(llama_config(d, heads, kv_heads))(x.float(), pos[None])

    def hf_scores(wk_ported):
        q = heads_of(permute_qk_weights(w_q, heads, to="halves"), heads).float()
        k = heads_of(wk_ported, kv_heads).float()
        rq, rk = apply_rotary_pos_emb(q, k, cos, sin)
        return (rq @ repeat_kv(rk, 2).transpose(-2, -1)).double()

    torch.testing.assert_close(hf_scores(permute_qk_weights(w_k, kv_heads, to="halves")), meta, rtol=1e-4, atol=1e-4)
    # 16 rows cut into 4 blocks of 4 instead of 2 heads of 8: the blocks have the wrong size,
    # so the permutation pairs the wrong features.
    wrong = permute_qk_weights(w_k, heads, to="halves")
    assert (hf_scores(wrong) - meta).abs().max() > 1.0


# RoPE scaling -------------------------------------------------------------------------------

SCALINGS = [
    ({"rope_type": "linear", "factor": 4.0}, {"type": "linear", "factor": 4.0}, 1e4, 2048),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048},
     {"type": "yarn", "factor": 4.0, "original_max_len": 2048}, 1e4, 8192),
    ({"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096, "beta_fast": 16, "beta_slow": 2},
     {"type": "yarn", "factor": 8.0, "original_max_len": 4096, "beta_fast": 16, "beta_slow": 2}, 1e4, 32768),
    ({"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096, "truncate": False},
     {"type": "yarn", "factor": 16.0, "original_max_len": 4096, "truncate": False}, 1e6, 65536),
    ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
      "original_max_position_embeddings": 8192},
     {"type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_len": 8192},
     5e5, 131072),
    ({"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 2.0, "high_freq_factor": 8.0,
      "original_max_position_embeddings": 4096},
     {"type": "llama3", "factor": 32.0, "low_freq_factor": 2.0, "high_freq_factor": 8.0, "original_max_len": 4096},
     5e5, 131072),
]


@pytest.mark.parametrize("theirs, ours, base, max_len", SCALINGS, ids=lambda v: str(v)[:40])
def test_rope_scaling_frequencies_match_transformers(theirs, ours, base, max_len):
    config = llama_config(128, 1, max_len=max_len, rope_parameters={**theirs, "rope_theta": base})
    inv_freq, attention_factor = ROPE_INIT_FUNCTIONS[theirs["rope_type"]](config)
    expected = rope_frequencies(128, base=base, scaling=ours)
    np.testing.assert_allclose(inv_freq.double().numpy(), expected, rtol=1e-6, atol=0)
    assert attention_factor == pytest.approx(yarn_attention_scale(ours["factor"]) if ours["type"] == "yarn" else 1.0)


def test_the_papers_yarn_ramp_is_not_what_transformers_computes():
    config = llama_config(128, 1, max_len=8192, rope_parameters={
        "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048, "rope_theta": 1e4})
    inv_freq = ROPE_INIT_FUNCTIONS["yarn"](config)[0].double().numpy()
    paper = rope_frequencies(128, scaling={"type": "yarn", "factor": 4.0, "original_max_len": 2048, "ramp": "rotations"})
    assert np.abs(inv_freq / paper - 1).max() > 0.5


@pytest.mark.parametrize("seq_len", [10, 64, 65, 200, 1000])
def test_dynamic_ntk_matches_transformers(seq_len):
    config = llama_config(32, 1, max_len=64, rope_parameters={"rope_type": "dynamic", "factor": 4.0, "rope_theta": 1e4})
    inv_freq, _ = ROPE_INIT_FUNCTIONS["dynamic"](config, seq_len=seq_len)
    ours = rope_frequencies(32, scaling={"type": "dynamic", "factor": 4.0, "original_max_len": 64, "seq_len": seq_len})
    np.testing.assert_allclose(inv_freq.double().numpy(), ours, rtol=1e-6, atol=0)


# T5 -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("bidirectional, num_buckets, max_distance", [(True, 32, 128), (False, 32, 128), (True, 64, 256)])
def test_t5_buckets_match_transformers(bidirectional, num_buckets, max_distance):
    offsets = torch.arange(-1000, 1001)[None, :]
    theirs = T5Attention._relative_position_bucket(offsets, bidirectional, num_buckets, max_distance)
    ours = t5_bucket(offsets, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    assert torch.equal(theirs, ours)


def test_t5_attention_has_no_1_over_sqrt_d_and_the_companion_runs_it_with_w_q_scaled():
    torch.manual_seed(0)
    d_model, heads, d_kv = 16, 4, 4
    config = T5Config(d_model=d_model, d_kv=d_kv, num_heads=heads, num_layers=1, vocab_size=8, d_ff=8,
                      dropout_rate=0.0, attn_implementation="eager")
    t5 = T5Attention(config, has_relative_attention_bias=True).eval()
    x = torch.randn(1, 7, d_model)

    def companion(scale_q):
        ours = MultiHeadSelfAttention(d_model, heads, score_bias=T5RelativeBias(heads))
        with torch.no_grad():
            ours.qkv.weight.copy_(torch.cat([t5.q.weight * scale_q, t5.k.weight, t5.v.weight]))
            ours.qkv.bias.zero_()
            ours.out.weight.copy_(t5.o.weight)
            ours.out.bias.zero_()
            ours.score_bias.bias.weight.copy_(t5.relative_attention_bias.weight)
            return ours(x)

    with torch.no_grad():
        theirs = t5(x)[0]
    torch.testing.assert_close(companion(math.sqrt(d_kv)), theirs, rtol=1e-5, atol=1e-5)
    assert (companion(1.0) - theirs).abs().max() > 1e-3


# ALiBi --------------------------------------------------------------------------------------

@pytest.mark.parametrize("heads", [1, 4, 8, 12, 20])
def test_bloom_slopes_and_bias_match(heads):
    np.testing.assert_allclose(_get_alibi_slopes(heads, "cpu").double().numpy(), alibi_slopes(heads), rtol=1e-6)
    mask = torch.ones(2, 10, dtype=torch.long)
    bloom = build_alibi_tensor(mask, heads, torch.float32).view(2, heads, 1, 10)
    torch.testing.assert_close(bloom[0].double(), alibi_key_bias(heads, 10), rtol=1e-6, atol=0)


def test_bloom_bias_gives_the_papers_attention_under_a_causal_mask_and_skips_padding():
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 4, 6, 8, dtype=torch.float64, generator=g) for _ in range(3))
    bloom = build_alibi_tensor(torch.ones(1, 6, dtype=torch.long), 4, torch.float64).view(1, 4, 1, 6)
    _, w_bloom = scaled_dot_product_attention(q, k, v, bias=bloom, causal=True)
    _, w_paper = scaled_dot_product_attention(q, k, v, bias=alibi_bias(4, 6), causal=True)
    torch.testing.assert_close(w_bloom, w_paper, rtol=1e-6, atol=1e-7)
    _, w_open = scaled_dot_product_attention(q, k, v, bias=bloom)
    _, w_symmetric = scaled_dot_product_attention(q, k, v, bias=alibi_bias(4, 6, causal=False))
    assert (w_open - w_symmetric).abs().max() > 0.1
    mask = torch.tensor([[0, 0, 1, 1, 1]])
    torch.testing.assert_close(build_alibi_tensor(mask, 2, torch.float64), alibi_bloom(2, mask)[0], rtol=1e-6, atol=0)


def test_the_conventions_rewrites_match_the_library(qk):
    """companion.conventions writes the libraries' forms for readers without transformers."""
    from companion.conventions import rope_rotate_every_two, rope_rotate_half

    q, k = qk
    cos, sin = LlamaRotaryEmbedding(llama_config())(q, POS[None])
    torch.testing.assert_close(rope_rotate_half(q, POS), apply_rotary_pos_emb(q, k, cos, sin)[0], **F32)
    sin_j, cos_j = torch.split(create_sinusoidal_positions(100, 16)[POS][None], 8, dim=-1)
    gptj = gptj_apply_rotary_pos_emb(q.transpose(1, 2), sin_j, cos_j).transpose(1, 2)
    torch.testing.assert_close(rope_rotate_every_two(q, POS), gptj, **F32)
