"""Argument checks shared by the public functions.

Each check raises ``TypeError`` for a value of the wrong kind and ``ValueError`` for
a value of the right kind but out of range; the message names the argument, what it
got and what to pass instead.
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Iterable

import torch


def default_float32() -> None:
    """Refuse to train when PyTorch's default dtype is not float32.

    The lab's helper processes start with PyTorch's defaults, so a run in a process
    whose default was changed would give numbers that depend on which process ran it.
    """
    if torch.get_default_dtype() != torch.float32:
        raise RuntimeError(
            "the lab trains in float32, but the default dtype is "
            f"{torch.get_default_dtype()}: call torch.set_default_dtype(torch.float32) "
            "first"
        )


def integer(name: str, value: Any) -> int:
    """Return ``value`` as an ``int``; bools and floats are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"{name} must be an integer, got {type(value).__name__} {value!r}"
        )
    return int(value)


def positive_int(name: str, value: Any) -> int:
    """Return ``value`` as an ``int`` that is at least 1."""
    value = integer(name, value)
    if value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value}")
    return value


def even_int(name: str, value: Any) -> int:
    """Return ``value`` as a positive even ``int`` (sin/cos and rotations work on
    pairs)."""
    value = positive_int(name, value)
    if value % 2:
        raise ValueError(
            f"{name} must be even because features come in (sin, cos) pairs, got "
            f"{value}; use {value - 1 if value > 1 else 2} or {value + 1}"
        )
    return value


def real(name: str, value: Any) -> float:
    """Return ``value`` as a finite ``float``; bools and non-numbers are refused."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"{name} must be a real number, got {type(value).__name__} {value!r}"
        )
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    return value


def base(name: str, value: Any) -> float:
    """Return a frequency base: a real number greater than 1."""
    value = real(name, value)
    if value <= 1.0:
        raise ValueError(
            f"{name} must be greater than 1 so that wavelengths grow with the feature "
            f"index, got {value}; the paper uses 10000.0"
        )
    return value


def probability(name: str, value: Any) -> float:
    """Return a probability in [0, 1)."""
    value = real(name, value)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value}")
    return value


def choice(name: str, value: Any, options: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``options``."""
    options = tuple(options)
    if value not in options:
        raise ValueError(
            f"{name} must be one of {', '.join(map(repr, options))}; got {value!r}"
        )
    return value


def tensor(name: str, value: Any, *, ndim: int, shape: str) -> torch.Tensor:
    """Return ``value`` if it is a floating-point tensor of rank ``ndim``.

    ``shape`` is the expected shape in words, e.g. ``"(batch, seq, dim)"``, for the
    message.
    """
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of shape {shape}, got "
            f"{type(value).__name__}"
        )
    if value.ndim != ndim:
        raise ValueError(
            f"{name} must have {ndim} dimensions {shape}, got shape "
            f"{tuple(value.shape)}"
            + (
                "; add a batch dimension with x.unsqueeze(0)"
                if value.ndim == ndim - 1
                else ""
            )
        )
    if not value.is_floating_point():
        raise TypeError(
            f"{name} must be a floating-point tensor, got dtype {value.dtype}"
        )
    return value


def sequence_fits(name: str, x: torch.Tensor, *, max_len: int, dim: int) -> int:
    """Check a ``(batch, seq, dim)`` input against a ``(max_len, dim)`` position table.

    Returns ``seq``. This is the check whose absence lets ``table[:seq]`` return fewer
    rows than the sequence has.
    """
    tensor(name, x, ndim=3, shape="(batch, seq, dim)")
    seq, features = x.shape[1], x.shape[2]
    if features != dim:
        raise ValueError(
            f"{name} has {features} features in its last dimension but the table has "
            f"dim={dim}"
        )
    if seq > max_len:
        raise ValueError(
            f"{name} has {seq} positions but the table has only max_len={max_len}; "
            f"build the module with max_len >= {seq}"
        )
    return seq
