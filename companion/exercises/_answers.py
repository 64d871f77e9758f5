"""Turning a learner's answer into a number or an array, or into a message saying why
not, and comparing it with a checker's reference.

Checkers accept Python numbers (``Decimal`` and ``Fraction`` included), NumPy values and
tensors alike, and never raise on a wrong type: a function here returns either the
parsed value or a ``str`` message.

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
  tolerances. Such an answer is read and compared like any other (bfloat16 through
  float32, which holds it exactly); if it is not right within the tolerance, the
  checker says that it is in half precision and how to give it in float32 or float64
  (:func:`near_miss` for a float answer, :func:`half_precision_note`, added by the
  ``checker`` decorator, for the others).

Rounded answers
---------------
The one rule for an answer rounded by hand, as the prose or a solution prints it
("about 13,460", ``f"{x:.4f}"``), in :func:`close` and :func:`near_miss`:

* It is right when each entry is the reference rounded, or cut off, at the answer's own
  last digit, and that digit is at least the :data:`MIN_DIGITS`-th (4th) significant
  one. ``-1.2374`` for ``-1.23744``, ``13460`` or ``13459`` for ``13459.6`` pass; with 2
  or 3 such digits (``-1.24``, ``13500``; for an array, at least 2 in its finest
  entry) :func:`near_miss` says "Close: give more digits". A wrong answer stays wrong:
  4 significant digits are off by at most 1e-3 of the value (cut off; 5e-4 rounded),
  ten times less than every mistake a checker names (1% away or more,
  ``tests/test_exercises_dtypes.py``).
* An array is read as one rounding: to a number of decimals (``np.round(x, 4)``), or to
  a number of significant digits (``f"{v:.4g}"``). Entries already within the tolerance
  do not count.
* Significant digits are counted against the size the checker's tolerance uses: each
  entry's own size for a relative tolerance (with ``atol / rtol`` as the smallest size),
  the largest entry of the reference for an absolute one (a table of sines given to 4
  decimals has 4 significant digits).
* A float32 value counts with its own shortest digits (``float32(-1.2374)`` is -1.2374,
  not -1.2373999357...), also after ``.item()`` or ``.tolist()``. A half-precision
  answer is never read as rounded.
"""

from __future__ import annotations

import decimal
import fractions
import math
import numbers
import textwrap
import warnings
from typing import Any

import numpy as np

# Relative tolerance for a quantity a learner computes in float32: see "Tolerances"
# above.
FLOAT32_RTOL = 1e-5
# Significant digits a rounded answer must give to pass: see "Rounded answers" above.
MIN_DIGITS = 4
# Fewest significant digits (of its finest entry) for which a rounded right answer is
# told "Close".
_CLOSE_DIGITS = 2

_HALF = ("float16", "bfloat16")


class HalfArray(np.ndarray):
    """A float64 array read from a float16 or bfloat16 answer; ``source_dtype`` names
    it."""

    source_dtype: str | None = None

    def __array_finalize__(self, obj) -> None:
        self.source_dtype = getattr(obj, "source_dtype", None)


class HalfFloat(float):
    """A number read from a float16 or bfloat16 answer; ``source_dtype`` names it."""

    source_dtype: str | None = None


def _mark(value, half: str | None):
    """``value`` (a float64 array or a float) marked with its half-precision dtype."""
    if half is None:
        return value
    if isinstance(value, np.ndarray):
        value = value.view(HalfArray)
    else:
        value = HalfFloat(value)
    value.source_dtype = half
    return value


# ---- answers that are not there yet ------------------------------------------------

def unanswered(value: Any, who: str) -> str | None:
    """Why ``value`` is no answer yet, or None: it is still the student edition's
    ``...``, or it is ``None``. ``who`` names it in the message, e.g. ``"`rerun`"``."""
    if value is Ellipsis:
        return (
            f"You have not answered this exercise: {who} is still `...`, the "
            "placeholder of the student edition; replace it with your code"
        )
    if value is None:
        return (
            f"Expected an answer, but {who} is None: if a function computes it, that "
            "function returned None; did you forget `return`?"
        )
    return None


def returned_none(what: str = "Your function") -> str:
    """The message for a learner's function that returned None."""
    return f"{what} returned None: did you forget `return`?"


# ---- reading numbers ---------------------------------------------------------------

def _plain(value: Any, half: list) -> Any:
    """``value`` with tensors turned into NumPy arrays and ``Decimal`` and ``Fraction``
    into floats, inside lists and tuples too; ``half`` collects half-precision
    dtypes."""
    if hasattr(value, "detach") and hasattr(value, "dtype"):  # a torch tensor
        tensor = value.detach().cpu()
        name = str(tensor.dtype).replace("torch.", "")
        if name in _HALF:
            half.append(name)
        if name == "bfloat16":  # NumPy has no bfloat16; float32 holds it exactly
            tensor = tensor.float()
        if tensor.is_complex():
            tensor = tensor.resolve_conj()
        return tensor.resolve_neg().numpy()
    if isinstance(value, (list, tuple)):
        return [_plain(v, half) for v in value]
    if isinstance(value, (decimal.Decimal, fractions.Fraction)):
        return float(value)
    if getattr(value, "dtype", None) == np.float16:
        half.append("float16")
    return value


def _describe(value: Any) -> str:
    if callable(value) and not hasattr(value, "dtype"):
        return "a function (call it, and pass what it returns)"
    return type(value).__name__


def _read(answer: Any, expected: str) -> tuple[np.ndarray, str | None] | str:
    """``answer`` as a float64 array of any shape and its half-precision dtype, or a
    message "expected {expected}, got ..." saying why not."""
    if isinstance(answer, (str, bytes, dict, set, frozenset)) or answer is None:
        return f"expected {expected}, got {_describe(answer)}"
    if callable(answer) and not hasattr(answer, "dtype"):
        return f"expected {expected}, got {_describe(answer)}"
    half: list = []
    try:
        raw = np.asarray(_plain(answer, half))
    except Exception:  # noqa: BLE001 - ragged lists, odd objects: a wrong answer
        return f"expected {expected}, got {_describe(answer)}"
    items = raw.ravel() if raw.dtype == object else ()
    if raw.dtype.kind == "c" or any(
        isinstance(v, (complex, np.complexfloating)) for v in items
    ):
        if expected == "a number":
            return "expected a real number, got a complex number"
        return f"expected {expected} of real numbers, got complex numbers"
    if raw.dtype.kind not in "biufO" or any(isinstance(v, (str, bytes)) for v in items):
        return f"expected {expected}, got {_describe(answer)}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # e.g. a NumPy complex scalar in a list
            array = raw.astype(np.float64)
    except Exception:  # noqa: BLE001
        return f"expected {expected}, got {_describe(answer)}"
    return array, (half[0] if half else None)


def _overflow(half: str | None) -> str:
    """Why a half-precision answer may hold an infinity it was not computed as."""
    if half != "float16":
        return ""
    return (
        "; float16 holds numbers up to 65504 only: compute it in float32 or float64"
    )


def as_number(answer: Any) -> float | str:
    """Return ``answer`` as a finite float, or a message saying why it is not one.

    The float is a :class:`HalfFloat` if the answer was in half precision.
    """
    if isinstance(answer, (bool, np.bool_)):
        return f"expected a number, got a boolean {answer!r}"
    if isinstance(answer, numbers.Real) or isinstance(answer, decimal.Decimal):
        try:
            value, half = float(answer), None
        except (OverflowError, ValueError):
            return f"expected a finite number, got {answer}"
        if isinstance(answer, np.float16):
            half = "float16"
    else:
        read = _read(answer, "a number")
        if isinstance(read, str):
            return read
        array, half = read
        if array.size != 1:
            return f"expected a single number, got an array of shape {array.shape}"
        if str(getattr(answer, "dtype", "")).endswith("bool"):
            return f"expected a number, got a boolean {array.reshape(()) > 0}"
        value = float(array.reshape(()))
    if not math.isfinite(value):
        return f"expected a finite number, got {value}" + _overflow(half)
    return _mark(value, half)


def as_array(
    answer: Any, shape: tuple[int, ...] | None = None, *, finite: bool = True
) -> np.ndarray | str:
    """Return ``answer`` as a finite float64 array of ``shape`` (any shape if None; NaN
    and infinities allowed if ``finite`` is false), or a message saying why not.

    The array is a :class:`HalfArray` if the answer was in half precision.
    """
    expected = "an array" if shape is None else f"an array of shape {shape}"
    read = _read(answer, expected)
    if isinstance(read, str):
        return read
    array, half = read
    if shape is not None and array.shape != shape:
        return f"expected an array of shape {shape}, got shape {array.shape}"
    if finite and not np.all(np.isfinite(array)):
        return "The array contains NaN or infinite values" + _overflow(half)
    return _mark(array, half)


def as_bool(value: Any) -> bool | None:
    """``value`` as a bool if it is one: a Python, NumPy or 0-d torch boolean, or a
    one-element boolean array; else None."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if str(getattr(value, "dtype", "")).endswith("bool"):
        try:
            array = np.asarray(_plain(value, []))
        except Exception:  # noqa: BLE001
            return None
        if array.size == 1:
            return bool(array.reshape(()))
    return None


def half_precision(answer: Any) -> str | None:
    """``"float16"`` or ``"bfloat16"`` if ``answer`` is held in half precision (or was
    read from such an answer), else None."""
    name = getattr(answer, "source_dtype", None) or str(
        getattr(answer, "dtype", "")
    ).replace("torch.", "")
    return name if name in _HALF else None


def half_precision_note(answers: tuple) -> str:
    """For a wrong answer held in half precision, a sentence to add to the checker's
    message (which may come from the value as half precision rounded it), or ``""``."""
    dtype = next(filter(None, map(half_precision, answers)), None)
    if dtype is None:
        return ""
    step = {"float16": "5e-4", "bfloat16": "4e-3"}[dtype]
    return (
        f" (Your answer is in {dtype}, which rounds each value by up to about {step} "
        "relative: give it in float32 or float64.)"
    )


def half_precision_message(dtype: str, tolerance: float) -> str:
    """Why a half-precision answer missed: its rounding exceeds the checker's
    tolerance."""
    step = {"float16": "5e-4", "bfloat16": "4e-3"}[dtype]
    return (
        f"Your answer is in {dtype}, which rounds each value by up to about {step} "
        f"relative, more than the tolerance {tolerance:g}: compute it in float32 or "
        "float64 (a model may store it in half precision later)"
    )


# ---- comparing with a reference ----------------------------------------------------

def _pair(answer: Any, expected: Any) -> tuple[np.ndarray, np.ndarray] | None:
    try:
        a = np.asarray(answer, dtype=np.float64)
        b = np.asarray(expected, dtype=np.float64)
        return tuple(np.broadcast_arrays(a, b))
    except (TypeError, ValueError):
        return None


def _decimals(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each nonzero entry of ``x`` as written in the fewest decimal digits (in
    float32's digits if it is a float32 value): the value so written, and the place of
    its last digit (-4 for -1.2374, 1 for 13460)."""
    ax = np.abs(x)
    value, place = x.copy(), np.full(x.shape, np.nan)
    with np.errstate(all="ignore"):
        single = (ax < 1e38) & (x.astype(np.float32).astype(np.float64) == x)
        rel = np.where(single, 2.0**-24, 2.0**-48)
        lead = np.floor(np.log10(np.where(ax > 0, ax, 1.0)))
        for k in range(18):  # a float64 has at most 17 significant digits
            unit = 10.0 ** (lead - k)
            r = x / unit
            found = (
                np.isnan(place)
                & (ax > 0)
                & np.isfinite(r)
                & (np.abs(r - np.round(r)) <= rel * np.abs(r))
            )
            value = np.where(found, np.round(r) * unit, value)
            place = np.where(found, lead - k, place)
    return value, place


def _agrees(a: np.ndarray, b: np.ndarray, unit: np.ndarray) -> bool:
    """Whether each ``a`` is ``b`` rounded, or cut off, to a multiple of ``unit``."""
    off = np.abs(a - b)
    slack = 1e-9 * unit + 1e-15 * np.abs(b)
    rounded = off <= 0.5 * unit + slack
    cut = (a * b >= 0) & (np.abs(a) <= np.abs(b) + slack) & (off < unit + slack)
    return bool(np.all(rounded | cut))


def _rounding(answer: Any, expected: Any, rtol: float, atol: float):
    """``(digits, entry, most)`` if ``answer`` is ``expected`` rounded by hand (see
    "Rounded answers"): the significant digits of its coarsest entry, that entry's flat
    index, and the digits of its finest entry; None if it is not, or if it is within
    the tolerance anyway."""
    pair = _pair(answer, expected)
    if pair is None or half_precision(answer):
        return None
    a, b = (x.ravel() for x in pair)
    out = np.flatnonzero(~(np.abs(a - b) <= atol + rtol * np.abs(b)))
    biggest = float(np.abs(b).max()) if b.size else 0.0
    if out.size == 0 or biggest == 0 or not np.all(np.isfinite(a[out])):
        return None
    a, b = a[out], b[out]
    size = np.maximum(np.abs(b), atol / rtol) if rtol > 0 else np.full(b.shape, biggest)
    value, place = _decimals(a)
    nonzero = value != 0
    if not nonzero.any():
        return None
    with np.errstate(divide="ignore"):
        lead = np.floor(np.log10(np.abs(value)))  # -inf for 0
    finest = place[nonzero].min()
    most = (lead - place)[nonzero].max()  # significant digits, less one
    best = None
    for unit_place in (
        np.full(a.shape, finest),  # rounded to a number of decimals
        np.where(nonzero, lead - most, finest),  # to a number of significant digits
    ):
        if not _agrees(value, b, 10.0**unit_place):
            continue
        digits = np.maximum(np.floor(np.log10(size)), lead) - unit_place + 1
        # the coarsest entry; of those, the largest
        entry = int(np.argmin(digits - 1e-3 * np.minimum(np.abs(value) / biggest, 1)))
        if best is None or digits[entry] > best[0]:
            best = (int(digits[entry]), int(out[entry]), int(digits.max()))
    return best


def close(answer: Any, expected: Any, *, rtol: float = 0.0, atol: float = 0.0) -> bool:
    """Whether ``answer`` is ``expected``: every entry within ``atol + rtol *
    |expected|`` (NumPy's ``allclose``, broadcasting), or the reference rounded by hand
    to at least :data:`MIN_DIGITS` significant digits ("Rounded answers" above)."""
    pair = _pair(answer, expected)
    if pair is None:
        return False
    a, b = pair
    if bool(np.all(np.abs(a - b) <= atol + rtol * np.abs(b))):
        return True
    rounding = _rounding(answer, expected, rtol, atol)
    return rounding is not None and rounding[0] >= MIN_DIGITS


def near_miss(
    answer: Any, expected: Any, *, rtol: float = 0.0, atol: float = 0.0
) -> str | None:
    """For an answer that is not :func:`close` to ``expected``: the message if it is the
    right value in too coarse a form (rounded to 2 or 3 significant digits, or in half
    precision), else None. A checker asks it right after its right answer, with the
    same tolerance."""
    if close(answer, expected, rtol=rtol, atol=atol):
        return None
    half = half_precision(answer)
    if half is not None:
        return half_precision_message(half, rtol if rtol > 0 else atol)
    rounding = _rounding(answer, expected, rtol, atol)
    if rounding is None or rounding[2] < _CLOSE_DIGITS:  # "0" is not close to 0.3
        return None
    digits, entry, _ = rounding
    a = np.asarray(answer, dtype=np.float64)

    def shown(value: float) -> str:  # with its significant digits: -0.880, not -0.88
        return np.format_float_positional(
            value, precision=digits, unique=False, fractional=False, trim="k"
        ).rstrip(".")

    if a.ndim == 0:
        return (
            f"Close: give more digits. {shown(float(a))} is the right value rounded to "
            f"{digits} significant digits; give at least {MIN_DIGITS}, or store the "
            "computed value itself"
        )
    index = np.unravel_index(entry, a.shape)
    where = list(map(int, index)) if a.ndim > 1 else int(index[0])
    return (
        f"Close: give more digits. These are the right values rounded, to {digits} "
        f"significant digits in entry {where} ({shown(float(a[index]))}); give at "
        "least "
        f"{MIN_DIGITS} in every entry, or store the computed values themselves"
    )


def resolution(answer: Any) -> float:
    """The step of the digits ``answer`` is given in, at its largest entry: ``1e-4`` for
    entries rounded to 4 decimals, ``1e-3`` for ``2.345`` among entries rounded to 4
    significant digits, a float's rounding for computed values; 0 for an answer given
    to fewer than :data:`MIN_DIGITS` significant digits. A checker adds it to the
    tolerance of a check on a quantity derived from the answer (a product, a norm)."""
    a = np.asarray(answer, dtype=np.float64).ravel()
    a = a[np.isfinite(a) & (a != 0)]
    if a.size == 0:
        return 0.0
    place = _decimals(a)[1]
    lead = np.floor(np.log10(np.abs(a)))
    top = lead.max()
    steps = [
        10.0 ** unit_place
        for unit_place in (place.min(), top - (lead - place).max())  # decimals, digits
        if top - unit_place + 1 >= MIN_DIGITS
    ]
    return float(max(steps, default=0.0))


def counted(number: int, noun: str) -> str:
    """``"1 value"``, ``"2 values"``: ``noun`` is singular."""
    return f"{number} {noun}" + ("" if number == 1 else "s")


def count_off(count: int, total: int, noun: str) -> str:
    """``"1 of the 4 answers is off"``, ``"2 of the 4 answers are off"``."""
    return f"{count} of the {total} {noun} {'is' if count == 1 else 'are'} off"


def fold(message: str, width: int = 88) -> str:
    """``message`` broken into lines of at most ``width`` characters, counting the
    9-character prefix (``"Correct. "`` or ``"Not yet. "``) that :class:`Feedback` puts
    before it, so that a notebook showing the feedback never prints an over-long
    line."""
    prefix = len("Correct. ")
    return textwrap.fill(message, width, initial_indent=" " * prefix)[prefix:]
