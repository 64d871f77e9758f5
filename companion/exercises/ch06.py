"""Checkers for the exercises of chapter 6 (learned tables and relative biases)."""

from __future__ import annotations

import numpy as np

from companion.exercises._answers import as_array, count_off
from companion.exercises._feedback import Feedback, checker, right, wrong

__all__ = [
    "check_t5_buckets_of_offsets",
    "check_shaw_index_matrix",
    "check_positions_without_row",
]

# The parameters the exercise texts state.
# key - query: 100, 20, 3 back; the query itself; 5, 40 ahead
T5_OFFSETS = (-100, -20, -3, 0, 5, 40)
SHAW_LEN, SHAW_K = 5, 3
TABLE_MAX_LEN, INPUT_LEN = 512, 600


def _t5_reference(offset: int, *, bidirectional: bool = True) -> int:
    """T5's bucket of one ``key - query`` offset (32 buckets, max_distance 128), in
    plain Python."""
    per_direction = 16 if bidirectional else 32
    first = per_direction if (bidirectional and offset > 0) else 0
    back = abs(offset) if bidirectional else max(-offset, 0)
    exact = per_direction // 2
    if back < exact:
        return first + back
    spread = np.log(back / exact) / np.log(128 / exact) * (per_direction - exact)
    return first + min(exact + int(spread), per_direction - 1)


def _int_vector(answer, length: int):
    """Return ``(list of ints, None)`` or ``(None, Feedback)`` explaining why ``answer``
    is unusable."""
    raw = as_array(answer, finite=False)
    if isinstance(raw, str):
        return None, wrong(f"The answer is {length} integers: {raw}")
    if raw.ndim != 1:
        return None, wrong(
            f"expected a flat list of {length} integers, got {type(answer).__name__} "
            f"{raw.shape}"
        )
    if raw.shape[0] != length:
        return None, wrong(f"expected {length} integers, got {raw.shape[0]}")
    if not np.all(np.isfinite(raw)) or not np.all(raw == np.round(raw)):
        return None, wrong("expected whole numbers (bucket indices are integers)")
    return [int(v) for v in raw], None


@checker
def check_t5_buckets_of_offsets(answer) -> Feedback:
    """T5 buckets (32, bidirectional, max_distance 128) of keys 100, 20, 3 back, 0, and
    5, 40 ahead."""
    values, problem = _int_vector(answer, len(T5_OFFSETS))
    if problem is not None:
        return problem
    expected = [_t5_reference(r) for r in T5_OFFSETS]
    if values == expected:
        return right(
            "Keys behind use buckets 0..15, keys ahead 16..31; far ones share wide "
            "buckets."
        )
    if values == [_t5_reference(-r) for r in T5_OFFSETS]:
        return wrong(
            "The halves are swapped: the offset T5 buckets is key position minus query "
            "position, so a key before the query has a negative offset."
        )
    if values == [_t5_reference(r, bidirectional=False) for r in T5_OFFSETS]:
        return wrong(
            "These are the decoder's (unidirectional) buckets; the exercise uses "
            "bidirectional ones."
        )
    if any(v < 0 or v > 31 for v in values):
        return wrong("Bucket indices lie in 0..31 with 32 buckets.")
    misses = sum(a != b for a, b in zip(values, expected))
    return wrong(
        f"{count_off(misses, 6, 'buckets')}. Small distances (below 8) get a bucket "
        "each; larger ones share logarithmically wider buckets; keys ahead of the "
        "query use the second half."
    )


@checker
def check_shaw_index_matrix(answer) -> Feedback:
    """The ``(5, 5)`` matrix ``clip(j - i, -3, 3) + 3`` (rows are queries ``i``, columns
    keys ``j``)."""
    matrix = as_array(answer, finite=False)
    if isinstance(matrix, str):
        return wrong(f"The answer is a matrix of integer indices: {matrix}")
    if matrix.shape != (SHAW_LEN, SHAW_LEN):
        return wrong(
            f"expected an array of shape ({SHAW_LEN}, {SHAW_LEN}), got shape "
            f"{matrix.shape}"
        )
    if not np.all(np.isfinite(matrix)):
        return wrong("The array contains NaN or infinite values")
    offsets = np.arange(SHAW_LEN)[None, :] - np.arange(SHAW_LEN)[:, None]  # j - i
    expected = np.clip(offsets, -SHAW_K, SHAW_K) + SHAW_K
    if np.array_equal(matrix, expected):
        return right(
            "Constant along each diagonal, and saturated at 0 and 2K beyond distance K."
        )
    if np.array_equal(matrix, expected - SHAW_K):
        return wrong(
            "These are the clipped offsets themselves; an index into 2K + 1 vectors "
            "must start at 0."
        )
    if np.array_equal(matrix, expected.T):
        return wrong(
            "Rows and columns are swapped: rows are queries i, columns keys j, and the "
            "offset is j - i."
        )
    if np.array_equal(matrix, offsets + SHAW_K) or np.array_equal(matrix, offsets):
        return wrong(
            "The offsets are not clipped: distances beyond K should share the "
            "outermost vector."
        )
    return wrong(
        "Entry (i, j) should depend on the offset j - i only, clipped to [-K, K] and "
        "shifted to start at 0."
    )


@checker
def check_positions_without_row(answer) -> Feedback:
    """The positions of a 600-token input that a ``max_len = 512`` table has no row
    for."""
    raw = as_array(answer, finite=False)
    if isinstance(raw, str) or raw.ndim != 1:
        if not isinstance(raw, str) and raw.ndim == 0:
            return wrong(
                "That is one number; the exercise asks for the list of positions "
                "without a row."
            )
        if isinstance(raw, str) and "complex" in raw:
            return wrong(raw)
        return wrong(
            f"expected a flat list of positions (integers), got {type(answer).__name__}"
        )
    if not np.all(np.isfinite(raw)) or not np.all(raw == np.round(raw)):
        return wrong("expected whole numbers (positions are integers)")
    positions = sorted({int(v) for v in raw})
    if len(positions) != raw.shape[0]:
        return wrong("Some positions appear more than once; list each position once.")
    expected = list(range(TABLE_MAX_LEN, INPUT_LEN))
    if positions == expected:
        return right(
            "The table holds rows 0..511; positions 512..599 have nothing to add."
        )
    if positions == list(range(TABLE_MAX_LEN + 1, INPUT_LEN + 1)):
        return wrong(
            "These are counted from 1; the table's rows, and positions, are counted "
            "from 0."
        )
    if positions == list(range(TABLE_MAX_LEN - 1, INPUT_LEN)) or positions == list(
        range(TABLE_MAX_LEN + 1, INPUT_LEN)
    ):
        return wrong(
            "Off by one at the start: a table of max_len rows has rows 0 .. max_len - "
            "1."
        )
    return wrong(
        f"Not the right positions ({len(positions)} given). Which rows does a table "
        "with max_len = 512 have, and which positions does a 600-token input use?"
    )
