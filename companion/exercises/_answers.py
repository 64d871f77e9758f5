"""Turning a learner's answer into a number or an array, or into a message saying why not.

Checkers accept Python numbers, NumPy values and tensors alike, and never raise on a
wrong type: a function here returns either the parsed value or a ``str`` message.
"""

from __future__ import annotations

import math
import numbers
import textwrap
from typing import Any

import numpy as np


def _to_numpy(answer: Any) -> np.ndarray:
    return np.asarray(answer.detach().cpu() if hasattr(answer, "detach") else answer)


def as_number(answer: Any) -> float | str:
    """Return ``answer`` as a finite float, or a message saying why it is not one."""
    if isinstance(answer, (bool, np.bool_)):
        return f"expected a number, got a boolean {answer!r}"
    if isinstance(answer, numbers.Real):
        value = float(answer)
    else:
        try:
            array = _to_numpy(answer)
        except Exception:  # noqa: BLE001 - any odd object is a wrong answer, not a crash
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
    """Return ``answer`` as a finite float64 array of ``shape``, or a message saying why not."""
    if isinstance(answer, (str, bytes)):
        return f"expected an array of shape {shape}, got {type(answer).__name__}"
    try:
        raw = _to_numpy(answer)
        if np.iscomplexobj(raw):
            return f"expected a real array of shape {shape}, got complex numbers"
        array = raw.astype(np.float64)
    except Exception:  # noqa: BLE001 - ragged lists, odd objects: a wrong answer, not a crash
        return f"expected an array of shape {shape}, got {type(answer).__name__}"
    if array.shape != shape:
        return f"expected an array of shape {shape}, got shape {array.shape}"
    if not np.all(np.isfinite(array)):
        return "The array contains NaN or infinite values"
    return array


def fold(message: str, width: int = 88) -> str:
    """``message`` broken into lines of at most ``width`` characters, counting the 9-character
    prefix (``"Correct. "`` or ``"Not yet. "``) that :class:`Feedback` puts before it, so that
    a notebook showing the feedback never prints an over-long line."""
    prefix = len("Correct. ")
    return textwrap.fill(message, width, initial_indent=" " * prefix)[prefix:]
