"""Tests of the chapter 17 checkers: right answers pass, typical mistakes get a hint, bad input never raises."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from companion.exercises import (
    Feedback, check_kv_cache_entries, check_position_parameters, check_scheme_for_requirement,
)

BAD = [None, "abc", 3.0, [1, 2, 3], {"a": 1}, np.zeros((3, 3)), object(), Ellipsis, (1,), ("a", "b", "c")]


def _rejected(feedback, hint=None):
    assert isinstance(feedback, Feedback) and not feedback
    if hint is not None:
        assert hint in feedback.message, feedback.message


# ---- ch17-position-params ----------------------------------------------------------------------

BERT_LARGE_TABLE = 512 * 1024  # written out: positions x width
T5_LARGE_BIASES = 2 * 32 * 16  # encoder and decoder tables, buckets x heads


def test_position_parameters_accept_the_pair_in_many_forms():
    for answer in ((BERT_LARGE_TABLE, T5_LARGE_BIASES), [524288, 1024], np.array([524288, 1024]),
                   (np.int64(524288), torch.tensor(1024)), (524288.0, 1024.0), np.array([524288, 1024], np.float32)):
        assert check_position_parameters(answer), answer


def test_position_parameters_match_the_transformers_models():
    from transformers import BertConfig, BertModel, T5Config, T5Model

    with torch.device("meta"):
        bert = BertModel(BertConfig(hidden_size=1024, num_hidden_layers=2, num_attention_heads=16,
                                    intermediate_size=4096))
        t5 = T5Model(T5Config(d_model=1024, d_ff=4096, num_heads=16, num_layers=2))
    table = sum(p.numel() for n, p in bert.named_parameters() if "position_embeddings" in n)
    biases = sum(p.numel() for n, p in t5.named_parameters() if "relative_attention_bias" in n)
    assert (table, biases) == (BERT_LARGE_TABLE, T5_LARGE_BIASES)
    assert check_position_parameters((table, biases))


@pytest.mark.parametrize(
    "answer, hint",
    [
        ((T5_LARGE_BIASES, BERT_LARGE_TABLE), "swapped"),
        ((512 * 768, T5_LARGE_BIASES), "BERT-base"),
        ((BERT_LARGE_TABLE + 2 * 1024, T5_LARGE_BIASES), "Token-type"),
        ((1000, T5_LARGE_BIASES), "one trained vector per position"),
        ((BERT_LARGE_TABLE, 32 * 16), "one bias table per stack"),
        ((BERT_LARGE_TABLE, 2 * 24 * 32 * 16), "shares it"),
        ((BERT_LARGE_TABLE, 24 * 32 * 16), "shares it"),
        ((BERT_LARGE_TABLE, 2 * 32 * 1024), "one scalar"),
        ((BERT_LARGE_TABLE, 7), "buckets, heads and tables"),
        ((BERT_LARGE_TABLE, 1024.5), "whole numbers"),
    ],
)
def test_position_parameters_reject_typical_mistakes(answer, hint):
    _rejected(check_position_parameters(answer), hint)


@pytest.mark.parametrize("answer", BAD + [(True, 1024), (BERT_LARGE_TABLE, float("nan"))])
def test_position_parameters_never_raise(answer):
    _rejected(check_position_parameters(answer))


# ---- ch17-kv-cache -----------------------------------------------------------------------------

ENTRIES = 2 * 32 * 8 * 128 * 4096  # keys and values, layers, key-value heads, head dim, tokens


def test_kv_cache_accepts_the_count_in_many_forms():
    for answer in (ENTRIES, np.int64(ENTRIES), torch.tensor(ENTRIES), float(ENTRIES), np.array([ENTRIES]),
                   np.float32(ENTRIES)):
        assert check_kv_cache_entries(answer), answer


@pytest.mark.parametrize(
    "answer, hint",
    [
        (2 * ENTRIES, "twice the count"),
        (4 * ENTRIES, "8 key-value heads"),
        (ENTRIES // 2, "keys and values"),
        (ENTRIES // 32, "one layer"),
        (ENTRIES // 4096, "per token"),
        (ENTRIES + 4096 * 4096, "Positions add nothing"),
        (12345, "Multiply"),
        (ENTRIES + 0.5, "whole number"),
    ],
)
def test_kv_cache_rejects_typical_mistakes(answer, hint):
    _rejected(check_kv_cache_entries(answer), hint)


@pytest.mark.parametrize("answer", BAD + [True, float("inf"), np.array([1, 2])])
def test_kv_cache_never_raises(answer):
    _rejected(check_kv_cache_entries(answer))


# ---- ch17-requirement --------------------------------------------------------------------------

def _share_by_hand(slope: float) -> float:
    """Geometric sums written out: keys at distance 6144..8191 over keys at 0..8191."""
    r = math.exp(-slope)
    return (r ** 6144 - r ** 8192) / (1 - r ** 8192)


SHARE = _share_by_hand(2.0 ** -8)


def test_requirement_accepts_alibi_with_its_share_in_many_forms():
    for answer in (("alibi", SHARE), ["ALiBi ", SHARE], ("alibi", np.float32(SHARE)),
                   ("alibi", torch.tensor(SHARE)), ("alibi", math.exp(-24.0))):
        assert check_scheme_for_requirement(answer), answer


def test_requirement_accepts_a_float32_softmax():
    distances = torch.arange(8191, -1, -1, dtype=torch.float32)
    share = (-distances / 256).softmax(0)[:2048].sum()
    assert share.dtype == torch.float32 and check_scheme_for_requirement(("alibi", share))


@pytest.mark.parametrize(
    "answer, hint",
    [
        (("t5", SHARE), "43.08"),
        (("rope", SHARE), "54.98"),
        (("sinusoidal", SHARE), "305.65"),
        (("nope", SHARE), "Choose one of"),
        ((3, SHARE), "as a string"),
        (("alibi", 0.25), "without any bias"),
        (("alibi", 1 - SHARE), "most recent 6144"),
        (("alibi", 0.0), "steepest head"),
        (("alibi", _share_by_hand(2.0 ** -7)), "slope 0.0078125"),
        (("alibi", 0.5), "Sum their softmax weights"),
        (("alibi", "big"), "a number"),
    ],
)
def test_requirement_rejects_typical_mistakes(answer, hint):
    _rejected(check_scheme_for_requirement(answer), hint)


@pytest.mark.parametrize("answer", BAD + [("alibi", float("nan")), ("alibi", None)])
def test_requirement_never_raises(answer):
    _rejected(check_scheme_for_requirement(answer))
