"""companion.sinks against gpt-oss's attention in transformers; StreamingLLM's rule."""

import types

import pytest
import torch
from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

from companion.sinks import sink_softmax, streaming_cache


@pytest.mark.parametrize(
    "heads, q, k, masked", [(2, 5, 5, True), (4, 3, 7, False), (1, 1, 9, True)]
)
def test_sink_softmax_matches_gpt_oss(heads, q, k, masked):
    g = torch.Generator().manual_seed(heads * 10 + k)
    query = torch.randn(2, heads, q, 8, generator=g, dtype=torch.float64)
    key = torch.randn(2, heads, k, 8, generator=g, dtype=torch.float64)
    value = torch.randn(2, heads, k, 8, generator=g, dtype=torch.float64)
    sinks = torch.randn(heads, generator=g, dtype=torch.float64) * 3
    mask = None
    if masked:
        mask = torch.zeros(1, 1, q, k, dtype=torch.float64)
        mask[..., : k - q] = 0
        mask = mask.masked_fill(torch.ones(q, k).triu(k - q + 1).bool(), float("-inf"))
    module = types.SimpleNamespace(sinks=sinks, num_key_value_groups=1, training=False)
    _, theirs = eager_attention_forward(
        module, query, key, value, mask, scaling=8**-0.5
    )
    scores = query @ key.transpose(-2, -1) * 8**-0.5 + (0 if mask is None else mask)
    ours = sink_softmax(scores, sinks)
    torch.testing.assert_close(ours, theirs, rtol=1e-12, atol=1e-12)
    assert (ours.sum(-1) < 1).all(), "the sink takes a share of every row"


def test_a_very_negative_sink_is_plain_softmax():
    scores = torch.randn(1, 2, 3, 4, dtype=torch.float64)
    plain = torch.softmax(scores, -1)
    torch.testing.assert_close(
        sink_softmax(scores, torch.full((2,), -1e4, dtype=torch.float64)), plain
    )


def test_streaming_cache_keeps_the_first_and_the_latest():
    tokens, positions = streaming_cache(100, sinks=4, window=8)
    assert tokens.tolist() == [0, 1, 2, 3, *range(92, 100)]
    assert positions.tolist() == list(range(12))
    tokens, positions = streaming_cache(10, sinks=4, window=8)
    assert tokens.tolist() == positions.tolist() == list(range(10))


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sink_softmax(torch.zeros(2, 3, 3), torch.zeros(2)), "dimensions"),
        (lambda: sink_softmax(torch.zeros(1, 2, 3, 3), torch.zeros(3)), "sink_logits"),
        (lambda: streaming_cache(10, sinks=-1, window=4), "sinks"),
        (lambda: streaming_cache(10, window=0), "window"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
