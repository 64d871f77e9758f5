"""Checkers for the exercises of chapter 7 (RoPE)."""

from __future__ import annotations

import numpy as np

from companion.exercises._answers import as_array, close, near_miss, resolution
from companion.exercises._feedback import Feedback, checker, right, wrong

__all__ = [
    "ROPE_HAND_VECTOR",
    "check_rope_rotated_vector",
    "check_rope_pair_permutation",
    "rope_interleaved_query_weight",
    "check_rope_halves_query_weight",
]

# The parameters the exercise texts state.
ROPE_HAND_VECTOR = (1.0, 2.0, -0.5, 3.0)  # d = 4, base 10000, interleaved
ROPE_HAND_POSITION = 3
PERM_DIM = 8
WEIGHT_HEADS, WEIGHT_HEAD_DIM, WEIGHT_MODEL_DIM = 2, 8, 12
# The rotated vector (entries up to 3): float32 gets it within ~1e-6; NumPy's allclose
# defaults, as before.
_RTOL, _ATOL = 1e-5, 1e-5
# The converted weight only moves the seeded entries: float32 rounds them by 6e-8.
_WEIGHT_RTOL, _WEIGHT_ATOL = 1e-6, 1e-6


def _unreadable(message: str) -> Feedback:
    """``as_array``'s message, with the way back from complex numbers when that is the
    problem."""
    if "complex" in message:
        message += "; turn each complex number back into two real features"
    return wrong(message)


def _theta(dim: int, base: float = 10000.0) -> np.ndarray:
    return base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)


def _rotate_interleaved(x: np.ndarray, position: float) -> np.ndarray:
    z = (x[0::2] + 1j * x[1::2]) * np.exp(1j * position * _theta(x.size))
    return np.stack([z.real, z.imag], axis=-1).reshape(-1)


@checker
def check_rope_rotated_vector(answer) -> Feedback:
    """``ROPE_HAND_VECTOR`` rotated by RoPE at position 3 (d = 4, base 10000,
    interleaved pairs)."""
    got = as_array(answer, (4,))
    if isinstance(got, str):
        return _unreadable(got)
    x = np.array(ROPE_HAND_VECTOR)
    expected = _rotate_interleaved(x, ROPE_HAND_POSITION)
    if close(got, expected, rtol=_RTOL, atol=_ATOL):  # float32 answers welcome
        return right("Each pair turned by 3 * theta_i and kept its length.")
    miss = near_miss(got, expected, rtol=_RTOL, atol=_ATOL)
    if miss:
        return wrong(miss)
    if close(got, x, rtol=_RTOL, atol=_ATOL):
        return wrong(
            "This is the vector unchanged: position 3 should turn every pair by 3 * "
            "theta_i."
        )
    if close(got, _rotate_interleaved(x, -ROPE_HAND_POSITION), rtol=_RTOL, atol=_ATOL):
        return wrong(
            "The pairs turned the wrong way: multiply by exp(+i m theta_i), not by its "
            "conjugate."
        )
    pair_norms = np.hypot(got[0::2], got[1::2])
    slack = _ATOL + 2 * resolution(got)  # rounded entries give rounded norms
    if not np.allclose(pair_norms, np.hypot(x[0::2], x[1::2]), atol=slack):
        if np.allclose(np.hypot(got[:2], got[2:]), np.hypot(x[:2], x[2:]), atol=slack):
            return wrong(
                "You paired feature j with feature j + d/2 (the halves layout); this "
                "exercise pairs (0, 1) and (2, 3)."
            )
        return wrong(
            "A rotation keeps each pair's length, and yours changed: check which "
            "features form a pair."
        )
    return wrong(
        "Each pair keeps its length, but some angle is off: pair i turns by m * "
        "theta_i with theta_i = 10000 ** (-2i / d), in radians."
    )


def _layout_perm(dim: int) -> np.ndarray:
    return np.concatenate([np.arange(0, dim, 2), np.arange(1, dim, 2)])


@checker
def check_rope_pair_permutation(answer) -> Feedback:
    """The permutation ``p`` of 8 features with
    ``rope_halves(x[p]) == rope_interleaved(x)[p]``."""
    raw = as_array(answer, finite=False)
    if isinstance(raw, str):
        return wrong(f"The answer is {PERM_DIM} integer indices: {raw}")
    if raw.shape != (PERM_DIM,):
        return wrong(
            f"expected {PERM_DIM} integer indices (shape ({PERM_DIM},)), got shape "
            f"{raw.shape}"
        )
    if not np.all(np.isfinite(raw)) or not np.array_equal(raw, np.round(raw)):
        return wrong("The indices must be whole numbers")
    perm = raw.astype(np.int64)
    if sorted(perm.tolist()) != list(range(PERM_DIM)):
        return wrong(f"A permutation uses each index 0 .. {PERM_DIM - 1} exactly once")
    expected = _layout_perm(PERM_DIM)
    if np.array_equal(perm, expected):
        return right("Interleaved pair (2i, 2i + 1) lands on halves pair (i, i + d/2).")
    if np.array_equal(perm, np.argsort(expected)):
        return wrong(
            "This is the inverse permutation. Read x[p] as: new feature j is old "
            "feature p[j]; new feature i (i < d/2) must be the first member of "
            "interleaved pair i."
        )
    return wrong(
        "Under the halves layout, features i and i + d/2 form pair i; under the "
        "interleaved layout, features 2i and 2i + 1 do. Which old feature must sit at "
        "new position i?"
    )


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return close(a, b, rtol=_WEIGHT_RTOL, atol=_WEIGHT_ATOL)


def rope_interleaved_query_weight() -> np.ndarray:
    """A seeded query weight ``(h * d, D) = (16, 12)``, two heads of ``d = 8``, made for
    interleaved RoPE."""
    return np.random.default_rng(7).standard_normal(
        (WEIGHT_HEADS * WEIGHT_HEAD_DIM, WEIGHT_MODEL_DIM)
    )


@checker
def check_rope_halves_query_weight(answer) -> Feedback:
    """The weight of :func:`rope_interleaved_query_weight` rearranged for the halves
    layout."""
    shape = (WEIGHT_HEADS * WEIGHT_HEAD_DIM, WEIGHT_MODEL_DIM)
    got = as_array(answer, shape)
    if isinstance(got, str):
        return _unreadable(got)
    w = rope_interleaved_query_weight()
    perm = _layout_perm(WEIGHT_HEAD_DIM)
    rows = np.concatenate([h * WEIGHT_HEAD_DIM + perm for h in range(WEIGHT_HEADS)])
    if _same(got, w[rows]):
        return right(
            "Each head's output rows are reordered; the inputs (columns) are untouched."
        )
    miss = near_miss(got, w[rows], rtol=_WEIGHT_RTOL, atol=_WEIGHT_ATOL)
    if miss:
        return wrong(miss)
    if _same(got, w):
        return wrong(
            "This is the weight unchanged; the halves layout pairs different output "
            "features."
        )
    if _same(got, w[_layout_perm(shape[0])]):
        return wrong(
            "Each head rotates its own 8 features: permute the rows within each head, "
            "not across all 16."
        )
    inverse_rows = np.concatenate(
        [h * WEIGHT_HEAD_DIM + np.argsort(perm) for h in range(WEIGHT_HEADS)]
    )
    if _same(got, w[inverse_rows]):
        return wrong(
            "The rows moved the opposite way: that is the inverse permutation."
        )
    if _same(np.sort(got, axis=0), np.sort(w, axis=0)):
        return wrong(
            "The rows are reordered, but not as the halves layout needs; check the "
            "order within each head."
        )
    return wrong(
        "The new weight should contain the same rows as the old one, in another order: "
        "the query features come out of W_Q's rows, and the layout decides which "
        "features form a pair."
    )
