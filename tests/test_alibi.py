"""Tests of companion.alibi."""

import pytest
import torch

from companion.alibi import ALiBi, alibi_bias, alibi_key_bias, alibi_slopes
from companion.attention import MultiHeadSelfAttention, scaled_dot_product_attention


def closed_form_slopes(n):
    """2^(-8j/p) for the largest power of two p <= n, then 2^(-8(2j-1)/(2p)) for the rest."""
    p = 1
    while 2 * p <= n:
        p *= 2
    first = [2.0 ** (-8.0 * j / p) for j in range(1, p + 1)]
    rest = [2.0 ** (-8.0 * (2 * j - 1) / (2 * p)) for j in range(1, n - p + 1)]
    return first + rest


@pytest.mark.parametrize("n", range(1, 65))
def test_slopes_for_1_to_64_heads(n):
    slopes = alibi_slopes(n)
    assert slopes.dtype.name == "float64" and slopes.shape == (n,)
    torch.testing.assert_close(torch.from_numpy(slopes), torch.tensor(closed_form_slopes(n), dtype=torch.float64))


def test_eight_heads_run_from_one_half_to_one_256th():
    torch.testing.assert_close(torch.from_numpy(alibi_slopes(8)), 2.0 ** -torch.arange(1, 9, dtype=torch.float64))


def test_bias_is_minus_slope_times_distance():
    bias = alibi_bias(2, 4)
    m = alibi_slopes(2)
    for h in range(2):
        for i in range(4):
            for j in range(4):
                assert bias[h, i, j] == pytest.approx(-m[h] * (i - j))
    sym = alibi_bias(2, 4, causal=False)
    assert sym[1, 0, 3] == pytest.approx(-m[1] * 3) and sym[1, 3, 0] == pytest.approx(-m[1] * 3)


def test_more_keys_than_queries_aligns_the_last_query_with_the_last_key():
    bias = alibi_bias(1, 2, 5)
    torch.testing.assert_close(bias[0, -1], -alibi_slopes(1)[0] * torch.tensor([4.0, 3, 2, 1, 0], dtype=torch.float64))


def test_rows_differ_by_a_constant_shift():
    bias = alibi_bias(4, 6)
    m = torch.from_numpy(alibi_slopes(4))
    for i in range(5):
        torch.testing.assert_close(bias[:, i + 1] - bias[:, i], -m[:, None].expand(4, 6))


def test_key_only_shortcut_gives_the_same_softmax_under_a_causal_mask_only():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, 7, 8, generator=g, dtype=torch.float64) for _ in range(3))
    full, w_full = scaled_dot_product_attention(q, k, v, bias=alibi_bias(4, 7), causal=True)
    short, w_short = scaled_dot_product_attention(q, k, v, bias=alibi_key_bias(4, 7), causal=True)
    torch.testing.assert_close(w_short, w_full)
    torch.testing.assert_close(short, full)
    _, w_sym = scaled_dot_product_attention(q, k, v, bias=alibi_bias(4, 7, causal=False))
    _, w_key = scaled_dot_product_attention(q, k, v, bias=alibi_key_bias(4, 7))
    assert (w_sym - w_key).abs().max() > 0.1


def test_plugs_into_attention():
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(16, 4, score_bias=ALiBi(4))
    out = attn(torch.randn(2, 9, 16), causal=True)
    assert out.shape == (2, 9, 16)
    assert attn.last_weights[0, 0, 0, 1:].abs().max() == 0  # causal


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: alibi_slopes(0), ValueError, "num_heads must be a positive"),
        (lambda: alibi_slopes(2.0), TypeError, "num_heads must be an integer"),
        (lambda: alibi_bias(4, 0), ValueError, "q_len must be a positive"),
        (lambda: alibi_bias(4, 5, 3), ValueError, "k_len=3 must be at least q_len=5"),
        (lambda: alibi_bias(4, 5, causal="yes"), TypeError, "causal must be True or False"),
        (lambda: alibi_key_bias(4, -1), ValueError, "k_len must be a positive"),
        (lambda: ALiBi(0), ValueError, "num_heads"),
    ],
)
def test_bad_arguments(call, error, words):
    with pytest.raises(error, match=words):
        call()


@pytest.mark.parametrize("n", range(1, 65))
def test_slopes_are_distinct_in_range_and_sorted_only_for_powers_of_two(n):
    slopes = alibi_slopes(n)
    assert len(set(slopes.tolist())) == n
    assert slopes.min() == pytest.approx(2.0**-8, rel=1e-12) and slopes.max() < 1
    is_power = n & (n - 1) == 0
    assert bool((slopes[1:] < slopes[:-1]).all()) == (is_power or n == 1)
