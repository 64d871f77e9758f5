"""Checkers for the exercises of chapter 5 (relative positions as rotations)."""

from __future__ import annotations

import numpy as np

from companion.exercises._answers import (
    as_array,
    as_bool,
    close,
    count_off,
    counted,
    near_miss,
    resolution,
)
from companion.exercises._feedback import Feedback, checker, wrong
from companion.exercises._feedback import right_folded as right
from companion.sinusoidal import (
    interleaved_to_halves,
    inverse_frequencies,
    sinusoidal_table,
)


__all__ = [
    "check_pair_block",
    "check_extend_table",
    "rotation_mystery_tables",
    "check_shift_property",
    "check_offset_only_scores",
]

# The parameters the exercise texts state.
PAIR_DIM, PAIR_INDEX, PAIR_OFFSET = 64, 3, 10
EXTEND_ROWS, EXTEND_DIM, EXTEND_MORE = 50, 32, 10
MYSTERY_NAMES = ("A", "B", "C", "D")
MYSTERY_ROWS, MYSTERY_DIM, MYSTERY_BASE = 200, 16, 100.0
SCORE_DIM, SCORE_ROWS, SCORE_OFFSET = 16, 64, 3  # ch05-offset-scores, halves layout

# Absolute tolerances, float32-safe whatever the answer's dtype
# (companion.exercises._answers, "Tolerances"); entries of PE and of rotations lie in
# [-1, 1]. The pair block's angle is about 4, so float32 gets it within ~3e-7; the rows
# of positions 50..59 hold sines of angles up to 59, off by ~2e-6 in float32 (more than
# the 1e-6 that used to reject them). The mistakes the checkers name are off by 0.1 or
# more somewhere.
_BLOCK_ATOL = 1e-5
_ROWS_ATOL = 1e-4


def _worst_entry(got: np.ndarray, expected: np.ndarray, atol: float) -> str:
    """Where ``got`` is farthest from ``expected``, in words: '[row, col] off by x'."""
    off = np.abs(got - expected)
    index = np.unravel_index(int(np.argmax(off)), off.shape)
    return (
        f"entry {list(map(int, index))} is off by {off[index]:.3g} (tolerance {atol:g})"
    )


@checker
def check_pair_block(answer) -> Feedback:
    """The 2x2 block ``B`` with ``(sin, cos)`` at ``pos + 10`` equal to
    ``B @ (sin, cos)`` at ``pos``, for pair ``i = 3`` of a ``d = 64`` table (base
    10000)."""
    block = as_array(answer, (2, 2))
    if isinstance(block, str):
        return wrong(block)
    atol = _BLOCK_ATOL
    b = PAIR_OFFSET * inverse_frequencies(PAIR_DIM)[PAIR_INDEX]
    c, s = np.cos(b), np.sin(b)
    expected = np.array([[c, s], [-s, c]])
    if close(block, expected, atol=atol):
        return right(
            "This block maps (sin, cos) at pos to (sin, cos) at pos + 10, whatever pos "
            "is."
        )
    miss = near_miss(block, expected, atol=atol)
    if miss:
        return wrong(miss)
    if close(block, expected.T, atol=atol):
        return wrong(
            "This is the textbook counter-clockwise rotation, which acts on (cos, "
            "sin); the pair is stored as (sin, cos). Expand sin(a + b) and cos(a + b) "
            "and read off the coefficients."
        )
    slack = atol + 4 * resolution(block)  # a block rounded by hand is still orthogonal
    orthogonal = np.allclose(block @ block.T, np.eye(2), rtol=0, atol=slack)
    if orthogonal and np.isclose(np.linalg.det(block), 1.0, rtol=0, atol=slack):
        return wrong(
            "This is a rotation, but by the wrong angle: the angle is the offset times "
            "the pair's frequency omega_i = 10000 ** (-2i / d), with i the pair index, "
            "in radians."
        )
    if orthogonal:
        return wrong(
            "This is a reflection (determinant -1), not a rotation: moving along the "
            "table turns each pair, so B must have determinant 1."
        )
    return wrong(
        "The block should be a rotation: orthogonal with determinant 1 "
        f"({_worst_entry(block, expected, atol)}). "
        "Expand sin(a + b) and cos(a + b) with a = pos * omega_i and b = k * omega_i."
    )


@checker
def check_extend_table(answer) -> Feedback:
    """Rows for positions 50..59 of the interleaved ``d = 32`` table, shape
    ``(10, 32)``."""
    rows = as_array(answer, (EXTEND_MORE, EXTEND_DIM))
    if isinstance(rows, str):
        return wrong(rows)
    atol = _ROWS_ATOL
    expected = sinusoidal_table(EXTEND_ROWS + EXTEND_MORE, EXTEND_DIM)[EXTEND_ROWS:]
    if close(rows, expected, atol=atol):
        return right(
            "The rotation carried the last rows 10 positions forward, beyond the "
            "table. The formula has no last row; a model trained on short sequences "
            "has never seen these rows, which is a different matter (chapter 12)."
        )
    miss = near_miss(rows, expected, atol=atol)
    if miss:
        return wrong(miss)
    backwards = sinusoidal_table(EXTEND_ROWS, EXTEND_DIM)[
        EXTEND_ROWS - 2 * EXTEND_MORE : EXTEND_ROWS - EXTEND_MORE
    ]
    if close(rows, backwards, atol=atol):
        return wrong(
            "These are positions 30..39: the rows moved backwards. A row vector times "
            "R(k) is R(k)^T applied to it, and R(k)^T = R(-k)."
        )
    if close(rows, expected[:, interleaved_to_halves(EXTEND_DIM)], atol=atol):
        return wrong(
            "The numbers are right but the feature order is not: keep the interleaved "
            "layout."
        )
    if close(rows[0], expected[0], atol=atol):
        return wrong(
            f"The first row is right but {_worst_entry(rows, expected, atol)}, as "
            "[row, feature]; every row should move by the same offset (one matrix for "
            "all)."
        )
    return wrong(
        f"Not the rows of positions 50..59 ({_worst_entry(rows, expected, atol)}, as "
        "[row, feature]). Which rows of the table are 10 positions before them, and "
        "which matrix moves a row 10 positions forward?"
    )


def rotation_mystery_tables() -> dict[str, np.ndarray]:
    """Four float64 tables ``(200, 16)`` named ``"A"`` to ``"D"`` for the exercise
    ``ch05-which-shift``."""
    rng = np.random.default_rng(5)
    n, d = MYSTERY_ROWS, MYSTERY_DIM
    real = sinusoidal_table(n, d, base=MYSTERY_BASE)
    random_angles = rng.uniform(0.0, 2.0 * np.pi, size=(n, d // 2))
    fake = np.empty((n, d))
    fake[:, 0::2], fake[:, 1::2] = np.sin(random_angles), np.cos(random_angles)
    mixing = np.eye(d) + 0.3 * rng.standard_normal((d, d))
    return {
        "A": fake,
        "B": real @ mixing.T,
        "C": real[rng.permutation(n)],
        "D": sinusoidal_table(n, d, base=10.0),
    }


def _labels(answer):
    """Four booleans in the order A..D from a sequence or a dict, or a Feedback saying
    what is wrong."""
    if isinstance(answer, dict):
        if set(answer) != set(MYSTERY_NAMES):
            return wrong(
                f"expected a dict with keys {list(MYSTERY_NAMES)}, got keys "
                f"{sorted(map(str, answer))}"
            )
        answer = [answer[name] for name in MYSTERY_NAMES]
    if isinstance(answer, (str, bytes, set, frozenset)) or not hasattr(
        answer, "__len__"
    ):
        return wrong(
            f"expected 4 booleans in the order A, B, C, D, got {type(answer).__name__}"
        )
    if hasattr(answer, "shape"):
        if len(answer.shape) != 1:
            return wrong(
                "expected 4 booleans in a flat list, got an array of shape "
                f"{tuple(answer.shape)}"
            )
        answer = answer.tolist()
    values = list(answer)
    if len(values) != len(MYSTERY_NAMES):
        return wrong(
            "expected 4 booleans (one per table A, B, C, D), got "
            f"{counted(len(values), 'value')}"
        )
    labels = []
    for value in values:
        numeric = isinstance(
            value, (int, float, np.integer, np.floating)
        ) and value in (0, 1)
        # 0/1 as int or float count too, and 0-d boolean tensors
        if as_bool(value) is not None or numeric:
            labels.append(bool(value))
        else:
            return wrong(f"expected booleans True/False, got {value!r}")
    return labels


@checker
def check_shift_property(answer) -> Feedback:
    """For each table of :func:`rotation_mystery_tables`: is there one matrix ``M`` with
    ``table[pos + 5] = M @ table[pos]`` for every ``pos``?"""
    labels = _labels(answer)
    if isinstance(labels, Feedback):
        return labels
    expected = [False, True, False, True]
    misses = sum(a != b for a, b in zip(labels, expected))
    if misses == 0:
        return right(
            "The least-squares residual separates the tables; the norms of the pairs "
            "do not."
        )
    return wrong(
        f"{count_off(misses, 4, 'answers')}. Fit M by least squares from rows pos to "
        "rows pos + 5 and compare the residual with the size of the rows; a pair can "
        "have norm 1 without any fixed map, and a fixed map does not need pairs of "
        "norm 1."
    )


def _score_table() -> np.ndarray:
    """The halves-layout table of exercise ch05-offset-scores, ``(64, 16)``."""
    return sinusoidal_table(SCORE_ROWS, SCORE_DIM, layout="halves")


@checker
def check_offset_only_scores(answer) -> Feedback:
    """Exercise ch05-offset-scores: a ``(16, 16)`` matrix ``A`` such that, for the
    halves-layout table ``P`` (64 positions), the scores ``P @ A @ P.T`` depend only on
    ``n - m`` and differ between the offsets ``+3`` and ``-3``."""
    a = as_array(answer, (SCORE_DIM, SCORE_DIM))
    if isinstance(a, str):
        return wrong(a)
    table = _score_table()
    scores = table @ a @ table.T                              # (64, 64): s(m, n)
    scale = float(np.abs(scores).max())
    if scale < 1e-9:
        return wrong(
            "All scores are zero: constant in m, but they cannot tell anything apart."
        )
    # entries of A rounded by hand to the decimals they give move each score by at most
    # half their step times (sum |P[m]|) (sum |P[n]|)
    rounding = resolution(a) * float(np.abs(table).sum(axis=1).max()) ** 2
    tol = 1e-5 * scale + rounding
    spreads = {c: float(np.ptp(np.diagonal(scores, offset=c))) for c in range(-20, 21)}
    worst = max(spreads, key=spreads.get)
    if spreads[worst] > tol:
        return wrong(
            f"At offset n - m = {worst} the score still changes with m (spread "
            f"{spreads[worst]:.3g}, tolerance {tol:.2g}). In the halves layout pair i "
            f"is features i and i + {SCORE_DIM // 2}; which 2x2 blocks commute with "
            "every rotation?"
        )
    ahead = float(np.diagonal(scores, offset=SCORE_OFFSET)[0])
    behind = float(np.diagonal(scores, offset=-SCORE_OFFSET)[0])
    if abs(ahead - behind) <= 1e-3 * scale + 2 * rounding:
        return wrong(
            f"The scores depend on the offset only, but s(+{SCORE_OFFSET}) = "
            f"{ahead:.4g} and s(-{SCORE_OFFSET}) = {behind:.4g} are equal: the matrix "
            "cannot tell before from after. Which part of a 2x2 block is odd in the "
            "angle?"
        )
    return right(
        f"Offset-only scores that know the direction: s(+{SCORE_OFFSET}) = "
        f"{ahead:.4g}, s(-{SCORE_OFFSET}) = {behind:.4g}, the same for every m."
    )
