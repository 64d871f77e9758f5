"""Tests of companion.debugging: each check finds its bug and passes the right setup."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from companion import debugging
from companion.alibi import alibi_bias, alibi_slopes
from companion.conventions import rope_rotate_every_two, rope_rotate_half
from companion.model import ModelConfig, TinyDecoder
from companion.relative import t5_bucket
from companion.rope import apply_rope
from companion.sinusoidal import sinusoidal_table
from companion.train import TrainConfig, evaluate, train


# ---- check_position_table -------------------------------------------------------------------------

def test_position_table_slice_is_returned_for_numpy_and_torch():
    table = sinusoidal_table(64, 8)
    np.testing.assert_array_equal(debugging.check_position_table(table, 10), table[:10])
    rows = debugging.check_position_table(torch.from_numpy(table), 64)
    assert isinstance(rows, torch.Tensor) and rows.shape == (64, 8)


def test_position_table_too_short_is_refused_where_the_slice_is_silent():
    table = torch.zeros(64, 8)
    assert table[:100].shape == (64, 8)  # what the plain slice does
    with pytest.raises(ValueError, match=r"100 positions but the table has only 64 rows.*max_len >= 100"):
        debugging.check_position_table(table, 100)


@pytest.mark.parametrize("shape, words", [((64, 1, 8), "sequence-first"), ((1, 64, 8), "batch-first")])
def test_position_table_with_a_broadcast_axis_is_refused(shape, words):
    with pytest.raises(ValueError, match=words):
        debugging.check_position_table(np.zeros(shape), 10)


@pytest.mark.parametrize("table, seq_len, error", [
    ([[0.0, 1.0]], 1, TypeError), (np.zeros(8), 1, ValueError), (np.zeros((4, 2)), 0, ValueError),
    (np.zeros((4, 2)), True, TypeError), (np.zeros((4, 2)), 2.0, TypeError),
])
def test_position_table_bad_arguments(table, seq_len, error):
    with pytest.raises(error):
        debugging.check_position_table(table, seq_len)


# ---- embedding_scale_report -----------------------------------------------------------------------

def _model(**options):
    torch.manual_seed(0)
    return TinyDecoder(ModelConfig(vocab_size=8, dim=32, max_len=64, **options))


def test_scale_report_measures_both_parts():
    report = debugging.embedding_scale_report(_model(position="sinusoidal"), 32)
    assert report["position_std"] == pytest.approx(np.std(sinusoidal_table(32, 32)), rel=1e-6)
    assert 0.85 < report["token_std"] < 1.15  # table drawn with std 32 ** -0.5, times sqrt(32)
    assert report["ratio"] == pytest.approx(report["token_std"] / report["position_std"])


def test_scale_report_sees_the_missing_sqrt_d():
    scaled = debugging.embedding_scale_report(_model(position="sinusoidal"), 32)
    plain = debugging.embedding_scale_report(_model(position="sinusoidal", scale_embedding=False), 32)
    assert scaled["token_std"] / plain["token_std"] == pytest.approx(32 ** 0.5, rel=1e-6)
    assert plain["position_std"] == scaled["position_std"]


def test_scale_report_of_a_learned_table():
    report = debugging.embedding_scale_report(_model(position="learned"), 64)
    assert 0.018 < report["position_std"] < 0.022 and report["ratio"] > 40


def test_scale_report_bad_arguments():
    with pytest.raises(TypeError, match="TinyDecoder"):
        debugging.embedding_scale_report(torch.nn.Linear(2, 2), 4)
    with pytest.raises(ValueError, match="position='rope'"):
        debugging.embedding_scale_report(_model(position="rope"), 4)
    with pytest.raises(ValueError, match="max_len >= 65"):
        debugging.embedding_scale_report(_model(position="sinusoidal"), 65)


def _gpt2(seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=100, n_positions=64,
                        bos_token_id=1, eos_token_id=1)
    return GPT2LMHeadModel(config).double().eval()


def test_scale_report_of_transformers_models_with_a_learned_table():
    from transformers import OPTConfig, OPTForCausalLM

    gpt2 = _gpt2()
    report = debugging.embedding_scale_report(gpt2, 16)
    assert report["position_std"] == pytest.approx(gpt2.transformer.wpe.weight[:16].std(unbiased=False).item())
    assert report["token_std"] == pytest.approx(gpt2.transformer.wte.weight.std(unbiased=False).item())
    assert 0.8 < report["ratio"] < 1.25  # both tables drawn with std 0.02, no sqrt(d)
    assert debugging.embedding_scale_report(gpt2, 16, token_scale=2.0)["ratio"] == pytest.approx(2 * report["ratio"])
    torch.manual_seed(0)
    opt = OPTForCausalLM(OPTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, ffn_dim=32,
                                   vocab_size=50, max_position_embeddings=8, word_embed_proj_dim=16))
    with torch.no_grad():
        opt.model.decoder.embed_positions.weight[:2] = 100.0  # OPT never reads rows 0 and 1
    assert debugging.embedding_scale_report(opt, 8)["position_std"] < 1.0
    with pytest.raises(ValueError, match="max_len >= 9"):
        debugging.embedding_scale_report(opt, 9)


def test_scale_report_refuses_transformers_models_without_a_table():
    from transformers import LlamaConfig, LlamaForCausalLM

    llama = LlamaForCausalLM(LlamaConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                         intermediate_size=32, vocab_size=50))
    with pytest.raises(ValueError, match="0 learned position tables"):
        debugging.embedding_scale_report(llama, 4)
    with pytest.raises(ValueError, match="token_scale must be positive"):
        debugging.embedding_scale_report(_gpt2(), 4, token_scale=0.0)
    with pytest.raises(TypeError, match="token_scale"):
        debugging.embedding_scale_report(_gpt2(), 4, token_scale="1")


# ---- dropout_report -------------------------------------------------------------------------------

P_DROP = 0.1


def _parts():
    g = torch.Generator().manual_seed(0)
    words = torch.randn(1, 64, 32, generator=g, dtype=torch.float64).expand(8, -1, -1)  # same tokens 8 times
    table = torch.from_numpy(sinusoidal_table(64, 32))
    return words, table, words + table


def test_dropout_once_after_the_sum():
    words, table, clean = _parts()
    torch.manual_seed(1)
    report = debugging.dropout_report(F.dropout(words + table, P_DROP), clean, P_DROP)
    assert abs(report["zero_share"] - P_DROP) < 0.01
    assert report["consistent_share"] == 1.0 and report["shared_across_batch"] is False


def test_dropout_on_each_part_separately():
    words, table, clean = _parts()
    torch.manual_seed(1)
    report = debugging.dropout_report(F.dropout(words, P_DROP) + F.dropout(table, P_DROP), clean, P_DROP)
    assert abs(report["zero_share"] - P_DROP**2) < 0.005  # both parts must be dropped
    assert abs(report["consistent_share"] - (P_DROP**2 + (1 - P_DROP) ** 2)) < 0.01


def test_dropout_on_the_table_before_broadcasting_is_shared():
    words, table, clean = _parts()
    torch.manual_seed(1)
    report = debugging.dropout_report(words + F.dropout(table, P_DROP), clean, P_DROP)
    assert report["zero_share"] == 0.0 and report["shared_across_batch"] is True


def test_dropout_report_without_repeated_rows_says_none():
    x = torch.randn(2, 3, 4, dtype=torch.float64)
    assert debugging.dropout_report(x, x, 0.0)["shared_across_batch"] is None


@pytest.mark.parametrize("train_out, eval_out, p, error", [
    (np.ones((2, 3)), np.ones((2, 3)), 0.1, ValueError),
    (np.ones((2, 3, 4)), np.ones((2, 3, 5)), 0.1, ValueError),
    (np.ones((2, 3, 4)), np.zeros((2, 3, 4)), 0.1, ValueError),
    (np.ones((2, 3, 4)), np.ones((2, 3, 4)), 1.0, ValueError),
    ("x", np.ones((2, 3, 4)), 0.1, TypeError),
])
def test_dropout_report_bad_arguments(train_out, eval_out, p, error):
    with pytest.raises(error):
        debugging.dropout_report(train_out, eval_out, p)


# ---- find_position_offset and shift_positions -----------------------------------------------------

def test_offset_of_rows_against_a_reference():
    reference = sinusoidal_table(20, 8)
    assert debugging.find_position_offset(reference[:10], reference) == 0
    assert debugging.find_position_offset(reference[3:13], reference) == 3
    assert debugging.find_position_offset(sinusoidal_table(10, 8, layout="halves"), reference) is None
    assert debugging.find_position_offset(reference[9:19], reference, max_shift=8) is None


def test_offset_of_transformers_opt_is_two():
    from transformers.models.opt.modeling_opt import OPTLearnedPositionalEmbedding

    torch.manual_seed(0)
    opt = OPTLearnedPositionalEmbedding(16, 8)
    with torch.no_grad():
        rows = opt(torch.ones(1, 5, dtype=torch.long))[0]  # positions 0 .. 4 of one sequence
    assert debugging.find_position_offset(rows, opt.weight) == 2


def test_offset_bad_arguments():
    with pytest.raises(ValueError, match="features"):
        debugging.find_position_offset(np.zeros((3, 4)), np.zeros((5, 6)))
    with pytest.raises(ValueError, match="at least"):
        debugging.find_position_offset(np.zeros((6, 4)), np.zeros((5, 4)))
    with pytest.raises(ValueError, match="max_shift"):
        debugging.find_position_offset(np.zeros((3, 4)), np.zeros((5, 4)), max_shift=-1)


def test_shift_positions_reads_the_next_row_and_leaves_the_model_alone():
    model = _model(position="learned")
    before = model.position.table.detach().clone()
    shifted = debugging.shift_positions(model, 1)
    torch.testing.assert_close(shifted.position.table[:-1], before[1:], rtol=0, atol=0)
    torch.testing.assert_close(model.position.table, before, rtol=0, atol=0)
    tokens = torch.randint(0, 8, (2, 10))
    assert (shifted(tokens) - model(tokens)).abs().max() > 1e-3
    with pytest.raises(ValueError, match="absolute"):
        debugging.shift_positions(_model(position="alibi"), 1)
    with pytest.raises(ValueError, match="shift must be in"):
        debugging.shift_positions(model, 64)


# ---- RoPE pairs -----------------------------------------------------------------------------------

D = 8
INTERLEAVED = np.array([1, 0, 3, 2, 5, 4, 7, 6])
HALVES = np.array([4, 5, 6, 7, 0, 1, 2, 3])


@pytest.mark.parametrize("rotate, partners, layout", [
    (lambda x, pos: apply_rope(x, pos, layout="interleaved"), INTERLEAVED, "interleaved"),
    (lambda x, pos: apply_rope(x, pos, layout="halves"), HALVES, "halves"),
    (rope_rotate_every_two, INTERLEAVED, "interleaved"),
    (rope_rotate_half, HALVES, "halves"),
])
def test_rope_partners_of_the_companion_and_the_library_forms(rotate, partners, layout):
    found = debugging.rope_partners(rotate, D)
    np.testing.assert_array_equal(found, partners)
    assert debugging.layout_of_partners(found) == layout


def test_rope_partners_of_transformers_llama_are_halves():
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    def llama(x, positions):  # x (n, 1, d) as (batch, seq, head_dim)
        theta = 10000.0 ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)
        angles = torch.cat([positions[:, None] * theta] * 2, dim=-1)  # (s, d), HF's emb
        q, _ = apply_rotary_pos_emb(x[:, None], x[:, None], angles.cos(), angles.sin())
        return q[:, 0]

    assert debugging.layout_of_partners(debugging.rope_partners(llama, D)) == "halves"


@pytest.mark.parametrize("family", ["llama", "gpt_neox"])
def test_transformers_rotate_wraps_the_library_code(family):
    import importlib

    from transformers import GPTNeoXConfig, LlamaConfig

    modeling = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    if family == "llama":
        config = LlamaConfig(hidden_size=32, num_attention_heads=4)
        rotary = modeling.LlamaRotaryEmbedding(config)
    else:
        config = GPTNeoXConfig(hidden_size=32, num_attention_heads=4, rotary_pct=1.0)
        rotary = modeling.GPTNeoXRotaryEmbedding(config)
    rotate = debugging.transformers_rotate(rotary, modeling.apply_rotary_pos_emb)
    np.testing.assert_array_equal(debugging.rope_partners(rotate, D), HALVES)
    x = torch.randn(3, 5, D, dtype=torch.float64)
    torch.testing.assert_close(rotate(x, torch.arange(5)), apply_rope(x, layout="halves"), rtol=0, atol=1e-6)
    with pytest.raises(TypeError, match="rotary_emb"):
        debugging.transformers_rotate(modeling.apply_rotary_pos_emb, modeling.apply_rotary_pos_emb)
    with pytest.raises(TypeError, match="apply_rotary_pos_emb"):
        debugging.transformers_rotate(rotary, None)


def test_rope_partners_refuse_what_is_not_a_pairing():
    with pytest.raises(ValueError, match="exactly one other"):
        debugging.rope_partners(lambda x, pos: x, D)
    with pytest.raises(ValueError, match="shape"):
        debugging.rope_partners(lambda x, pos: x[0], D)
    with pytest.raises(TypeError):
        debugging.rope_partners("apply_rope", D)
    assert debugging.layout_of_partners(np.array([2, 3, 0, 1, 6, 7, 4, 5])) is None
    with pytest.raises(ValueError, match="even length"):
        debugging.layout_of_partners(np.array([1, 0, 2]))


def test_a_wrong_layout_changes_the_output_and_the_permutation_fixes_it():
    model = _model(position="rope").eval()
    tokens = torch.randint(0, 8, (2, 16))
    with torch.no_grad():
        reference = model(tokens)
        wrong = debugging.with_rope_layout(model, "halves", permute_weights=False)(tokens)
        right_model = debugging.with_rope_layout(model, "halves", permute_weights=True)
        right = right_model(tokens)
        back = debugging.with_rope_layout(right_model, "interleaved", permute_weights=True)(tokens)
    assert (wrong - reference).abs().max() > 1e-2
    torch.testing.assert_close(right, reference, rtol=0, atol=1e-5)
    torch.testing.assert_close(back, reference, rtol=0, atol=1e-5)
    assert all(b.attn.qk_transform.layout == "interleaved" for b in model.blocks)  # original untouched
    with pytest.raises(TypeError, match="rope"):
        debugging.with_rope_layout(_model(position="alibi"), "halves", permute_weights=True)
    with pytest.raises(TypeError, match="permute_weights"):
        debugging.with_rope_layout(model, "halves", permute_weights=1)


def _interleaved_apply(q, k, cos, sin, unsqueeze_dim=1):
    """GPT-J's interleaved rotation, on the angles of a Llama-family rotary module."""
    from transformers.models.gptj.modeling_gptj import apply_rotary_pos_emb

    half = cos.shape[-1] // 2  # the Llama family repeats its d/2 angles twice

    def rotate(x):  # GPT-J's tensors are (b, s, h, d)
        return apply_rotary_pos_emb(x.transpose(1, 2), sin[..., :half], cos[..., :half]).transpose(1, 2)

    return rotate(q), rotate(k)


def _ported_gap(family, config, *, heads, kv_heads, rotary_dim, k_heads=None, biases=True, rotary=None):
    """Run a checkpoint trained with interleaved pairs (GPT-J's rotation patched in), then
    its rows permuted to halves in the library's own code: the largest logit gap."""
    import copy
    import importlib
    from unittest import mock

    from transformers import AutoModelForCausalLM

    modeling = importlib.import_module(f"transformers.models.{family}.modeling_{family}")
    torch.manual_seed(0)
    original = AutoModelForCausalLM.from_config(config).double().eval()
    with torch.no_grad():
        for name, p in original.named_parameters():
            if "bias" in name and "proj" in name:
                p.normal_(0, 0.5)  # trained biases are not 0
    tokens = torch.randint(0, config.vocab_size, (2, 12))
    with torch.no_grad(), mock.patch.object(modeling, "apply_rotary_pos_emb", _interleaved_apply):
        reference = original(tokens).logits
    ported = copy.deepcopy(original)
    for layer in ported.model.layers:
        attn = layer.self_attn
        for proj, n in ((attn.q_proj, heads), (attn.k_proj, kv_heads if k_heads is None else k_heads)):
            for p in (proj.weight, proj.bias)[: 1 + (biases and proj.bias is not None)]:
                p.data = debugging.permute_rotary_rows(p.data, n, to="halves",
                                                       rotary_dim=rotary_dim if rotary is None else rotary)
    with torch.no_grad():
        return (ported(tokens).logits - reference).abs().max().item()


def _phi():
    from transformers import PhiConfig

    return PhiConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     intermediate_size=64, vocab_size=50, partial_rotary_factor=0.5, initializer_range=0.2,
                     bos_token_id=1, eos_token_id=1)


def test_permute_rotary_rows_ports_phi_with_gqa_biases_and_partial_rotary():
    kwargs = dict(heads=4, kv_heads=2, rotary_dim=4)  # head_dim 8, half of it rotated
    assert _ported_gap("phi", _phi(), **kwargs) < 1e-12
    assert _ported_gap("phi", _phi(), **kwargs, k_heads=4) > 1e-3  # W_K per query head
    assert _ported_gap("phi", _phi(), **kwargs, biases=False) > 1e-3  # biases left alone
    assert _ported_gap("phi", _phi(), **kwargs, rotary=8) > 1e-3  # the passed-through features moved too


def test_permute_rotary_rows_ports_llama_with_gqa():
    from transformers import LlamaConfig

    config = LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                         intermediate_size=64, vocab_size=50, initializer_range=0.2)
    assert _ported_gap("llama", config, heads=4, kv_heads=1, rotary_dim=None) < 1e-12
    assert _ported_gap("llama", config, heads=4, kv_heads=1, rotary_dim=None, k_heads=4) > 1e-3


def test_permute_rotary_rows_matches_permute_qk_weights_and_refuses_bad_input():
    from companion.rope import permute_qk_weights

    w = torch.randn(16, 5)
    torch.testing.assert_close(debugging.permute_rotary_rows(w, 2, to="halves"),
                               permute_qk_weights(w, 2, to="halves"), rtol=0, atol=0)
    out = debugging.permute_rotary_rows(w, 2, to="halves", rotary_dim=4)
    torch.testing.assert_close(out.view(2, 8, 5)[:, 4:], w.view(2, 8, 5)[:, 4:], rtol=0, atol=0)
    back = debugging.permute_rotary_rows(out, 2, to="interleaved", rotary_dim=4)
    torch.testing.assert_close(back, w, rtol=0, atol=0)
    with pytest.raises(ValueError, match="num_key_value_heads"):
        debugging.permute_rotary_rows(w, 3, to="halves")
    with pytest.raises(ValueError, match="more than the 8"):
        debugging.permute_rotary_rows(w, 2, to="halves", rotary_dim=10)
    with pytest.raises(ValueError, match="even"):
        debugging.permute_rotary_rows(w, 2, to="halves", rotary_dim=3)
    with pytest.raises(TypeError, match="weight"):
        debugging.permute_rotary_rows(np.zeros((16, 5)), 2, to="halves")
    with pytest.raises(ValueError, match="to"):
        debugging.permute_rotary_rows(w, 2, to="sideways")


# ---- distance_profile -----------------------------------------------------------------------------

def test_alibi_profile_is_a_penalty_and_its_flip_is_not():
    bias = alibi_bias(4, 6).numpy()  # (h, q, k), -m (i - j)
    expected = -alibi_slopes(4)[:, None] * np.arange(6)
    np.testing.assert_allclose(debugging.distance_profile(bias), expected, rtol=0, atol=1e-15)
    np.testing.assert_allclose(debugging.distance_profile(-bias), -expected, rtol=0, atol=1e-15)


def test_t5_profile_with_both_signs():
    queries, keys = torch.arange(12)[:, None], torch.arange(12)[None, :]
    kwargs = dict(bidirectional=False, num_buckets=8, max_distance=16)
    right = debugging.distance_profile(t5_bucket(keys - queries, **kwargs))
    flipped = debugging.distance_profile(t5_bucket(queries - keys, **kwargs))
    np.testing.assert_array_equal(right, [0, 1, 2, 3, 4, 4, 5, 5, 6, 6, 6, 6])
    np.testing.assert_array_equal(flipped, np.zeros(12))


def test_profile_with_more_keys_than_queries():
    np.testing.assert_allclose(debugging.distance_profile(alibi_bias(2, 3, 7)),
                               -alibi_slopes(2)[:, None] * np.arange(7), atol=1e-15)


def test_profile_refuses_values_that_are_not_relative():
    with pytest.raises(ValueError, match="distance alone"):
        debugging.distance_profile(np.arange(16.0).reshape(4, 4))
    with pytest.raises(ValueError, match="at least as many keys"):
        debugging.distance_profile(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="shape"):
        debugging.distance_profile(np.zeros(4))


# ---- check_position_ids ---------------------------------------------------------------------------

LEFT = torch.tensor([[1, 1, 1, 1], [0, 0, 1, 1]])
RIGHT = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])


def test_position_ids_from_the_mask_pass_on_both_sides():
    for mask in (LEFT, RIGHT):
        debugging.check_position_ids((mask.cumsum(-1) - 1).clamp(min=0), mask)
    debugging.check_position_ids(torch.arange(4).expand(2, 4), RIGHT)
    debugging.check_position_ids(torch.arange(4)[None], RIGHT)  # (1, s) is broadcast
    debugging.check_position_ids(torch.arange(4)[None])  # no mask: no padding


def test_arange_with_left_padding_is_refused_with_the_clamped_hint():
    with pytest.raises(ValueError, match=r"row 1: its 2 real tokens have positions \[2, 3\]"):
        debugging.check_position_ids(torch.arange(4).expand(2, 4), LEFT)
    with pytest.raises(ValueError, match=r"clamp\(min=0\)"):
        debugging.check_position_ids(torch.arange(4).expand(2, 4), LEFT)


def test_minus_one_on_padding_is_refused_unless_allowed():
    unclamped = LEFT.cumsum(-1) - 1  # -1 on row 1's padding
    with pytest.raises(ValueError, match="row 1: a padding token has position -1"):
        debugging.check_position_ids(unclamped, LEFT)
    debugging.check_position_ids(unclamped, LEFT, padding_min=-1)
    debugging.check_position_ids(unclamped, LEFT, padding_min=None)


def test_positions_transformers_generate_passes_at_every_step_pass():
    gpt2, seen = _gpt2(), []
    gpt2.register_forward_pre_hook(lambda m, args, kwargs: seen.append(
        (kwargs["position_ids"], kwargs["attention_mask"])), with_kwargs=True)
    tokens = torch.tensor([[0, 0, 5, 6, 7], [8, 9, 10, 11, 12]])
    mask = (tokens != 0).long()
    gpt2.generate(tokens, attention_mask=mask, max_new_tokens=3, do_sample=False, pad_token_id=0)
    assert [tuple(p.shape) for p, _ in seen] == [(2, 5), (2, 1), (2, 1)]
    assert [tuple(m.shape) for _, m in seen] == [(2, 5), (2, 6), (2, 7)]
    for positions, step_mask in seen:
        debugging.check_position_ids(positions, step_mask)
    with pytest.raises(ValueError, match="after 3 cached real tokens have positions \\[0\\]"):
        debugging.check_position_ids(torch.zeros(2, 1), seen[1][1])  # a step that restarts at 0
    with pytest.raises(ValueError, match=r"\[:, -1:\]"):
        debugging.check_position_ids(torch.full((2, 1), 5), seen[1][1])  # the column index


def test_plain_forward_positions_of_transformers_are_refused_for_left_padding():
    gpt2, seen = _gpt2(), []
    gpt2.transformer.wpe.register_forward_hook(lambda m, args, out: seen.append(args[0]))
    with torch.no_grad():
        gpt2(LEFT, attention_mask=LEFT)
    with pytest.raises(ValueError, match="row 1"):
        debugging.check_position_ids(seen[0], LEFT)


def test_packed_rows_of_transformers_collator_pass_with_packed():
    from transformers import DataCollatorWithFlattening

    batch = DataCollatorWithFlattening(return_position_ids=True)(
        [{"input_ids": [5, 6, 7]}, {"input_ids": [8, 9]}, {"input_ids": [4]}])
    positions = batch["position_ids"]
    assert positions.tolist() == [[0, 1, 2, 0, 1, 0]]
    debugging.check_position_ids(positions, packed=True)
    with pytest.raises(ValueError, match="pass packed=True"):
        debugging.check_position_ids(positions)
    with pytest.raises(ValueError, match="start at 0 and go up by 1"):
        debugging.check_position_ids(torch.tensor([[0, 1, 3, 0, 1]]), packed=True)
    with pytest.raises(ValueError, match="start at 0"):
        debugging.check_position_ids(torch.tensor([[1, 2, 0]]), packed=True)


def test_chunked_prefill_continues_the_count():
    mask = torch.tensor([[0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])  # 4 cached columns, 2 new
    debugging.check_position_ids((mask.cumsum(-1) - 1).clamp(min=0)[:, -2:], mask)
    with pytest.raises(ValueError, match="after 3 cached real tokens"):
        debugging.check_position_ids(torch.tensor([[4, 5], [4, 5]]), mask)


def test_position_ids_bad_arguments():
    with pytest.raises(ValueError, match="k >= 4"):
        debugging.check_position_ids(torch.zeros(2, 4), torch.ones(2, 3))
    with pytest.raises(ValueError, match="same b"):
        debugging.check_position_ids(torch.zeros(2, 4), torch.ones(3, 4))
    with pytest.raises(ValueError, match="only 0"):
        debugging.check_position_ids(torch.zeros(2, 4), LEFT * 2)
    with pytest.raises(ValueError, match="whole numbers"):
        debugging.check_position_ids(torch.full((1, 2), 0.5))
    with pytest.raises(ValueError, match="packed=True checks whole rows"):
        debugging.check_position_ids(torch.zeros(1, 1), torch.ones(1, 3), packed=True)
    with pytest.raises(TypeError, match="packed"):
        debugging.check_position_ids(torch.zeros(1, 1), packed="yes")
    with pytest.raises(TypeError, match="padding_min"):
        debugging.check_position_ids(torch.zeros(1, 1), padding_min=0.5)


# ---- position buffers -----------------------------------------------------------------------------

def _llama(base=5e5):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, head_dim=128,
                         intermediate_size=32, vocab_size=50, bos_token_id=1, eos_token_id=1,
                         rope_parameters={"rope_type": "default", "rope_theta": base})
    return LlamaForCausalLM(config).eval()


BUFFERS = {"model.rotary_emb.inv_freq", "model.rotary_emb.original_inv_freq"}


def test_to_bfloat16_rounds_the_rotary_buffers_and_to_keeping_buffers_does_not():
    for cast in (lambda m: m.to(torch.bfloat16), lambda m: m.half(), lambda m: m.bfloat16()):
        assert set(debugging.low_precision_buffers(cast(_llama()))) == BUFFERS
    reference = _llama()
    kept = debugging.to_keeping_buffers(_llama(), torch.bfloat16)
    assert debugging.low_precision_buffers(kept) == {}
    assert kept.model.embed_tokens.weight.dtype == torch.bfloat16
    torch.testing.assert_close(kept.model.rotary_emb.inv_freq, reference.model.rotary_emb.inv_freq, rtol=0, atol=0)
    with torch.no_grad():
        assert kept(torch.tensor([[3, 4, 5]])).logits.dtype == torch.bfloat16  # it still runs
    assert debugging.low_precision_buffers(reference) == {}


def test_to_keeping_buffers_keeps_only_the_frequencies():
    from transformers import GemmaConfig, GemmaForCausalLM, XGLMConfig, XGLMForCausalLM

    # XGLM adds its sinusoidal table to the activations: kept in float32 it would not run.
    torch.manual_seed(0)
    xglm = XGLMForCausalLM(XGLMConfig(d_model=32, num_layers=1, attention_heads=2,
                                      ffn_dim=64, vocab_size=100)).eval()
    kept = debugging.to_keeping_buffers(xglm, torch.bfloat16)
    assert kept.model.embed_positions.weights.dtype == torch.bfloat16
    with torch.no_grad():
        assert kept(torch.tensor([[3, 4, 5]])).logits.dtype == torch.bfloat16
    # Gemma: inv_freq kept, embed_scale cast, as a model built in bfloat16 has them.
    config = GemmaConfig(hidden_size=32, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=16, intermediate_size=64, num_hidden_layers=1,
                         vocab_size=100, bos_token_id=1, eos_token_id=1)
    gemma = debugging.to_keeping_buffers(GemmaForCausalLM(config).eval(), torch.bfloat16)
    built = GemmaForCausalLM._from_config(config, dtype=torch.bfloat16)
    low = debugging.low_precision_buffers(gemma)
    assert low == debugging.low_precision_buffers(built) == {
        "model.embed_tokens.embed_scale": torch.bfloat16}


def test_from_pretrained_with_a_dtype_keeps_the_rotary_buffers_in_float32(tmp_path):
    from transformers import LlamaForCausalLM

    _llama().save_pretrained(tmp_path)
    loaded = LlamaForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16)
    assert loaded.model.embed_tokens.weight.dtype == torch.bfloat16
    assert debugging.low_precision_buffers(loaded) == {}


def test_buffer_helpers_refuse_bad_input():
    with pytest.raises(TypeError, match="Module"):
        debugging.low_precision_buffers("model")
    with pytest.raises(TypeError, match="Module"):
        debugging.to_keeping_buffers("model", torch.bfloat16)
    with pytest.raises(TypeError, match="dtype"):
        debugging.to_keeping_buffers(_llama(), torch.int8)


# ---- checklist_runs -------------------------------------------------------------------------------

TINY = dict(train_len=8, eval_lens=(8, 16), steps=3, num_tokens=256, workers=1)


def test_checklist_runs_shapes_and_the_plain_training_path():
    settings = {"sin": {"position": "sinusoidal"}, "alibi": {"position": "alibi"}}
    result = debugging.checklist_runs(settings, seeds=(0, 1), **TINY)
    assert result["lens"] == [8, 16] and result["seeds"] == [0, 1]
    assert result["loss"]["sin"].shape == (2, 2) and result["history"]["alibi"].shape == (2, 3)
    assert set(result["offset"]) == {"sin"} and result["offset"]["sin"].shape == (2, 2, 7)
    config = ModelConfig(vocab_size=8, dim=32, max_len=16, position="sinusoidal")
    model, history = train(config, TrainConfig(steps=3, batch_size=16, seq_len=8, lr=1e-2, seed=1),
                           debugging_source())
    assert history == result["history"]["sin"][1].tolist()
    assert evaluate(model, debugging_source(), [16], num_tokens=256)[16] == result["loss"]["sin"][1, 1]


def debugging_source():
    from companion import lab

    return lab.default_source()


def test_token_init_std_changes_only_the_token_scale():
    settings = {"plain": {"position": "sinusoidal"}, "big": {"position": "sinusoidal", "token_init_std": 1.0}}
    result = debugging.checklist_runs(settings, seeds=(0,), **TINY)
    assert not np.array_equal(result["loss"]["plain"], result["loss"]["big"])


def test_checklist_runs_bad_arguments():
    with pytest.raises(TypeError, match="non-empty dict"):
        debugging.checklist_runs({}, steps=1)
    with pytest.raises(ValueError, match=r"unknown keys \['postion'\]"):
        debugging.checklist_runs({"x": {"postion": "rope"}}, steps=1)
    with pytest.raises(ValueError, match="token_init_std must be positive"):
        debugging.checklist_runs({"x": {"token_init_std": -1.0}}, steps=1)
    with pytest.raises(ValueError, match="seeds"):
        debugging.checklist_runs({"x": {}}, seeds=(), steps=1)
    with pytest.raises(TypeError, match="MarkovChain"):
        debugging.checklist_runs({"x": {}}, source="chain", steps=1)
