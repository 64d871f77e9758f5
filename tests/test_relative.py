"""Tests of companion.relative (T5 buckets and bias)."""

import math

import pytest
import torch

from companion.attention import MultiHeadSelfAttention
from companion.relative import T5RelativeBias, t5_bucket


def reference_bucket(relative, bidirectional=True, num_buckets=32, max_distance=128):
    """One offset at a time, following the description in Raffel et al. 2020."""
    back = -relative  # how far back the key is
    first = 0
    per_direction = num_buckets
    if bidirectional:
        per_direction = num_buckets // 2
        if back < 0:
            first = per_direction
        back = abs(back)
    else:
        back = max(back, 0)
    exact = per_direction // 2
    if back < exact:
        return first + back
    spread = math.log(back / exact) / math.log(max_distance / exact) * (per_direction - exact)
    return first + min(exact + int(spread), per_direction - 1)


@pytest.mark.parametrize("bidirectional, num_buckets, max_distance", [(True, 32, 128), (False, 32, 128), (True, 8, 20), (False, 6, 50)])
def test_matches_reference_on_every_offset(bidirectional, num_buckets, max_distance):
    offsets = torch.arange(-3 * max_distance, 3 * max_distance + 1)
    got = t5_bucket(offsets, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    want = [reference_bucket(int(r), bidirectional, num_buckets, max_distance) for r in offsets]
    assert got.tolist() == want


def test_bucket_boundaries_at_and_around_each_edge():
    """T5 defaults: 16 buckets per direction, 8 exact; bucket b >= 8 starts at 8 * 16 ** ((b - 8) / 8)."""
    starts = {b: math.ceil(8 * 16 ** ((b - 8) / 8)) for b in range(8, 16)}
    for b, start in starts.items():
        back = torch.tensor([-(start - 1), -start, -(start + 1)])
        got = t5_bucket(back).tolist()
        assert got[1] == b and got[0] == (b - 1 if b > 8 else 7), (b, start, got)
        assert got[2] in (b, b + 1)
    assert t5_bucket(torch.tensor([-127, -128, -129, -10_000])).tolist() == [15, 15, 15, 15]
    assert t5_bucket(torch.tensor([0, 1, 7, 8])).tolist() == [0, 17, 23, 24]


@pytest.mark.parametrize("bidirectional", [True, False])
def test_buckets_are_monotone_in_distance_per_direction(bidirectional):
    back = t5_bucket(-torch.arange(0, 500), bidirectional=bidirectional)
    assert (back[1:] >= back[:-1]).all()
    if bidirectional:
        ahead = t5_bucket(torch.arange(1, 500))
        assert (ahead[1:] >= ahead[:-1]).all() and ahead.min() >= 16


def test_shape_and_dtype_are_kept():
    rel = torch.arange(12, dtype=torch.int32).view(3, 4) - 6
    out = t5_bucket(rel)
    assert out.shape == (3, 4) and out.dtype == torch.int64


def test_bias_module_picks_one_learned_scalar_per_head_and_bucket():
    torch.manual_seed(0)
    module = T5RelativeBias(3, num_buckets=8, max_distance=20)
    bias = module(5, 5)
    assert bias.shape == (3, 5, 5)
    rel = torch.arange(5)[None, :] - torch.arange(5)[:, None]
    buckets = t5_bucket(rel, num_buckets=8, max_distance=20)
    for h in range(3):
        torch.testing.assert_close(bias[h], module.bias.weight[buckets, h])
    # Same offset, same bias: a Toeplitz matrix per head.
    torch.testing.assert_close(bias[:, 1:, 1:], bias[:, :-1, :-1])


def test_plugs_into_attention_and_trains():
    torch.manual_seed(0)
    bias = T5RelativeBias(2, bidirectional=False)
    attn = MultiHeadSelfAttention(8, 2, score_bias=bias)
    attn(torch.randn(2, 6, 8), causal=True).sum().backward()
    assert bias.bias.weight.grad is not None and bias.bias.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: t5_bucket(torch.tensor([0.5, 1.0])), TypeError, "integer offsets"),
        (lambda: t5_bucket([1, 2]), TypeError, "integer torch.Tensor"),
        (lambda: t5_bucket(torch.tensor([1]), num_buckets=31), ValueError, "must be even when bidirectional"),
        (lambda: t5_bucket(torch.tensor([1]), num_buckets=0), ValueError, "num_buckets must be a positive"),
        (lambda: t5_bucket(torch.tensor([1]), num_buckets=2), ValueError, "at least 4"),
        (lambda: t5_bucket(torch.tensor([1]), max_distance=8), ValueError, "max_distance=8 must exceed"),
        (lambda: t5_bucket(torch.tensor([1]), bidirectional=1), TypeError, "bidirectional must be True or False"),
        (lambda: T5RelativeBias(0), ValueError, "num_heads"),
        (lambda: T5RelativeBias(2)(0, 3), ValueError, "q_len must be a positive"),
    ],
)
def test_bad_arguments(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_shaw_clipped_positions():
    from companion.relative import clipped_relative_positions

    idx = clipped_relative_positions(5, max_distance=2)
    want = [[min(max(j - i, -2), 2) + 2 for j in range(5)] for i in range(5)]
    assert idx.tolist() == want
    assert clipped_relative_positions(2, 4, max_distance=1).tolist() == [[0, 0, 1, 2], [0, 0, 0, 1]]
    with pytest.raises(ValueError, match="max_distance must be a positive"):
        clipped_relative_positions(3, max_distance=0)
    with pytest.raises(ValueError, match="k_len=2 must be at least q_len=3"):
        clipped_relative_positions(3, 2, max_distance=1)
