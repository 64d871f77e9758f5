"""Tests of companion.position_codes against small references written as loops."""

import numpy as np
import pytest

from companion.position_codes import (
    binary_code,
    fit_shift,
    fraction_code,
    integer_code,
    one_hot_code,
)
from companion.sinusoidal import rotation_matrix, sinusoidal_table


def test_integer_and_fraction_codes():
    expected = np.array([[float(pos)] * 3 for pos in range(5)])
    np.testing.assert_array_equal(integer_code(5, 3), expected)
    np.testing.assert_allclose(fraction_code(5, 3), expected / 5, rtol=0, atol=1e-15)
    np.testing.assert_allclose(fraction_code(5, 3, length=20), expected / 20, rtol=0, atol=1e-15)


def test_one_hot_code():
    expected = np.zeros((4, 6))
    for pos in range(4):
        expected[pos, pos] = 1.0
    np.testing.assert_array_equal(one_hot_code(4, 6), expected)


def test_binary_code_matches_repeated_division():
    expected = np.zeros((13, 4))
    for pos in range(13):
        value = pos
        for bit in range(4):
            expected[pos, bit] = value % 2
            value //= 2
    np.testing.assert_array_equal(binary_code(13, 4), expected)


def test_fit_shift_recovers_a_known_map_and_measures_misfit():
    table = sinusoidal_table(100, 8)
    m, residual = fit_shift(table, 3)
    np.testing.assert_allclose(m, rotation_matrix(3, 8), atol=1e-8)
    assert residual < 1e-12
    m_back, residual_back = fit_shift(table, -3)
    np.testing.assert_allclose(m_back, rotation_matrix(-3, 8), atol=1e-8)
    # A random table has no such map: the residual is large.
    _, noisy = fit_shift(np.random.default_rng(0).standard_normal((100, 8)), 3)
    assert noisy > 0.5


def test_fit_shift_residual_is_the_relative_lstsq_error():
    table = binary_code(16, 4)
    x, y = table[:-1], table[1:]
    m_t = np.linalg.pinv(x) @ y
    expected = np.linalg.norm(x @ m_t - y) / np.linalg.norm(y)
    assert fit_shift(table, 1)[1] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    "call, error, words",
    [
        (lambda: integer_code(0, 4), ValueError, "num_positions must be a positive"),
        (lambda: integer_code(3, 2.0), TypeError, "dim must be an integer"),
        (lambda: fraction_code(10, 4, length=5), ValueError, "length=5 must be at least"),
        (lambda: one_hot_code(10, 4), ValueError, "use dim >= 10"),
        (lambda: binary_code(20, 4), ValueError, "use bits >= 5"),
        (lambda: fit_shift(np.zeros(5), 1), ValueError, "table must have shape"),
        (lambda: fit_shift([["a", "b"]], 1), TypeError, "table must be a real array"),
        (lambda: fit_shift(np.zeros((5, 2)), 5), ValueError, "0 < |k| < 5"),
        (lambda: fit_shift(np.zeros((5, 2)), 1.0), TypeError, "k must be an integer"),
    ],
)
def test_bad_arguments_raise_clear_errors(call, error, words):
    with pytest.raises(error, match=words.replace("|", r"\|").replace("(", r"\(")):
        call()
