"""Tests of companion.sinusoidal against small references written as loops over the formula."""

import math

import numpy as np
import pytest
import torch

from companion.sinusoidal import (
    SinusoidalPositionalEncoding,
    interleaved_to_halves,
    inverse_frequencies,
    rotation_matrix,
    sinusoidal_table,
    tensor2tensor_frequencies,
    tensor2tensor_timing_signal,
    wavelengths,
)


def reference_table(n, d, base=10000.0):
    """The paper's formula, one entry at a time."""
    table = [[0.0] * d for _ in range(n)]
    for pos in range(n):
        for i in range(d // 2):
            angle = pos / base ** (2 * i / d)
            table[pos][2 * i] = math.sin(angle)
            table[pos][2 * i + 1] = math.cos(angle)
    return np.array(table)


def reference_rotation(k, d, base=10000.0):
    """R(k) built block by block with an explicit 2x2 matrix per frequency."""
    r = np.zeros((d, d))
    for i in range(d // 2):
        b = k / base ** (2 * i / d)
        r[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[math.cos(b), math.sin(b)], [-math.sin(b), math.cos(b)]]
    return r


@pytest.mark.parametrize("n, d, base", [(1, 2, 10000.0), (7, 8, 10000.0), (50, 64, 10000.0), (20, 16, 100.0)])
def test_table_matches_the_formula(n, d, base):
    np.testing.assert_allclose(sinusoidal_table(n, d, base=base), reference_table(n, d, base), rtol=0, atol=1e-12)


def test_table_is_float64_and_starts_at_position_zero():
    table = sinusoidal_table(3, 6)
    assert table.dtype == np.float64 and table.shape == (3, 6)
    np.testing.assert_array_equal(table[0], [0, 1, 0, 1, 0, 1])


def test_d8_worked_example_denominators_are_powers_of_ten():
    np.testing.assert_allclose(1 / inverse_frequencies(8), [1, 10, 100, 1000], rtol=1e-12)


def test_halves_layout_is_a_permutation_of_interleaved():
    d = 10
    perm = interleaved_to_halves(d)
    np.testing.assert_array_equal(perm, [0, 2, 4, 6, 8, 1, 3, 5, 7, 9])
    interleaved = sinusoidal_table(30, d)
    halves = sinusoidal_table(30, d, layout="halves")
    np.testing.assert_array_equal(halves, interleaved[:, perm])
    # The halves layout puts every sine before every cosine.
    w = inverse_frequencies(d)
    pos = np.arange(30)[:, None]
    np.testing.assert_allclose(halves, np.hstack([np.sin(pos * w), np.cos(pos * w)]), atol=1e-12)


def reference_t2t(n, channels, min_timescale=1.0, max_timescale=1.0e4):
    """A port of tensor2tensor's get_timing_signal_1d (layers/common_attention.py), line by
    line, with NumPy in place of TensorFlow (float64 throughout)."""
    position = np.arange(n, dtype=np.float64)
    num_timescales = channels // 2
    log_timescale_increment = (math.log(float(max_timescale) / float(min_timescale))
                               / max(float(num_timescales) - 1, 1))
    inv_timescales = min_timescale * np.exp(
        np.arange(num_timescales, dtype=np.float64) * -log_timescale_increment)
    scaled_time = position[:, None] * inv_timescales[None, :]
    signal = np.concatenate([np.sin(scaled_time), np.cos(scaled_time)], axis=1)
    return np.pad(signal, [[0, 0], [0, channels % 2]])


@pytest.mark.parametrize("n, channels", [(5, 2), (5, 3), (5, 4), (40, 16), (30, 7), (12, 64)])
def test_tensor2tensor_signal_matches_its_code(n, channels):
    np.testing.assert_allclose(tensor2tensor_timing_signal(n, channels), reference_t2t(n, channels),
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("low, high", [(2.0, 500.0), (0.5, 1.0e4), (1.0, 100.0)])
def test_tensor2tensor_signal_with_other_timescales(low, high):
    np.testing.assert_allclose(tensor2tensor_timing_signal(20, 10, min_timescale=low, max_timescale=high),
                               reference_t2t(20, 10, low, high), rtol=0, atol=1e-12)


def test_tensor2tensor_multiplies_by_min_timescale_as_its_code_does():
    # d = 10, min_timescale 2: the code's pair 0 turns at 2 rad/position (a recipe of
    # "timescales from 2 to 500" would give 1/2), and its last pair at 2 * 2 / 500.
    w = tensor2tensor_frequencies(10, min_timescale=2.0, max_timescale=500.0)
    np.testing.assert_allclose(w[[0, -1]], [2.0, 2.0 * 2.0 / 500.0], rtol=1e-12)


def test_tensor2tensor_reaches_the_max_timescale_the_paper_stops_short():
    d = 512
    np.testing.assert_allclose(2 * math.pi / tensor2tensor_frequencies(d)[-1], 2 * math.pi * 10000, rtol=1e-12)
    assert wavelengths(d)[-1] < 2 * math.pi * 10000 * (1 - 1e-3)
    # Not a permutation of the paper's table: the sorted rows differ.
    paper = np.sort(sinusoidal_table(50, 16), axis=1)
    t2t = np.sort(tensor2tensor_timing_signal(50, 16), axis=1)
    assert np.abs(paper - t2t).max() > 0.01


def test_wavelength_end_points_and_ratio():
    d = 64
    lam = wavelengths(d)
    assert lam.shape == (32,)
    assert lam[0] == pytest.approx(2 * math.pi)
    assert lam[-1] == pytest.approx(2 * math.pi * 10000 ** ((d - 2) / d))
    np.testing.assert_allclose(lam[1:] / lam[:-1], 10000 ** (2 / d), rtol=1e-12)


@pytest.mark.parametrize("k", [0, 1, 3, 17, -1, -5, 100])
def test_rotation_matrix_matches_reference(k):
    np.testing.assert_allclose(rotation_matrix(k, 12), reference_rotation(k, 12), atol=1e-12)


@pytest.mark.parametrize("layout", ["interleaved", "halves"])
@pytest.mark.parametrize("k", [1, 2, 9, 40, -1, -7, -40])
def test_rotation_moves_every_position_by_k(k, layout):
    n, d = 200, 32
    table = sinusoidal_table(n, d, layout=layout)
    r = rotation_matrix(k, d, layout=layout)
    src = np.arange(max(0, -k), min(n, n - k))
    np.testing.assert_allclose(table[src] @ r.T, table[src + k], atol=1e-12)


def test_rotation_is_orthogonal_and_a_group():
    d = 16
    r3, r4 = rotation_matrix(3, d), rotation_matrix(4, d)
    np.testing.assert_allclose(r3 @ r3.T, np.eye(d), atol=1e-12)
    np.testing.assert_allclose(r3 @ r4, rotation_matrix(7, d), atol=1e-12)
    np.testing.assert_allclose(rotation_matrix(-3, d), r3.T, atol=1e-12)


def test_halves_rotation_is_the_permuted_interleaved_rotation():
    perm = interleaved_to_halves(8)
    np.testing.assert_array_equal(rotation_matrix(5, 8, layout="halves"), rotation_matrix(5, 8)[np.ix_(perm, perm)])


def test_module_adds_the_table_and_keeps_dtype():
    pe = SinusoidalPositionalEncoding(10, 8)
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    out = pe(x)
    assert out.dtype == torch.float64
    torch.testing.assert_close(out, x + torch.from_numpy(reference_table(6, 8)), rtol=0, atol=1e-12)
    out32 = pe(x.float())
    assert out32.dtype == torch.float32
    torch.testing.assert_close(out32, out.float())


def test_module_table_is_a_non_persistent_buffer():
    pe = SinusoidalPositionalEncoding(10, 8)
    assert "table" in dict(pe.named_buffers())
    assert "table" not in pe.state_dict()
    assert list(pe.parameters()) == []


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: sinusoidal_table(4, 7), ValueError, "dim must be even"),
        (lambda: sinusoidal_table(0, 8), ValueError, "num_positions must be a positive"),
        (lambda: sinusoidal_table(-3, 8), ValueError, "num_positions"),
        (lambda: sinusoidal_table(4.0, 8), TypeError, "num_positions must be an integer"),
        (lambda: sinusoidal_table(4, 0), ValueError, "dim must be a positive"),
        (lambda: sinusoidal_table(4, 8, layout="sincos"), ValueError, "layout must be one of"),
        (lambda: sinusoidal_table(4, 8, base=1.0), ValueError, "base must be greater than 1"),
        (lambda: sinusoidal_table(4, 8, base="10000"), TypeError, "base must be a real number"),
        (lambda: inverse_frequencies(True), TypeError, "dim must be an integer"),
        (lambda: rotation_matrix(float("nan"), 8), ValueError, "k must be finite"),
        (lambda: rotation_matrix("1", 8), TypeError, "k must be a real number"),
        (lambda: interleaved_to_halves(5), ValueError, "dim must be even"),
        (lambda: SinusoidalPositionalEncoding(0, 8), ValueError, "max_len"),
        (lambda: SinusoidalPositionalEncoding(8, 9), ValueError, "dim must be even"),
        (lambda: tensor2tensor_frequencies(0), ValueError, "dim"),
        (lambda: tensor2tensor_frequencies(7), ValueError, "dim must be even"),
        (lambda: tensor2tensor_frequencies(8, min_timescale=5.0, max_timescale=2.0), ValueError,
         "min_timescale < max_timescale"),
        (lambda: tensor2tensor_frequencies(8, max_timescale="1e4"), TypeError, "max_timescale must be a real"),
        (lambda: tensor2tensor_timing_signal(0, 8), ValueError, "num_positions"),
        (lambda: tensor2tensor_timing_signal(4, 1), ValueError, "dim must be at least 2"),
        (lambda: tensor2tensor_timing_signal(4, 8.0), TypeError, "dim must be an integer"),
    ],
)
def test_bad_arguments_raise_clear_errors(call, error, words):
    with pytest.raises(error, match=words):
        call()


def test_sequence_longer_than_the_table_is_refused():
    pe = SinusoidalPositionalEncoding(64, 8)
    with pytest.raises(ValueError, match=r"100 positions but the table has only max_len=64; build the module with max_len >= 100"):
        pe(torch.zeros(2, 100, 8))


@pytest.mark.parametrize(
    "x, error, words",
    [
        (torch.zeros(5, 8), ValueError, r"3 dimensions .*unsqueeze\(0\)"),
        (torch.zeros(1, 5, 6), ValueError, "6 features .* dim=8"),
        (torch.zeros(1, 5, 8, dtype=torch.long), TypeError, "floating-point"),
        (np.zeros((1, 5, 8)), TypeError, "torch.Tensor"),
    ],
)
def test_module_refuses_wrong_inputs(x, error, words):
    with pytest.raises(error, match=words):
        SinusoidalPositionalEncoding(16, 8)(x)
