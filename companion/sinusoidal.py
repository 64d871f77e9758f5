"""Sinusoidal position encodings (Vaswani et al. 2017, section 3.5).

Notation: ``n`` positions, ``d`` features (even), pair index ``i`` with
``0 <= i < d/2``, inverse frequency ``w_i = base ** (-2i / d)``::

    PE[pos, 2i]     = sin(pos * w_i)
    PE[pos, 2i + 1] = cos(pos * w_i)

The field uses two layouts of the same numbers:

* ``"interleaved"``: the paper's order; the sine and cosine of frequency ``i`` sit at
  features ``2i`` and ``2i + 1``.
* ``"halves"``: all sines first, then all cosines; frequency ``i`` sits at features
  ``i`` and ``i + d/2`` (the order many libraries use).

:func:`interleaved_to_halves` is the permutation between them.

tensor2tensor's ``get_timing_signal_1d`` (and fairseq, which copies it) is *not* this
table permuted. It uses the halves layout, but it also spaces its frequencies
differently: its inverse timescales are ``exp(-i * log(max / min) / (d/2 - 1))``, so the
last one is exactly ``1 / 10000`` and the longest wavelength is exactly
``2 pi * 10000``, where the paper's exponent ``2i/d`` stops one step short. Its source
says the layout "slightly differs from the published paper".
:func:`tensor2tensor_timing_signal` reproduces it for comparison.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from companion import _checks

LAYOUTS = ("interleaved", "halves")


def inverse_frequencies(dim: int, *, base: float = 10000.0) -> np.ndarray:
    """Angular frequencies ``w_i = 1 / base ** (2i / dim)``, in radians per position.

    Args:
        dim: number of features ``d`` (even).
        base: the constant of the formula (10000 in the paper).

    Returns:
        float64 array ``(d/2,)``, decreasing from ``w_0 = 1``.
    """
    dim = _checks.even_int("dim", dim)
    base = _checks.base("base", base)
    i = np.arange(dim // 2, dtype=np.float64)
    return 1.0 / base ** (2.0 * i / dim)


def wavelengths(dim: int, *, base: float = 10000.0) -> np.ndarray:
    """Wavelengths ``2 pi / w_i = 2 pi * base ** (2i / dim)``, in positions.

    Returns:
        float64 array ``(d/2,)``, from ``2 pi`` up to ``2 pi * base ** ((d - 2) / d)``.
    """
    return 2.0 * np.pi / inverse_frequencies(dim, base=base)


def tensor2tensor_frequencies(
    dim: int, *, min_timescale: float = 1.0, max_timescale: float = 1.0e4
) -> np.ndarray:
    """Angular frequencies of tensor2tensor's ``get_timing_signal_1d``, in radians per
    position.

    This follows tensor2tensor's code, line for line, not its docstring:
    ``w_i = min_timescale * exp(-i * log(max_timescale / min_timescale) / max(d/2 - 1,
    1))``. The code *multiplies* by ``min_timescale`` where the docstring's "timescales
    from min to max" would divide, so the two agree only at ``min_timescale = 1`` (the
    default, and what the published models use): then the sequence runs from 1 to
    exactly ``1 / max_timescale``. With ``min_timescale = 2`` pair 0 turns at 2 radians
    per position, not 0.5.

    Args:
        dim: number of features ``d`` (even, at least 2).
        min_timescale: tensor2tensor's ``min_timescale``: pair 0's frequency, as its
            code uses it.
        max_timescale: tensor2tensor's ``max_timescale``.

    Returns:
        float64 array ``(d/2,)``, decreasing (one entry, ``min_timescale``, for
        ``d = 2``).
    """
    dim = _checks.even_int("dim", dim)
    low = _checks.real("min_timescale", min_timescale)
    high = _checks.real("max_timescale", max_timescale)
    if not 0.0 < low < high:
        raise ValueError(
            f"need 0 < min_timescale < max_timescale, got {low} and {high}; "
            "tensor2tensor uses 1.0 and 10000.0"
        )
    count = dim // 2
    step = np.log(high / low) / max(count - 1, 1)
    return low * np.exp(-step * np.arange(count, dtype=np.float64))


def tensor2tensor_timing_signal(
    num_positions: int,
    dim: int,
    *,
    min_timescale: float = 1.0,
    max_timescale: float = 1.0e4,
) -> np.ndarray:
    """tensor2tensor's timing signal: sines of all frequencies, then cosines.

    The frequencies are :func:`tensor2tensor_frequencies`, not the paper's.
    tensor2tensor pads an odd width with a column of zeros; this function does the same,
    so that the book can show that odd widths have no canonical answer.

    Args:
        num_positions: number of rows ``n`` (positions start at 0).
        dim: number of features ``d`` (at least 2; an odd ``d`` gets a zero last
            column).
        min_timescale: see :func:`tensor2tensor_frequencies`.
        max_timescale: see :func:`tensor2tensor_frequencies`.

    Returns:
        float64 array ``(n, d)``.
    """
    num_positions = _checks.positive_int("num_positions", num_positions)
    dim = _checks.positive_int("dim", dim)
    if dim < 2:
        raise ValueError(f"dim must be at least 2 (one sine and one cosine), got {dim}")
    w = tensor2tensor_frequencies(
        dim - dim % 2, min_timescale=min_timescale, max_timescale=max_timescale
    )
    angles = np.arange(num_positions, dtype=np.float64)[:, None] * w  # (n, d/2)
    pad = np.zeros((num_positions, dim % 2))                          # (n, 0 or 1)
    return np.concatenate([np.sin(angles), np.cos(angles), pad], axis=1)


def interleaved_to_halves(dim: int) -> np.ndarray:
    """Feature permutation ``perm`` with ``halves == interleaved[..., perm]``.

    Returns:
        int64 array ``(d,)``: ``[0, 2, 4, ..., d-2, 1, 3, ..., d-1]``.
    """
    dim = _checks.even_int("dim", dim)
    return np.concatenate([np.arange(0, dim, 2), np.arange(1, dim, 2)])


def sinusoidal_table(
    num_positions: int, dim: int, *, base: float = 10000.0, layout: str = "interleaved"
) -> np.ndarray:
    """The position table for positions ``0 .. num_positions - 1``.

    Args:
        num_positions: number of rows ``n`` (positions start at 0).
        dim: number of features ``d`` (even).
        base: the constant of the formula (10000 in the paper).
        layout: ``"interleaved"`` (sin at ``2i``, cos at ``2i + 1``, as in the paper) or
            ``"halves"`` (sin at ``i``, cos at ``i + d/2``).

    Returns:
        float64 array ``(n, d)``.
    """
    num_positions = _checks.positive_int("num_positions", num_positions)
    layout = _checks.choice("layout", layout, LAYOUTS)
    w = inverse_frequencies(dim, base=base)                       # (d/2,)
    angles = np.arange(num_positions, dtype=np.float64)[:, None] * w  # (n, d/2)
    table = np.empty((num_positions, dim), dtype=np.float64)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles)
    if layout == "halves":
        table = table[:, interleaved_to_halves(dim)]
    return table


def rotation_matrix(
    k: float, dim: int, *, base: float = 10000.0, layout: str = "interleaved"
) -> np.ndarray:
    """The matrix ``R(k)`` with ``PE[pos + k] = R(k) @ PE[pos]`` for every position.

    In the interleaved layout it is block diagonal, one 2x2 block per frequency::

        [[ cos(k w_i), sin(k w_i)],
         [-sin(k w_i), cos(k w_i)]]

    acting on ``(sin, cos)``; it depends on the offset ``k`` only, never on ``pos``.

    Args:
        k: the offset (any real number; negative moves backwards).
        dim: number of features ``d`` (even).
        base: the constant of the formula.
        layout: the layout of the vectors it acts on (see :func:`sinusoidal_table`).

    Returns:
        float64 array ``(d, d)``, orthogonal, with ``R(k) @ R(j) == R(k + j)``.
    """
    k = _checks.real("k", k)
    layout = _checks.choice("layout", layout, LAYOUTS)
    w = inverse_frequencies(dim, base=base)
    c, s = np.cos(k * w), np.sin(k * w)
    r = np.zeros((dim, dim), dtype=np.float64)
    even, odd = np.arange(0, dim, 2), np.arange(1, dim, 2)
    r[even, even], r[even, odd] = c, s
    r[odd, even], r[odd, odd] = -s, c
    if layout == "halves":
        perm = interleaved_to_halves(dim)
        r = r[np.ix_(perm, perm)]
    return r


class SinusoidalPositionalEncoding(nn.Module):
    """Adds the fixed sinusoidal table to a batch of embeddings.

    Args:
        max_len: number of positions the table holds; longer inputs are refused.
        dim: number of features ``d`` (even).
        base: the constant of the formula.
        layout: ``"interleaved"`` or ``"halves"``.

    ``forward(x)`` takes ``x`` of shape ``(batch, seq, dim)`` with ``seq <= max_len``
    and returns ``x + table[:seq]`` with the same shape and dtype.
    """

    def __init__(
        self,
        max_len: int,
        dim: int,
        *,
        base: float = 10000.0,
        layout: str = "interleaved",
    ):
        super().__init__()
        self.max_len = _checks.positive_int("max_len", max_len)
        self.dim = _checks.even_int("dim", dim)
        self.base = _checks.base("base", base)
        self.layout = _checks.choice("layout", layout, LAYOUTS)
        # A buffer follows .to(device) but is neither trained nor saved: it is a
        # formula.
        self.register_buffer("table", self._build_table(), persistent=False)

    def _build_table(self) -> torch.Tensor:
        # Kept in float64; forward casts it to the input's dtype. as_tensor follows the
        # default device, so a module built under torch.device("meta") holds a meta
        # table.
        table = sinusoidal_table(
            self.max_len, self.dim, base=self.base, layout=self.layout
        )
        return torch.as_tensor(table, device=torch.get_default_device())

    def reset_parameters(self) -> None:
        """Recompute the table in place, on its current device.

        A non-persistent buffer is not in a checkpoint, so a module built on the
        ``meta`` device and moved with ``to_empty()`` holds uninitialised memory until
        this runs.
        """
        with torch.device(self.table.device):
            self.table = self._build_table()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq = _checks.sequence_fits("x", x, max_len=self.max_len, dim=self.dim)
        return x + self.table[:seq].to(x.dtype)  # (b, s, d) + (s, d)

    def extra_repr(self) -> str:
        return (
            f"max_len={self.max_len}, dim={self.dim}, base={self.base}, "
            f"layout={self.layout!r}"
        )
