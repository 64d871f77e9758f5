"""Turning a learner's answer into a number or an array, or into a message saying why
not.

Checkers accept Python numbers, NumPy values and tensors alike, and never raise on a
wrong type: a function here returns either the parsed value or a ``str`` message.

Tolerances
----------
The one rule for how close a float answer must come to a checker's float64 reference:

* A tolerance is sized for the error of the exercise's natural float32 computation (not
  just one rounding of the right value), with a margin of ten or more, and it is the
  same whatever the answer's dtype. The dtype cannot tell how the answer was computed:
  NumPy turns a float32 table times a float64 matrix into float64, and ``.double()``,
  ``.item()``, ``.tolist()`` and ``float()`` keep a float32 result's error while
  dropping its dtype.
* It stays far below the gap to every wrong answer the checker names, and the branches
  that name a mistake compare with the same tolerance as the branch that accepts, so
  that a right answer is never told about a mistake it does not have.
* :data:`FLOAT32_RTOL` is the relative tolerance for a quantity built by a few float32
  operations (powers, exp and log: ratios of wavelengths from frequencies
  ``exp(-2i/d * ln 10000)`` are off by up to about 1e-6). Absolute tolerances on table
  entries grow with the angles (float32 sines of angles up to 60 are off by a few 1e-6);
  each chapter sets them beside its checkers, with the reason.
* Half precision (float16, bfloat16: about 1e-3 relative) is too coarse for these
  tolerances; such an answer is read and compared like any other, and told how far off
  it is.
"""

from __future__ import annotations

import math
import numbers
import textwrap
from typing import Any

import numpy as np

# Relative tolerance for a quantity a learner computes in float32: see "Tolerances"
# above.
FLOAT32_RTOL = 1e-5


def _to_numpy(answer: Any) -> np.ndarray:
    # a torch tensor; NumPy has no bfloat16, so widen it first
    if hasattr(answer, "detach"):
        answer = answer.detach().cpu()
        if str(answer.dtype) == "torch.bfloat16":
            answer = answer.float()
    return np.asarray(answer)


def as_number(answer: Any) -> float | str:
    """Return ``answer`` as a finite float, or a message saying why it is not one."""
    if isinstance(answer, (bool, np.bool_)):
        return f"expected a number, got a boolean {answer!r}"
    if isinstance(answer, numbers.Real):
        value = float(answer)
    else:
        try:
            array = _to_numpy(answer)
        except Exception:  # noqa: BLE001
            # any odd object is a wrong answer, not a crash
            return f"expected a number, got {type(answer).__name__}"
        if array.dtype.kind not in "iuf":
            return f"expected a number, got {type(answer).__name__}"
        if array.size != 1:
            return f"expected a single number, got an array of shape {array.shape}"
        value = float(array.reshape(()))
    if not math.isfinite(value):
        return f"expected a finite number, got {value}"
    return value


def as_array(answer: Any, shape: tuple[int, ...]) -> np.ndarray | str:
    """Return ``answer`` as a finite float64 array of ``shape``, or a message saying why
    not."""
    if isinstance(answer, (str, bytes)):
        return f"expected an array of shape {shape}, got {type(answer).__name__}"
    try:
        raw = _to_numpy(answer)
        if np.iscomplexobj(raw):
            return f"expected a real array of shape {shape}, got complex numbers"
        array = raw.astype(np.float64)
    except Exception:  # noqa: BLE001
        # ragged lists, odd objects: a wrong answer, not a crash
        return f"expected an array of shape {shape}, got {type(answer).__name__}"
    if array.shape != shape:
        return f"expected an array of shape {shape}, got shape {array.shape}"
    if not np.all(np.isfinite(array)):
        return "The array contains NaN or infinite values"
    return array


def half_precision(answer: Any) -> str | None:
    """``"float16"`` or ``"bfloat16"`` if ``answer`` is held in half precision, else
    None."""
    name = str(getattr(answer, "dtype", "")).replace("torch.", "")
    return name if name in ("float16", "bfloat16") else None


def half_precision_message(dtype: str, tolerance: float) -> str:
    """Why a half-precision answer missed: its rounding exceeds the checker's
    tolerance."""
    step = {"float16": "5e-4", "bfloat16": "4e-3"}[dtype]
    return (
        f"Your answer is in {dtype}, which rounds each value by up to about {step} "
        f"relative, more than the tolerance {tolerance:g}: compute it in float32 or "
        "float64 (a model may store it in half precision later)"
    )


def fold(message: str, width: int = 88) -> str:
    """``message`` broken into lines of at most ``width`` characters, counting the
    9-character prefix (``"Correct. "`` or ``"Not yet. "``) that :class:`Feedback` puts
    before it, so that a notebook showing the feedback never prints an over-long
    line."""
    prefix = len("Correct. ")
    return textwrap.fill(message, width, initial_indent=" " * prefix)[prefix:]
