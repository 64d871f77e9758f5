"""Tests of companion.attention against a per-head loop reference."""

import math

import pytest
import torch

from companion.attention import KVCache, causal_mask, MultiHeadSelfAttention, scaled_dot_product_attention


def reference_attention(q, k, v, bias=None, causal=False):
    """One (batch, head, query) row at a time, softmax written out."""
    b, h, sq, d = q.shape
    sk = k.shape[2]
    out = torch.zeros(b, h, sq, v.shape[-1], dtype=q.dtype)
    for bi in range(b):
        for hi in range(h):
            for i in range(sq):
                scores = []
                for j in range(sk):
                    s = float(q[bi, hi, i] @ k[bi, hi, j]) / math.sqrt(d)
                    if bias is not None:
                        s += float(bias.expand(b, h, sq, sk)[bi, hi, i, j])
                    if causal and j > i + (sk - sq):
                        s = -math.inf
                    scores.append(s)
                top = max(scores)
                e = [math.exp(s - top) for s in scores]
                total = sum(e)
                for j in range(sk):
                    out[bi, hi, i] += e[j] / total * v[bi, hi, j]
    return out


@pytest.fixture
def qkv():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(2, 3, 5, 4, generator=g, dtype=torch.float64) for _ in range(3)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("with_bias", [False, True])
def test_matches_reference(qkv, causal, with_bias):
    q, k, v = qkv
    bias = torch.randn(3, 5, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) if with_bias else None
    out, weights = scaled_dot_product_attention(q, k, v, bias=bias, causal=causal)
    torch.testing.assert_close(out, reference_attention(q, k, v, bias, causal), rtol=0, atol=1e-12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5, dtype=torch.float64))


def test_causal_with_more_keys_than_queries_aligns_the_last_positions(qkv):
    q, k, v = qkv
    out, weights = scaled_dot_product_attention(q[:, :, 3:], k, v, causal=True)
    torch.testing.assert_close(out, reference_attention(q[:, :, 3:], k, v, causal=True), rtol=0, atol=1e-12)
    assert weights[0, 0, 0, 4] == 0 and weights[0, 0, 0, 3] > 0


def test_self_attention_is_permutation_equivariant():
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(16, 4).double()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    perm = torch.tensor([4, 0, 5, 2, 1, 3])
    out = attn(x)
    weights = attn.last_weights
    torch.testing.assert_close(attn(x[:, perm]), out[:, perm])
    # The weights are permuted along both axes, not left unchanged.
    torch.testing.assert_close(attn.last_weights, weights[:, :, perm][:, :, :, perm])
    assert not torch.allclose(attn.last_weights, weights)


def test_causal_mask_breaks_permutation_equivariance():
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(16, 4).double()
    x = torch.randn(1, 6, 16, dtype=torch.float64)
    perm = torch.tensor([5, 4, 3, 2, 1, 0])
    assert not torch.allclose(attn(x[:, perm], causal=True), attn(x, causal=True)[:, perm])


def test_hooks_are_called_with_the_right_shapes():
    seen = {}

    def bias(q_len, k_len):
        seen["bias"] = (q_len, k_len)
        return torch.zeros(2, q_len, k_len)

    def transform(q, k):
        seen["qk"] = (tuple(q.shape), tuple(k.shape))
        return q * 0, k  # zero queries: uniform attention

    attn = MultiHeadSelfAttention(8, 2, score_bias=bias, qk_transform=transform)
    attn(torch.randn(3, 5, 8))
    assert seen == {"bias": (5, 5), "qk": ((3, 2, 5, 4), (3, 2, 5, 4))}
    torch.testing.assert_close(attn.last_weights, torch.full((3, 2, 5, 5), 0.2))


class _LearnedBias(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.tensor(1.0))

    def forward(self, q_len, k_len):
        return self.scale * torch.ones(q_len, k_len)


def test_score_bias_module_is_registered_and_trained():
    bias = _LearnedBias()
    attn = MultiHeadSelfAttention(8, 2, score_bias=bias)
    assert any(p is bias.scale for p in attn.parameters())
    attn(torch.randn(1, 3, 8)).sum().backward()
    assert bias.scale.grad is not None


def test_bias_and_attn_bias_add_up():
    torch.manual_seed(0)
    b1 = torch.randn(2, 4, 4)
    b2 = torch.randn(4, 4)
    x = torch.randn(1, 4, 8)
    a = MultiHeadSelfAttention(8, 2, score_bias=lambda q, k: b1)
    plain = MultiHeadSelfAttention(8, 2)
    plain.load_state_dict(a.state_dict())
    torch.testing.assert_close(a(x, attn_bias=b2), plain(x, attn_bias=b1 + b2))


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda: MultiHeadSelfAttention(10, 4), ValueError, "num_heads=4 must divide dim=10"),
        (lambda: MultiHeadSelfAttention(0, 1), ValueError, "dim must be a positive"),
        (lambda: MultiHeadSelfAttention(8, 0), ValueError, "num_heads must be a positive"),
        (lambda: MultiHeadSelfAttention(8, 2, score_bias=3), TypeError, "score_bias must be callable"),
        (lambda: MultiHeadSelfAttention(8, 2, qk_transform="rope"), TypeError, "qk_transform must be callable"),
    ],
)
def test_bad_constructor_arguments(make, error, words):
    with pytest.raises(error, match=words):
        make()


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda a: a(torch.randn(4, 8)), ValueError, r"3 dimensions .*unsqueeze"),
        (lambda a: a(torch.randn(1, 4, 6)), ValueError, "6 features but the layer has dim=8"),
        (lambda a: a(torch.randn(1, 4, 8), attn_bias=torch.zeros(3, 3)), ValueError, r"bias must end in \(q, k\) = \(4, 4\)"),
        (lambda a: a(torch.randn(1, 4, 8), attn_bias=[[0.0]]), TypeError, "bias must be a torch.Tensor"),
    ],
)
def test_bad_forward_arguments(call, error, words):
    with pytest.raises(error, match=words):
        call(MultiHeadSelfAttention(8, 2))


def test_sdpa_shape_errors(qkv):
    q, k, v = qkv
    with pytest.raises(ValueError, match="same head_dim"):
        scaled_dot_product_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="same number of positions"):
        scaled_dot_product_attention(q, k, v[:, :, :4])
    with pytest.raises(ValueError, match="4 dimensions"):
        scaled_dot_product_attention(q[0], k, v)


def test_last_weights_are_detached_so_a_trained_layer_can_be_copied():
    import copy

    attn = MultiHeadSelfAttention(8, 2)
    attn(torch.randn(1, 3, 8)).sum().backward()
    assert not attn.last_weights.requires_grad
    copy.deepcopy(attn)


def test_aligned_positions_is_the_one_convention_for_masks_and_biases():
    from companion.alibi import alibi_bias
    from companion.attention import aligned_positions
    from companion.relative import clipped_relative_positions

    queries, keys = aligned_positions(2, 5)
    assert queries.tolist() == [3, 4] and keys.tolist() == [0, 1, 2, 3, 4]
    # The causal mask hides exactly the keys after each aligned query ...
    q = k = v = torch.zeros(1, 1, 5, 2)
    _, weights = scaled_dot_product_attention(q[:, :, 3:], k, v, causal=True)
    assert (weights[0, 0] > 0).tolist() == [[True] * 4 + [False], [True] * 5]
    # ... and the relative schemes measure offsets from the same positions.
    assert clipped_relative_positions(2, 5, max_distance=10)[0].tolist() == [10 - 3, 10 - 2, 10 - 1, 10, 11]
    assert alibi_bias(1, 2, 5)[0, 0, 3].item() == 0.0
    with pytest.raises(ValueError, match="k_len=1 must be at least q_len=2"):
        aligned_positions(2, 1)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bias_shape", [None, (2, 5, 9), (2, 1, 9)])
def test_fused_path_equals_the_step_by_step_one(causal, bias_shape):
    torch.manual_seed(0)
    slow = MultiHeadSelfAttention(8, 2).double()
    fast = MultiHeadSelfAttention(8, 2, keep_weights=False).double()
    fast.load_state_dict(slow.state_dict())
    past, x = torch.randn(3, 4, 8, dtype=torch.float64), torch.randn(3, 5, 8, dtype=torch.float64)
    bias = None if bias_shape is None else torch.randn(bias_shape, dtype=torch.float64)
    outputs = []
    for layer in (slow, fast):
        cache = KVCache()
        layer(past, cache=cache, causal=causal)  # 4 keys already seen: 5 queries, 9 keys
        outputs.append(layer(x, cache=cache, causal=causal, attn_bias=bias))
    torch.testing.assert_close(outputs[1], outputs[0], rtol=0, atol=1e-12)
    assert fast.last_weights is None and slow.last_weights.shape == (3, 2, 5, 9)


def test_causal_mask_aligns_the_last_query_with_the_last_key():
    mask = causal_mask(2, 4)
    expected = torch.tensor([[0.0, 0.0, 0.0, float("-inf")], [0.0, 0.0, 0.0, 0.0]])
    torch.testing.assert_close(mask, expected)


def test_kv_cache_appends_and_refuses_another_batch():
    cache = KVCache()
    assert len(cache) == 0
    k, v = cache.append(torch.zeros(2, 3, 4, 5), torch.ones(2, 3, 4, 5))
    k, v = cache.append(torch.ones(2, 3, 1, 5), torch.ones(2, 3, 1, 5))
    assert len(cache) == 5 and k.shape == (2, 3, 5, 5) and k[:, :, -1].eq(1).all() and k[:, :, :4].eq(0).all()
    with pytest.raises(ValueError, match="use the same batch, or a new cache"):
        cache.append(torch.zeros(1, 3, 1, 5), torch.zeros(1, 3, 1, 5))
    with pytest.raises(TypeError, match="keep_weights must be True or False"):
        MultiHeadSelfAttention(8, 2, keep_weights=1)
