"""Checkers for the exercises of chapter 16 (debugging position bugs: a checklist)."""

from __future__ import annotations

import math
import numbers

import numpy as np
import torch

from companion import _checks
from companion.exercises._answers import as_number, close, near_miss
from companion.exercises._feedback import Feedback, checker, wrong
from companion.exercises._feedback import right_folded as right
from companion.sinusoidal import sinusoidal_table

__all__ = [
    "suspect_add_positions",
    "check_suspect_offset",
    "check_std_ratio",
    "check_fixes",
]

# The parameters the exercise texts state.
SUSPECT_OFFSET, SUSPECT_LAYOUT = 2, "halves"
RATIO_DIM, RATIO_ROWS = 128, 256
_RATIO_RTOL = 0.03  # a measured token std is within a percent
FIX_OPTIONS = "abcde"
FIXES = ("d", "a", "e")  # the right fix for symptoms 1, 2, 3


def suspect_add_positions(x: torch.Tensor) -> torch.Tensor:
    """Add position vectors to ``x`` ``(b, s, d)`` as the library of exercise
    ``ch16-suspect-offset`` does.

    Returns a tensor of the same shape and dtype. (How it numbers the positions is the
    exercise.)
    """
    x = _checks.tensor("x", x, ndim=3, shape="(batch, seq, dim)")
    seq, dim = x.shape[1], _checks.even_int("the last dimension of x", x.shape[2])
    rows = sinusoidal_table(seq + SUSPECT_OFFSET, dim, layout=SUSPECT_LAYOUT)[
        SUSPECT_OFFSET:
    ]
    return x + torch.from_numpy(rows).to(x.dtype)


def _as_integer(answer) -> int | str:
    if answer is None:
        return (
            "expected an integer, got None. If find_position_offset returned None, no "
            "shift matched: is the reference table in the same layout as the suspect's?"
        )
    value = as_number(answer)
    if isinstance(value, str):
        return value
    if value != round(value):
        return f"expected a whole number of positions, got {value}"
    return int(round(value))


@checker(none_is_an_answer=True)
def check_suspect_offset(answer) -> Feedback:
    """The position that the first token of ``suspect_add_positions`` reads."""
    value = _as_integer(answer)
    if isinstance(value, str):
        return wrong(value)
    if value == SUSPECT_OFFSET:
        return right(
            "Its first token reads position 2, in the halves layout: a library that "
            "numbers tokens after a padding index, as fairseq and OPT do."
        )
    if value == 0:
        return wrong(
            "Position 0 would give the row (0, ..., 0, 1, ..., 1) in the halves "
            "layout, or (0, 1, 0, 1, ...) interleaved. Compare the first row it adds "
            "with both."
        )
    if value == 1:
        return wrong(
            "Not 1. Did find_position_offset try enough shifts, and against the right "
            "layout?"
        )
    if value < 0:
        return wrong("Positions in this table start at 0, so the shift is 0 or more.")
    return wrong(
        "Not that position. Add the suspect's vectors to zeros, then look for its "
        "first row in sinusoidal_table(..., layout=...) of both layouts."
    )


@checker
def check_std_ratio(answer) -> Feedback:
    """Std of ``sqrt(128) * E`` (E drawn with std 1) over the std of
    ``sinusoidal_table(256, 128)``."""
    value = as_number(answer)
    if isinstance(value, str):
        return wrong(value)
    table_std = float(np.std(sinusoidal_table(RATIO_ROWS, RATIO_DIM)))
    expected = math.sqrt(RATIO_DIM) / table_std

    def near(x: float) -> bool:
        return close(value, x, rtol=_RATIO_RTOL)

    if value > 0 and near(expected):
        return right(
            f"About {expected:.1f}: the scaled tokens are some 18 times as spread out "
            "as the positions, which drown in them."
        )
    miss = near_miss(value, expected, rtol=_RATIO_RTOL)
    if miss:
        return wrong(miss)
    if value > 0 and near(1 / expected):
        return wrong("That is the inverse: put the token part on top.")
    if value > 0 and near(1 / table_std):
        return wrong(
            "The forward multiplies the token vectors by sqrt(d) before adding: "
            "include it."
        )
    if value > 0 and near(math.sqrt(RATIO_DIM) / math.sqrt(0.5)):
        return wrong(
            "0.707 is the RMS of a row, not the standard deviation of the table's "
            "entries: the cosines of slow pairs give the table a mean well above 0."
        )
    return wrong(
        "Not the ratio. Measure np.std of the whole table, and work out the std of the "
        "scaled token part from the initialisation."
    )


@checker
def check_fixes(answer) -> Feedback:
    """Three letters: the fix for symptom 1, 2 and 3 of exercise ``ch16-choose-fix``."""
    if isinstance(answer, str):
        letters = [c for c in answer.lower() if not c.isspace() and c not in ",;"]
    elif isinstance(answer, (list, tuple)) and all(isinstance(c, str) for c in answer):
        letters = [c.strip().lower() for c in answer]
    else:
        return wrong(
            "expected three letters, e.g. ['a', 'b', 'c'] or 'abc', got "
            f"{type(answer).__name__}"
        )
    if len(letters) != len(FIXES):
        return wrong(f"expected three letters, one per symptom, got {len(letters)}")
    unknown = [c for c in letters if c not in FIX_OPTIONS]
    if unknown:
        return wrong(f"the options are the letters a to e, got {unknown[0]!r}")
    wrong_at = [
        i + 1 for i, (got, want) in enumerate(zip(letters, FIXES)) if got != want
    ]
    if not wrong_at:
        return right(
            "Each symptom pointed at one item of the checklist, and each check "
            "confirms its fix."
        )
    hints = {
        1: (
            "Symptom 1: compare x.std() with pe.std(). What makes the token part that "
            "large?"
        ),
        2: (
            "Symptom 2: the scores still depend only on offsets, so the rotation "
            "itself works. Which weights feed the features that get paired?"
        ),
        3: (
            "Symptom 3: only the left-padded prompt changes, and the model reads rows "
            "of an absolute table. Which position does a plain forward give its first "
            "real token?"
        ),
    }
    return wrong(" ".join(hints[i] for i in wrong_at))
