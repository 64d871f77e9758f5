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


def test_arange_with_left_padding_is_refused():
    with pytest.raises(ValueError, match=r"row 1: its 2 real tokens have positions \[2, 3\]"):
        debugging.check_position_ids(torch.arange(4).expand(2, 4), LEFT)


def test_position_ids_bad_arguments():
    with pytest.raises(ValueError, match="same shape"):
        debugging.check_position_ids(torch.zeros(2, 3), LEFT)
    with pytest.raises(ValueError, match="only 0"):
        debugging.check_position_ids(torch.zeros(2, 4), LEFT * 2)


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
