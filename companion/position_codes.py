"""The simple position codes a reader tries first, and the shift test they fail.

Notation: ``n`` positions (starting at 0), ``d`` features. Every code returns a float64
table ``(n, d)`` whose row ``pos`` is the vector for position ``pos``, so any of them
can be compared with :func:`companion.sinusoidal.sinusoidal_table`.

* :func:`integer_code`: every feature holds ``pos`` itself (unbounded).
* :func:`fraction_code`: every feature holds ``pos / length`` (depends on the length).
* :func:`one_hot_code`: feature ``pos`` is 1 (needs ``d >= n``; all positions equally
  far).
* :func:`binary_code`: feature ``j`` is bit ``j`` of ``pos`` (a counter of square
  waves).

:func:`fit_shift` asks whether *one* matrix maps every row ``pos`` to row ``pos + k``,
by least squares; the relative residual is 0 exactly when such a linear map exists on
the rows.
"""

from __future__ import annotations

import numpy as np

from companion import _checks


def integer_code(num_positions: int, dim: int) -> np.ndarray:
    """Row ``pos`` is ``pos`` repeated ``dim`` times.

    Returns:
        float64 array ``(n, d)``.
    """
    num_positions = _checks.positive_int("num_positions", num_positions)
    dim = _checks.positive_int("dim", dim)
    return np.repeat(np.arange(num_positions, dtype=np.float64)[:, None], dim, axis=1)


def fraction_code(
    num_positions: int, dim: int, *, length: int | None = None
) -> np.ndarray:
    """Row ``pos`` is ``pos / length`` repeated ``dim`` times.

    Args:
        num_positions: number of rows ``n``.
        dim: number of features ``d``.
        length: the length of the sequence the positions belong to (default ``n``); the
            same position gets a different code in a sequence of another length.

    Returns:
        float64 array ``(n, d)`` with entries in ``[0, 1)``.
    """
    num_positions = _checks.positive_int("num_positions", num_positions)
    length = num_positions if length is None else _checks.positive_int("length", length)
    if length < num_positions:
        raise ValueError(
            f"length={length} must be at least num_positions={num_positions}; "
            "a sequence of that length has no later positions"
        )
    return integer_code(num_positions, dim) / length


def one_hot_code(num_positions: int, dim: int) -> np.ndarray:
    """Row ``pos`` is the unit vector ``e_pos``.

    Returns:
        float64 array ``(n, d)``; requires ``d >= n`` (one feature per position).
    """
    num_positions = _checks.positive_int("num_positions", num_positions)
    dim = _checks.positive_int("dim", dim)
    if dim < num_positions:
        raise ValueError(
            f"a one-hot code needs one feature per position: dim={dim} < "
            f"num_positions={num_positions}; use dim >= {num_positions}"
        )
    return np.eye(num_positions, dim, dtype=np.float64)


def binary_code(num_positions: int, bits: int) -> np.ndarray:
    """Row ``pos`` holds the bits of ``pos``, least significant first, as 0.0 or 1.0.

    Feature ``j`` flips every ``2**j`` positions: a square wave of period
    ``2**(j + 1)``.

    Returns:
        float64 array ``(n, bits)``; requires ``n <= 2**bits``.
    """
    num_positions = _checks.positive_int("num_positions", num_positions)
    bits = _checks.positive_int("bits", bits)
    if num_positions > 2**bits:
        raise ValueError(
            f"{bits} bits count only {2**bits} positions, got "
            f"num_positions={num_positions}; use bits >= "
            f"{int(np.ceil(np.log2(num_positions)))}"
        )
    pos = np.arange(num_positions)[:, None]
    return ((pos >> np.arange(bits)) & 1).astype(np.float64)


def fit_shift(table, k: int) -> tuple[np.ndarray, float]:
    """Least-squares matrix ``M`` with ``table[pos + k] ~ M @ table[pos]`` for every
    ``pos``.

    Args:
        table: array ``(n, d)``, one row per position.
        k: the offset, ``-n < k < n`` (negative moves backwards).

    Returns:
        ``(M, residual)``: ``M`` is float64 ``(d, d)``; ``residual`` is
        ``||X M^T - Y|| / ||Y||`` over the ``n - |k|`` row pairs, with ``X`` the rows
        ``pos`` and ``Y`` the rows ``pos + k``. It is ~0 exactly when one linear map
        moves every row. With fewer row pairs than features, any table fits (more
        unknowns than equations).
    """
    try:
        table = np.asarray(table, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"table must be a real array (positions, features); got {err}"
        ) from None
    if table.ndim != 2:
        raise ValueError(
            f"table must have shape (positions, features), got shape {table.shape}"
        )
    k = _checks.integer("k", k)
    if not 0 < abs(k) < len(table):
        raise ValueError(
            f"k must satisfy 0 < |k| < {len(table)} (the number of rows), got {k}"
        )
    before, after = (table[:-k], table[k:]) if k > 0 else (table[-k:], table[:k])
    m_transposed, *_ = np.linalg.lstsq(before, after, rcond=None)          # (d, d)
    residual = np.linalg.norm(before @ m_transposed - after) / np.linalg.norm(after)
    return m_transposed.T, float(residual)
