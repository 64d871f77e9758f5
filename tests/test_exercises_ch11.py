"""Tests of the chapter 11 checkers: right answers (computed here by loops and closed forms,
not by the checkers) pass in float32 and float64, each typical mistake gets its diagnosis,
and junk gets a message instead of an exception."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from companion.exercises import (
    Feedback,
    check_longrope_attention_factor,
    check_mla_cache_entries,
    check_mrope_position_ids,
)

JUNK = [None, "abc", b"x", True, 1j, float("nan"), float("inf"), [], [1, 2], [[1, 2], [3]],
        {"a": 1}, {1, 2}, object(), np.array([]), np.zeros((3, 3)), np.array([1j, 2j]),
        torch.tensor(float("nan")), torch.zeros(2, 2, requires_grad=True)]


def _forms(value):
    """float64 and float32, NumPy and torch, and plain Python lists."""
    array = np.asarray(value, dtype=np.float64)
    forms = {"float64 numpy": array, "float32 numpy": array.astype(np.float32),
             "float32 torch": torch.tensor(array, dtype=torch.float32),
             "float64 torch": torch.tensor(array, dtype=torch.float64),
             "python": array.tolist()}
    if array.ndim == 0:
        forms.update({"np.float32": np.float32(array), "float": float(array)})
    if np.all(array == np.round(array)):
        forms["int64 numpy"] = array.astype(np.int64)
        forms["int64 torch"] = torch.tensor(array.astype(np.int64))
    return forms


def _fails_with(feedback, words):
    assert isinstance(feedback, Feedback) and not feedback, feedback
    assert words in feedback.message, feedback.message


# ---- ch11-mrope-ids ---------------------------------------------------------------------

def _ids(after=6, rows=4, cols=3, start=2, swap=False, by_column=False):
    """2 text tokens, an image of rows x cols merged tokens at position 2, 3 text tokens."""
    t, h, w = [0, 1], [0, 1], [0, 1]
    cells = ([(r, c) for c in range(cols) for r in range(rows)] if by_column
             else [(r, c) for r in range(rows) for c in range(cols)])
    for r, c in cells:
        t.append(2)
        h.append(start + (c if swap else r))
        w.append(start + (r if swap else c))
    for i in range(after, after + 3):
        t.append(i), h.append(i), w.append(i)
    return np.array([t, h, w])


RIGHT_IDS = _ids()


def _library_ids():
    """Qwen2VLModel.get_rope_index on the exercise's prompt: (3, 1, 17)."""
    from transformers import Qwen2VLConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    text = dict(hidden_size=32, num_attention_heads=2, num_key_value_heads=2,
                num_hidden_layers=1, vocab_size=16, intermediate_size=8,
                rope_parameters={"rope_type": "default", "rope_theta": 1e6,
                                 "mrope_section": [2, 3, 3]})
    vision = dict(depth=1, embed_dim=16, hidden_size=32, num_heads=2, spatial_merge_size=2)
    model = Qwen2VLModel(Qwen2VLConfig(text_config=text, vision_config=vision))
    kinds = torch.tensor([[0] * 2 + [1] * 12 + [0] * 3])
    ids, _ = model.get_rope_index(torch.zeros_like(kinds), kinds,
                                  image_grid_thw=torch.tensor([[1, 8, 6]]))
    return ids


def test_mrope_truth_is_qwen2_vls():
    ids = _library_ids()
    assert np.array_equal(ids[:, 0].numpy(), RIGHT_IDS)


def test_mrope_accepts_the_right_answer_in_every_form():
    for form, answer in _forms(RIGHT_IDS).items():
        feedback = check_mrope_position_ids(answer)
        assert feedback, f"{form}: {feedback.message}"


@pytest.mark.parametrize(
    "answer, words",
    [
        (np.tile(np.arange(17), (3, 1)), "plain RoPE positions"),
        (_ids(swap=True), "rows and columns are swapped"),
        (_ids(rows=3, cols=4), "rows and columns are swapped"),
        (_ids(by_column=True), "row by row"),
        (_ids(start=0), "start at the image's first position"),
        (_ids(after=14), "one position per image token"),
        (_ids(after=10), "divide the patches by the merge size"),
        (np.zeros((3, 53)), "merges 2 x 2 patches"),
        (RIGHT_IDS.T, "transpose"),
        (RIGHT_IDS[:, None, :], "get_rope_index's batch axis"),
        (_ids(after=5), "off by one"),
        (_ids(after=7), "off by one"),
        (_ids(after=9), "one position per token, the same on t, h and w"),
        (RIGHT_IDS + 0.5, "whole numbers"),
    ],
)
def test_mrope_names_each_mistake(answer, words):
    for form, value in _forms(answer).items():
        _fails_with(check_mrope_position_ids(value), words)


def test_mrope_names_the_batch_axis_of_the_librarys_output():
    """What get_rope_index returns, (3, batch, s), is told apart from a wrong answer."""
    ids = _library_ids()
    _fails_with(check_mrope_position_ids(ids), "batch axis")
    assert check_mrope_position_ids(ids[:, 0])


def test_mrope_both_rules_give_the_exercises_answer():
    """An image: Qwen's rule and that of transformers 5.3 to 5.24 agree (the statement)."""
    from companion.mrope import mrope_position_ids

    for rule in ("max", "grid"):
        ids = mrope_position_ids([2, (1, 8, 6), 3], spatial_merge_size=2, text_after=rule)
        assert np.array_equal(ids.numpy(), RIGHT_IDS), rule


def test_mrope_right_start_wrong_rest_gets_a_hint():
    wrong = RIGHT_IDS.copy()
    wrong[1, 5] += 1
    _fails_with(check_mrope_position_ids(wrong), "check h and w")
    _fails_with(check_mrope_position_ids(np.ones((3, 17))), "text tokens get (p, p, p)")


@pytest.mark.parametrize("junk", JUNK + [np.full((3, 17), np.nan)])
def test_mrope_refuses_junk_with_a_message(junk):
    feedback = check_mrope_position_ids(junk)
    assert isinstance(feedback, Feedback) and not feedback and feedback.message


# ---- ch11-longrope-factor ---------------------------------------------------------------

S, L, N = 65536 / 8192, 8192, 65536
RIGHT_A = math.sqrt(16 / 13)  # 1 + ln 8 / ln 8192 = 1 + 3 / 13


def test_longrope_truth_is_transformers():
    from transformers import Phi3Config
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    config = Phi3Config(max_position_embeddings=N, original_max_position_embeddings=L,
                        rope_parameters={"rope_type": "longrope", "rope_theta": 1e4,
                                         "short_factor": [1.0] * 48,
                                         "long_factor": [2.0] * 48})
    assert math.isclose(ROPE_INIT_FUNCTIONS["longrope"](config)[1], RIGHT_A)


def test_longrope_accepts_the_right_answer_in_every_form():
    for form, answer in _forms(RIGHT_A).items():
        feedback = check_longrope_attention_factor(answer)
        assert feedback, f"{form}: {feedback.message}"
    s32 = torch.tensor(65536.0) / torch.tensor(8192.0)  # computed in float32 throughout
    assert check_longrope_attention_factor(torch.sqrt(1 + torch.log(s32)
                                                      / torch.log(torch.tensor(8192.0))))


@pytest.mark.parametrize(
    "answer, words",
    [
        (0.1 * math.log(S) + 1, "YaRN's factor"),
        (16 / 13, "a squared"),
        (math.sqrt(1 + math.log(S) / math.log(N)), "original length"),
        (math.sqrt(1 + math.log(N) / math.log(L)), "the ratio s"),
        (S, "the stretch s itself"),
        (1.0, "at every length"),
        (1.05, "sqrt(1 + ln s / ln L)"),
    ],
)
def test_longrope_names_each_mistake(answer, words):
    for form, value in _forms(answer).items():
        _fails_with(check_longrope_attention_factor(value), words)


@pytest.mark.parametrize("rounded, words", [(1.11, "give more digits"),
                                            (round(RIGHT_A, 2), "give more digits"),
                                            (1.1093, "is rounded off"), (1.1098, "is rounded")])
def test_longrope_rounded_right_answer_is_told_it_is_rounded(rounded, words):
    for form, value in _forms(rounded).items():
        _fails_with(check_longrope_attention_factor(value), words)


@pytest.mark.parametrize("digits", [4, 5, 6])
def test_longrope_four_or_more_significant_digits_pass(digits):
    for form, value in _forms(float(f"{RIGHT_A:.{digits}g}")).items():
        assert check_longrope_attention_factor(value), form


def test_longrope_half_precision_is_told_why():
    feedback = check_longrope_attention_factor(torch.tensor(RIGHT_A, dtype=torch.bfloat16))
    _fails_with(feedback, "bfloat16")


@pytest.mark.parametrize("junk", JUNK + [np.array([1.1, 1.2])])
def test_longrope_refuses_junk_with_a_message(junk):
    feedback = check_longrope_attention_factor(junk)
    assert isinstance(feedback, Feedback) and not feedback and feedback.message


# ---- ch11-mla-cache ---------------------------------------------------------------------

HEADS, LATENT, ROPE, NOPE, VALUE = 32, 256, 64, 64, 128
RIGHT_PAIR = (LATENT + ROPE, HEADS * (NOPE + ROPE + VALUE))


def test_mla_truth_is_mistral4_config():
    from transformers import Mistral4Config

    c = Mistral4Config()
    assert (c.num_attention_heads, c.kv_lora_rank, c.qk_rope_head_dim, c.qk_nope_head_dim,
            c.v_head_dim) == (HEADS, LATENT, ROPE, NOPE, VALUE)
    assert RIGHT_PAIR == (320, 8192)


def test_mla_accepts_the_right_answer_in_every_form():
    for form, answer in _forms(RIGHT_PAIR).items():
        feedback = check_mla_cache_entries(answer)
        assert feedback, f"{form}: {feedback.message}"
    assert check_mla_cache_entries(list(RIGHT_PAIR))
    assert check_mla_cache_entries((np.int64(320), torch.tensor(8192)))


@pytest.mark.parametrize(
    "answer, words",
    [
        ((RIGHT_PAIR[1], RIGHT_PAIR[0]), "swapped"),
        ((576, 40960), "DeepSeek-V3"),
        ((LATENT, RIGHT_PAIR[1]), "rotated key"),
        ((LATENT + HEADS * ROPE, RIGHT_PAIR[1]), "shared by all heads"),
        ((HEADS * LATENT + ROPE, RIGHT_PAIR[1]), "one vector per token"),
        ((300, RIGHT_PAIR[1]), "one latent"),
        ((RIGHT_PAIR[0], HEADS * (NOPE + ROPE)), "value too"),
        ((RIGHT_PAIR[0], HEADS * (NOPE + VALUE)), "both parts"),
        ((RIGHT_PAIR[0], 1000), "v_head_dim"),
        ((320.5, 8192), "whole numbers"),
    ],
)
def test_mla_names_each_mistake(answer, words):
    for form, value in _forms(answer).items():
        _fails_with(check_mla_cache_entries(value), words)


@pytest.mark.parametrize("junk", JUNK + [(1, 2, 3), np.ones((2, 2)), ("a", "b"),
                                         (None, 8192), (320, float("nan"))])
def test_mla_refuses_junk_with_a_message(junk):
    feedback = check_mla_cache_entries(junk)
    assert isinstance(feedback, Feedback) and not feedback and feedback.message
