"""Tests of companion.rope against complex multiplication and the papers' formulas."""

import math

import numpy as np
import pytest
import torch

from companion.attention import MultiHeadSelfAttention
from companion.rope import (
    RotaryEmbedding,
    apply_rope,
    layout_permutation,
    rope_frequencies,
    yarn_attention_scale,
)


def reference_rope(x, positions, base=10000.0):
    """Interleaved RoPE as complex multiplication: z_i * exp(1j * m * theta_i)."""
    x = x.detach().double().numpy()
    d = x.shape[-1]
    theta = np.array([base ** (-2 * i / d) for i in range(d // 2)])
    z = x[..., 0::2] + 1j * x[..., 1::2]
    z = z * np.exp(1j * np.asarray(positions, dtype=np.float64)[:, None] * theta)
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = z.real, z.imag
    return torch.from_numpy(out)


@pytest.fixture
def x():
    return torch.randn(2, 3, 7, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))


def test_matches_complex_multiplication(x):
    torch.testing.assert_close(apply_rope(x), reference_rope(x, range(7)), rtol=0, atol=1e-12)
    pos = torch.tensor([5, 0, 9, 3, 3, 100, 2])
    torch.testing.assert_close(apply_rope(x, pos), reference_rope(x, pos.tolist()), rtol=0, atol=1e-12)


def test_position_zero_is_the_identity_and_norms_are_kept(x):
    torch.testing.assert_close(apply_rope(x, torch.zeros(7, dtype=torch.long)), x)
    out = apply_rope(x)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))
    pairs = lambda t: t.view(*t.shape[:-1], 4, 2).norm(dim=-1)  # noqa: E731
    torch.testing.assert_close(pairs(out), pairs(x))


@pytest.mark.parametrize("layout", ["interleaved", "halves"])
def test_score_depends_only_on_the_offset(layout):
    g = torch.Generator().manual_seed(1)
    q, k = torch.randn(16, dtype=torch.float64, generator=g), torch.randn(16, dtype=torch.float64, generator=g)

    def score(m, n):
        qm = apply_rope(q[None], torch.tensor([m]), layout=layout)[0]
        kn = apply_rope(k[None], torch.tensor([n]), layout=layout)[0]
        return float(qm @ kn)

    for offset in (-7, 0, 3, 50):
        scores = [score(m, m + offset) for m in (0, 1, 10, 1000, 12345)]
        np.testing.assert_allclose(scores, scores[0], rtol=0, atol=1e-9)
    assert abs(score(0, 3) - score(0, 4)) > 1e-3


def test_layouts_are_the_same_rotation_after_a_permutation(x):
    perm = torch.from_numpy(layout_permutation(8))
    torch.testing.assert_close(apply_rope(x[..., perm], layout="halves"), apply_rope(x, layout="interleaved")[..., perm])
    # Running interleaved weights with the halves layout is a different rotation.
    assert (apply_rope(x, layout="halves") - apply_rope(x)).abs().max() > 0.1


def test_dtype_is_kept_and_angles_are_exact_far_out():
    x = torch.randn(1, 4, 8, generator=torch.Generator().manual_seed(2))
    pos = torch.tensor([0, 1, 100_000, 1_000_000])
    out = apply_rope(x, pos)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), reference_rope(x, pos.tolist()), rtol=0, atol=1e-5)


def test_frequency_scalings():
    d, s = 64, 4.0
    theta = rope_frequencies(d)
    np.testing.assert_allclose(theta, [10000 ** (-2 * i / d) for i in range(32)], rtol=1e-12)
    np.testing.assert_allclose(rope_frequencies(d, scaling={"type": "linear", "factor": s}), theta / s, rtol=1e-12)
    ntk = rope_frequencies(d, scaling={"type": "ntk", "factor": s})
    np.testing.assert_allclose(ntk, [(10000 * s ** (d / (d - 2))) ** (-2 * i / d) for i in range(32)], rtol=1e-12)
    assert ntk[0] == pytest.approx(theta[0]) and ntk[-1] == pytest.approx(theta[-1] / s)


def test_yarn_rotations_ramp_is_the_papers_equation():
    d, s, L = 128, 8.0, 4096
    theta = rope_frequencies(d)
    yarn = rope_frequencies(d, scaling={"type": "yarn", "factor": s, "original_max_len": L, "ramp": "rotations"})
    rotations = L * theta / (2 * math.pi)
    for i in range(d // 2):
        if rotations[i] > 32:
            assert yarn[i] == pytest.approx(theta[i], rel=1e-12)
        elif rotations[i] < 1:
            assert yarn[i] == pytest.approx(theta[i] / s, rel=1e-12)
        else:
            gamma = (rotations[i] - 1) / 31
            assert yarn[i] == pytest.approx((1 - gamma) * theta[i] / s + gamma * theta[i], rel=1e-12)
    assert (rotations > 32).any() and (rotations < 1).any() and ((rotations > 1) & (rotations < 32)).any()
    custom = rope_frequencies(
        d, scaling={"type": "yarn", "factor": s, "original_max_len": L, "beta_fast": 8, "beta_slow": 2, "ramp": "rotations"}
    )
    assert not np.allclose(custom, yarn)


def yarn_index_reference(d, s, L, *, base=10000.0, beta_fast=32.0, beta_slow=1.0, truncate=True):
    """The released YaRN code's ramp over the pair index, one pair at a time."""
    def pair(r):
        return d * math.log(L / (r * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair(beta_fast), pair(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    out = []
    for i in range(d // 2):
        theta = base ** (-2 * i / d)
        interpolate = min(max((i - low) / (high - low), 0.0), 1.0)
        out.append(interpolate * theta / s + (1 - interpolate) * theta)
    return np.array(out)


@pytest.mark.parametrize("d, s, L, extra", [
    (128, 4.0, 2048, {}), (128, 8.0, 4096, {}), (16, 4.0, 32, {}), (64, 16.0, 8192, {"truncate": False}),
    (128, 8.0, 4096, {"beta_fast": 16.0, "beta_slow": 2.0}), (64, 2.0, 4, {}),
])
def test_yarn_index_ramp_is_the_released_code(d, s, L, extra):
    scaling = {"type": "yarn", "factor": s, "original_max_len": L, **extra}
    np.testing.assert_allclose(rope_frequencies(d, scaling=scaling), yarn_index_reference(d, s, L, **extra), rtol=1e-12)
    assert rope_frequencies(d, scaling=scaling)[0] == pytest.approx(1.0) or L < 2 * math.pi * 32


def test_the_two_yarn_ramps_differ_on_the_ramp_only():
    d, L = 128, 2048
    index = rope_frequencies(d, scaling={"type": "yarn", "factor": 4.0, "original_max_len": L})
    rotations = rope_frequencies(d, scaling={"type": "yarn", "factor": 4.0, "original_max_len": L, "ramp": "rotations"})
    turns = L * rope_frequencies(d) / (2 * math.pi)
    outside = (turns > 32) | (turns < 1)
    np.testing.assert_allclose(index[outside], rotations[outside], rtol=1e-12)
    assert np.abs(index / rotations - 1).max() > 0.5


def test_llama3_ramp_over_turns():
    d, s, L, a, b, base = 128, 8.0, 8192, 1.0, 4.0, 500000.0
    got = rope_frequencies(d, base=base, scaling={"type": "llama3", "factor": s, "original_max_len": L,
                                                  "low_freq_factor": a, "high_freq_factor": b})
    kept = interpolated = ramped = 0
    for i in range(d // 2):
        theta = base ** (-2 * i / d)
        wavelength = 2 * math.pi / theta
        if wavelength < L / b:
            expected, kept = theta, kept + 1
        elif wavelength > L / a:
            expected, interpolated = theta / s, interpolated + 1
        else:
            smooth = (L / wavelength - a) / (b - a)
            expected, ramped = (1 - smooth) * theta / s + smooth * theta, ramped + 1
        assert got[i] == pytest.approx(expected, rel=1e-12)
    assert kept and interpolated and ramped
    defaults = rope_frequencies(d, base=base, scaling={"type": "llama3", "factor": s, "original_max_len": L})
    np.testing.assert_array_equal(defaults, got)


def test_dynamic_ntk_grows_with_the_sequence():
    d, s, L = 32, 4.0, 64
    theta = rope_frequencies(d)
    for n, effective in ((10, 1.0), (64, 1.0), (128, 5.0), (256, 13.0)):
        got = rope_frequencies(d, scaling={"type": "dynamic", "factor": s, "original_max_len": L, "seq_len": n})
        expected = [(10000.0 * effective ** (d / (d - 2))) ** (-2 * i / d) for i in range(d // 2)]
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert np.array_equal(rope_frequencies(d, scaling={"type": "dynamic", "factor": s, "original_max_len": L,
                                                       "seq_len": L}), theta)


def test_yarn_attention_scale():
    assert yarn_attention_scale(1.0) == 1.0
    assert yarn_attention_scale(0.5) == 1.0
    assert yarn_attention_scale(16.0) == pytest.approx(0.1 * math.log(16) + 1)


def test_rotary_module_matches_the_function_and_grows_its_cache():
    rope = RotaryEmbedding(8, max_len=4)
    assert rope.cached_len == 4
    q = torch.randn(2, 3, 6, 8, generator=torch.Generator().manual_seed(3))
    k = torch.randn(2, 3, 6, 8, generator=torch.Generator().manual_seed(4))
    rq, rk = rope(q, k)
    assert rope.cached_len == 8  # grew: at least doubled
    torch.testing.assert_close(rq, apply_rope(q))
    torch.testing.assert_close(rk, apply_rope(k))
    far = torch.tensor([0, 1, 2, 3, 4, 1000])
    rq, _ = rope(q, k, far)
    assert rope.cached_len == 1001
    torch.testing.assert_close(rq, apply_rope(q, far))
    assert "cos" not in rope.state_dict()


def test_rotary_module_plugs_into_attention_and_is_relative():
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(16, 2, qk_transform=RotaryEmbedding(8)).double()
    const = torch.randn(1, 1, 16, dtype=torch.float64).expand(1, 5, 16)
    attn(const)
    # log w[i, j] - log w[i, i] = score(j - i) - score(0): the same for every i when the
    # tokens are equal, because the score depends on the offset only.
    logw = attn.last_weights.log()
    relative = logw - logw.diagonal(dim1=-2, dim2=-1)[..., :, None]
    torch.testing.assert_close(relative[..., 1:, 1:], relative[..., :-1, :-1])
    assert relative[..., 0, 1:].abs().max() > 1e-3  # and it does depend on the offset


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: apply_rope(torch.zeros(2, 5, 7)), ValueError, "last dimension of x must be even"),
        (lambda: apply_rope(torch.zeros(5, 8), torch.arange(4)), ValueError, r"positions must have shape \(seq,\) = \(5,\)"),
        (lambda: apply_rope(torch.zeros(5, 8), torch.arange(5.0)), TypeError, "positions must be integers"),
        (lambda: apply_rope(torch.zeros(5, 8), [0, 1, 2, 3, 4]), TypeError, "positions must be an integer torch.Tensor"),
        (lambda: apply_rope(torch.zeros(5, 8), layout="neox"), ValueError, "layout must be one of"),
        (lambda: apply_rope(torch.zeros(5, 8, dtype=torch.long)), TypeError, "floating-point"),
        (lambda: apply_rope(torch.zeros(8)), ValueError, r"shape \(\.\.\., seq, dim\)"),
        (lambda: rope_frequencies(8, scaling={"type": "longrope", "factor": 2.0}), ValueError, "scaling\\['type'\\] must be one of"),
        (lambda: rope_frequencies(8, scaling={"type": "dynamic", "factor": 2.0, "original_max_len": 4}), ValueError, "seq_len"),
        (lambda: rope_frequencies(8, scaling={"type": "llama3", "factor": 2.0}), ValueError, "original_max_len"),
        (lambda: rope_frequencies(8, scaling={"type": "llama3", "factor": 2.0, "original_max_len": 8, "low_freq_factor": 4}), ValueError, "low_freq_factor < high_freq_factor"),
        (lambda: rope_frequencies(8, scaling={"type": "yarn", "factor": 2.0, "original_max_len": 8, "ramp": "pairs"}), ValueError, "ramp"),
        (lambda: rope_frequencies(8, scaling={"type": "yarn", "factor": 2.0, "original_max_len": 8, "truncate": 1}), TypeError, "truncate"),
        (lambda: rope_frequencies(8, scaling={"type": "yarn", "factor": 2.0, "original_max_len": 8, "ramp": "rotations", "truncate": False}), ValueError, "ramp='index' only"),
        (lambda: RotaryEmbedding(8)(torch.zeros(1, 4, 8), torch.zeros(1, 3, 8), q_positions=torch.arange(4)), ValueError, "both q_positions and k_positions"),
        (lambda: RotaryEmbedding(8)(torch.zeros(1, 4, 8), torch.zeros(1, 4, 8), torch.arange(4), q_positions=torch.arange(4), k_positions=torch.arange(4)), ValueError, "not both"),
        (lambda: RotaryEmbedding(8)(torch.zeros(1, 4, 8), torch.zeros(1, 3, 8), q_positions=torch.arange(4), k_positions=torch.arange(4)), ValueError, r"k_positions must have shape \(seq,\) = \(3,\) to match k"),
        (lambda: RotaryEmbedding(8)(torch.zeros(1, 4, 8), torch.zeros(1, 3, 8), q_positions=torch.arange(4.0), k_positions=torch.arange(3)), TypeError, "q_positions must be integers"),
        (lambda: RotaryEmbedding(8).rotate(torch.zeros(1, 2, 8), torch.tensor([-1, 0])), ValueError, "non-negative"),
        (lambda: rope_frequencies(8, scaling={"type": "linear"}), ValueError, "needs a 'factor'"),
        (lambda: rope_frequencies(8, scaling={"type": "linear", "factor": 0.5}), ValueError, "at least 1"),
        (lambda: rope_frequencies(8, scaling={"type": "yarn", "factor": 2.0}), ValueError, "original_max_len"),
        (lambda: rope_frequencies(8, scaling={"type": "linear", "factor": 2.0, "original_max_len": 4}), ValueError, "unknown scaling keys"),
        (lambda: rope_frequencies(8, scaling="linear"), TypeError, "scaling must be None or a dict"),
        (lambda: rope_frequencies(9), ValueError, "dim must be even"),
        (lambda: RotaryEmbedding(8)(torch.zeros(1, 4, 8), torch.zeros(1, 3, 8)), ValueError, "same length.*q_positions"),
        (lambda: RotaryEmbedding(8)(torch.zeros(1, 4, 6), torch.zeros(1, 4, 6)), ValueError, "dim=8"),
        (lambda: RotaryEmbedding(8)(torch.zeros(1, 2, 8), torch.zeros(1, 2, 8), torch.tensor([-1, 0])), ValueError, "non-negative"),
        (lambda: yarn_attention_scale(0.0), ValueError, "factor must be positive"),
    ],
)
def test_bad_arguments(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_long_term_decay_bound_matches_a_loop():
    from companion.rope import long_term_decay_bound

    d = 16
    theta = [10000 ** (-2 * i / d) for i in range(d // 2)]
    for offset in (0, 1, 7.5, 100, -30):
        partial, total = 0j, 0.0
        for t in theta:
            partial += complex(math.cos(offset * t), math.sin(offset * t))
            total += abs(partial)
        assert long_term_decay_bound(np.array(offset), d) == pytest.approx(total / (d // 2), rel=1e-12)
    assert long_term_decay_bound(np.zeros(3), d).tolist() == pytest.approx([4.5] * 3)
    with pytest.raises(TypeError, match="real numbers"):
        long_term_decay_bound(np.array(["a"]), d)


def test_rotary_attention_scale_multiplies_logits_by_its_square():
    g = torch.Generator().manual_seed(5)
    q, k = torch.randn(1, 1, 6, 8, generator=g), torch.randn(1, 1, 6, 8, generator=g)
    plain_q, plain_k = RotaryEmbedding(8)(q, k)
    scaled_q, scaled_k = RotaryEmbedding(8, attention_scale=1.5)(q, k)
    torch.testing.assert_close(scaled_q @ scaled_k.transpose(-2, -1), 2.25 * (plain_q @ plain_k.transpose(-2, -1)))
    with pytest.raises(ValueError, match="attention_scale must be positive"):
        RotaryEmbedding(8, attention_scale=0.0)


def test_separate_query_and_key_positions_match_the_full_sequence():
    """Keys rotated once (and cached), queries rotated later at their own positions:
    the scores equal those of rotating the whole sequence at once."""
    g = torch.Generator().manual_seed(6)
    for layout in ("interleaved", "halves"):
        rope = RotaryEmbedding(8, layout=layout, max_len=4)
        q, k = torch.randn(2, 3, 10, 8, generator=g), torch.randn(2, 3, 10, 8, generator=g)
        full_q, full_k = rope(q, k)
        full = full_q @ full_k.transpose(-2, -1)  # (b, h, 10, 10)
        cached_keys = torch.cat([rope.rotate(k[..., :7, :], torch.arange(7)), rope.rotate(k[..., 7:, :], torch.arange(7, 10))], dim=-2)
        torch.testing.assert_close(cached_keys, full_k, rtol=0, atol=0)
        for start in (7, 9):  # queries 7..9 with all 10 keys, then the last query alone
            new_q, keys = rope(q[..., start:, :], k, q_positions=torch.arange(start, 10), k_positions=torch.arange(10))
            torch.testing.assert_close(keys, full_k, rtol=0, atol=0)
            torch.testing.assert_close(new_q @ keys.transpose(-2, -1), full[..., start:, :], rtol=1e-6, atol=1e-6)
        # Queries rotated from 0 instead of their true positions give other scores.
        wrong_q, _ = rope(q[..., 7:, :], k, q_positions=torch.arange(3), k_positions=torch.arange(10))
        assert (wrong_q @ full_k.transpose(-2, -1) - full[..., 7:, :]).abs().max() > 1e-2


def test_rotate_grows_the_cache_and_matches_apply_rope():
    rope = RotaryEmbedding(8, max_len=4, layout="halves")
    x = torch.randn(3, 5, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    pos = torch.tensor([0, 3, 9, 2, 40])
    torch.testing.assert_close(rope.rotate(x, pos), apply_rope(x, pos, layout="halves"), rtol=0, atol=1e-12)
    assert rope.cached_len == 41
    torch.testing.assert_close(rope.rotate(x), apply_rope(x, layout="halves"), rtol=0, atol=1e-12)


def test_tables_stay_exact_after_a_cast_to_bfloat16():
    rope = RotaryEmbedding(64, max_len=4).to(torch.bfloat16)
    x = torch.randn(1, 1, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    far = torch.tensor([2048])
    # The cache grows after the cast; it is rebuilt from float64 speeds, not the cast buffer.
    torch.testing.assert_close(rope.rotate(x, far), apply_rope(x, far), rtol=0, atol=1e-12)
