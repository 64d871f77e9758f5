"""Rotary position embedding, RoPE (Su et al. 2021), and ways to stretch it.

Notation: ``s`` sequence, ``d`` features per head (even), pair index ``i < d/2``,
``theta_i = base ** (-2i / d)``. Position ``m`` rotates feature pair ``i`` of a query or
key by the angle ``m * theta_i``; the score ``q_m . k_n`` then depends on ``n - m``
only.

Two layouts pair the features differently:

* ``"interleaved"``: pairs ``(2i, 2i + 1)`` (RoFormer, GPT-J, Meta's LLaMA code; in
  ``transformers``, GLM-4, Cohere and Llama 4).
* ``"halves"``: pairs ``(i, i + d/2)`` (GPT-NeoX; in ``transformers``, Llama, Qwen and
  GLM-4.5).

The layout belongs to a checkpoint and the code that reads it, not to a library.

They are the same rotation after the feature permutation :func:`layout_permutation`;
weights trained with one layout are wrong under the other.

Angles ``m * theta_i`` are computed in float64 and cast to the input's dtype afterwards.
The libraries people port from (Hugging Face ``transformers``, Meta's LLaMA code)
compute them in float32, whose error grows like ``m * 2**-24`` radians (about 0.01 rad
at m = 100000); what must be avoided is computing them in bfloat16, where position 257
already rounds to 256.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch import nn

from companion import _checks
from companion.sinusoidal import LAYOUTS, interleaved_to_halves

#: The book's short scaling forms (``scaling={"type": ...}``); a ``transformers`` dict
#: with ``"rope_type"`` is read by :func:`companion.rope_config.from_rope_parameters`
#: instead.
SCALING_TYPES = ("linear", "ntk", "dynamic", "yarn", "llama3")
YARN_RAMPS = ("index", "rotations")


_SCALING_KEYS = {
    "linear": {"factor"},
    "ntk": {"factor"},
    "dynamic": {"factor", "original_max_len", "seq_len"},
    "yarn": {
        "factor",
        "original_max_len",
        "beta_fast",
        "beta_slow",
        "ramp",
        "truncate",
    },
    "llama3": {"factor", "original_max_len", "low_freq_factor", "high_freq_factor"},
}


def _pair_of_bounds(
    checked: dict, low: str, high: str, scaling: dict, defaults: tuple[float, float]
) -> None:
    checked[low] = _checks.real(f"scaling['{low}']", scaling.get(low, defaults[0]))
    checked[high] = _checks.real(f"scaling['{high}']", scaling.get(high, defaults[1]))
    if not 0 < checked[low] < checked[high]:
        raise ValueError(
            f"need 0 < {low} < {high}, got {checked[low]} and {checked[high]}"
        )


def _check_scaling(scaling: Any) -> dict | None:
    if scaling is None:
        return None
    if not isinstance(scaling, dict):
        raise TypeError(
            f"scaling must be None or a dict like {{'type': 'linear', 'factor': 2.0}}, "
            f"got {scaling!r}"
        )
    kind = _checks.choice("scaling['type']", scaling.get("type"), SCALING_TYPES)
    allowed = {"type"} | _SCALING_KEYS[kind]
    unknown = set(scaling) - allowed
    if unknown:
        raise ValueError(
            f"unknown scaling keys {sorted(unknown)} for type {kind!r}; allowed: "
            f"{sorted(allowed)}"
        )
    if "factor" not in scaling:
        raise ValueError(
            f"scaling of type {kind!r} needs a 'factor' (the length multiplier s)"
        )
    factor = _checks.real("scaling['factor']", scaling["factor"])
    if factor < 1.0:
        raise ValueError(
            "scaling['factor'] must be at least 1 (it stretches the context), got "
            f"{factor}"
        )
    checked = {"type": kind, "factor": factor}
    if "original_max_len" in _SCALING_KEYS[kind]:
        if "original_max_len" not in scaling:
            raise ValueError(
                f"{kind} scaling needs 'original_max_len', the length the model was "
                "trained at"
            )
        checked["original_max_len"] = _checks.positive_int(
            "scaling['original_max_len']", scaling["original_max_len"]
        )
    if kind == "dynamic":
        if "seq_len" not in scaling:
            raise ValueError(
                "dynamic scaling needs 'seq_len', the length of the sequence being run"
            )
        checked["seq_len"] = _checks.positive_int(
            "scaling['seq_len']", scaling["seq_len"]
        )
    if kind == "yarn":
        _pair_of_bounds(checked, "beta_slow", "beta_fast", scaling, (1.0, 32.0))
        checked["ramp"] = _checks.choice(
            "scaling['ramp']", scaling.get("ramp", "index"), YARN_RAMPS
        )
        truncate = scaling.get("truncate", True)
        if not isinstance(truncate, bool):
            raise TypeError(
                f"scaling['truncate'] must be True or False, got {truncate!r}"
            )
        if checked["ramp"] == "rotations" and "truncate" in scaling:
            raise ValueError(
                "scaling['truncate'] applies to ramp='index' only; remove it for "
                "ramp='rotations'"
            )
        checked["truncate"] = truncate
    if kind == "llama3":
        _pair_of_bounds(
            checked, "low_freq_factor", "high_freq_factor", scaling, (1.0, 4.0)
        )
    return checked


def _blend(theta: np.ndarray, s: float, keep: np.ndarray) -> np.ndarray:
    """``keep * theta + (1 - keep) * theta / s``: 1 keeps a pair's speed, 0 interpolates
    it."""
    return (1.0 - keep) * theta / s + keep * theta


def _yarn_index_ramp(dim: int, base: float, scaling: dict) -> np.ndarray:
    """``1 - ramp`` over the pair index, as the released YaRN code and ``transformers``
    compute it."""

    # the (fractional) pair that turns r times within L
    def pair_with_rotations(r: float) -> float:
        return (
            dim
            * math.log(scaling["original_max_len"] / (r * 2 * math.pi))
            / (2 * math.log(base))
        )

    low, high = (
        pair_with_rotations(scaling["beta_fast"]),
        pair_with_rotations(scaling["beta_slow"]),
    )
    if scaling["truncate"]:
        low, high = math.floor(low), math.ceil(high)
    # dim - 1, not dim/2 - 1: transformers' bound
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    ramp = np.clip((np.arange(dim // 2) - low) / (high - low), 0.0, 1.0)
    return 1.0 - ramp


def rope_frequencies(
    dim: int,
    *,
    base: float | None = None,
    scaling: dict | None = None,
    max_position_embeddings: int | None = None,
    seq_len: int | None = None,
) -> np.ndarray:
    """Rotation speeds ``theta_i`` in radians per position, after optional scaling.

    ``base`` defaults to 10000. ``scaling`` is one of the book's short forms below, or a
    ``transformers`` ``rope_parameters`` dict (it has a ``"rope_type"`` key; its
    ``rope_theta`` is the base), read by
    :func:`companion.rope_config.from_rope_parameters` with ``max_position_embeddings``
    and ``seq_len``, which only such a dict takes; that function also returns the
    attention factor.

    ``scaling`` (``s`` is ``factor``, ``L`` is ``original_max_len``, and
    ``r_i = L * theta_i / (2 pi)`` counts the turns of pair ``i`` within ``L``):

    * ``None``: ``theta_i = base ** (-2i/d)``.
    * ``{"type": "linear", "factor": s}``: position interpolation (Chen et al. 2023):
      every ``theta_i / s``, i.e. position ``m`` is run as ``m / s``.
    * ``{"type": "ntk", "factor": s}``: NTK-aware scaling: the base becomes
      ``base * s ** (d / (d - 2))``, so the fastest pair is unchanged and the slowest is
      divided by exactly ``s``.
    * ``{"type": "dynamic", "factor": s, "original_max_len": L, "seq_len": n}``: the
      ``"dynamic"`` rope type of ``transformers``: NTK with the factor
      ``s * max(n, L) / L - (s - 1)``, which is 1 up to ``n = L`` and grows with ``n``.
    * ``{"type": "yarn", "factor": s, "original_max_len": L}`` (Peng et al. 2023): pairs
      that turn more than ``beta_fast = 32`` times within ``L`` keep their speed, pairs
      that turn less than ``beta_slow = 1`` times are divided by ``s``, and a linear
      ramp blends the two in between,
      ``theta_i' = (1 - g_i) * theta_i / s + g_i * theta_i``. ``"ramp"`` says over which
      variable ``g`` is linear:

      - ``"index"`` (default): over the pair index ``i``, from ``floor`` of the pair
        with ``beta_fast`` turns to ``ceil`` of the pair with ``beta_slow`` turns
        (``"truncate": False`` keeps them fractional). This is the released YaRN code
        and ``transformers``' ``_compute_yarn_parameters``, which checkpoints were tuned
        with.
      - ``"rotations"``: over the turns, ``g_i = clip((r_i - beta_slow) / (beta_fast -
        beta_slow), 0, 1)``, as the paper's equation writes it.

      The attention temperature YaRN adds is separate: :func:`yarn_attention_scale`.
    * ``{"type": "llama3", "factor": s, "original_max_len": L, "low_freq_factor": f_lo,
      "high_freq_factor": f_hi}`` (Llama 3.1; defaults ``f_lo = 1``, ``f_hi = 4``):
      pairs with more than ``f_hi`` turns within ``L`` are kept, pairs with fewer than
      ``f_lo`` are divided by ``s``, and ``g_i = (r_i - f_lo) / (f_hi - f_lo)`` in
      between: the ramp over turns, with other thresholds and no temperature.

    Returns:
        float64 array ``(d/2,)``.
    """
    if isinstance(scaling, dict) and "rope_type" in scaling:
        from companion.rope_config import from_rope_parameters

        return from_rope_parameters(scaling, dim, base=base, seq_len=seq_len,
                                    max_position_embeddings=max_position_embeddings)[0]
    if max_position_embeddings is not None or seq_len is not None:
        raise ValueError(
            "max_position_embeddings and seq_len go with a transformers "
            "rope_parameters dict (one with 'rope_type'); the short forms carry their "
            "lengths in scaling"
        )
    dim = _checks.even_int("dim", dim)
    base = _checks.base("base", 10000.0 if base is None else base)
    scaling = _check_scaling(scaling)
    kind = None if scaling is None else scaling["type"]
    if dim == 2 and kind in ("ntk", "dynamic"):
        raise ValueError(f"{kind} scaling needs dim >= 4 (its exponent is d / (d - 2))")
    if kind == "ntk":
        base = base * scaling["factor"] ** (dim / (dim - 2))
    if kind == "dynamic":
        s, length = (
            scaling["factor"],
            max(scaling["seq_len"], scaling["original_max_len"]),
        )
        base = base * (s * length / scaling["original_max_len"] - (s - 1)) ** (
            dim / (dim - 2)
        )
    theta = 1.0 / base ** (2.0 * np.arange(dim // 2, dtype=np.float64) / dim)
    if kind in (None, "ntk", "dynamic"):
        return theta
    s = scaling["factor"]
    if kind == "linear":
        return theta / s
    if kind == "yarn" and scaling["ramp"] == "index":
        return _blend(theta, s, _yarn_index_ramp(dim, base, scaling))
    low, high = ((scaling["beta_slow"], scaling["beta_fast"]) if kind == "yarn"
                 else (scaling["low_freq_factor"], scaling["high_freq_factor"]))
    rotations = scaling["original_max_len"] * theta / (2 * np.pi)
    return _blend(theta, s, np.clip((rotations - low) / (high - low), 0.0, 1.0))


def yarn_attention_scale(factor: float) -> float:
    """YaRN's ``sqrt(1/t) = 0.1 ln(s) + 1`` (1 for ``s <= 1``).

    Multiply both the rotated queries and keys by it (equivalently, their cos and sin
    tables): the attention logits are then multiplied by its square, ``1/t``.
    """
    factor = _checks.real("factor", factor)
    if factor <= 0:
        raise ValueError(f"factor must be positive, got {factor}")
    return 1.0 if factor <= 1.0 else 0.1 * math.log(factor) + 1.0


def long_term_decay_bound(
    offsets: np.ndarray, dim: int, *, base: float = 10000.0
) -> np.ndarray:
    """RoFormer's bound on the score as a function of the offset (Su et al. 2021,
    3.4.3).

    With ``S_j = sum_{i < j} exp(1j * offset * theta_i)``, the score is at most
    ``max_i |h_{i+1} - h_i| * sum_j |S_j|``; this returns the factor the paper plots,
    ``(1 / (d/2)) * sum_{j=1}^{d/2} |S_j|``, for each offset.

    Args:
        offsets: array of relative distances ``m - n`` (any real numbers).
        dim: features per head ``d`` (even).

    Returns:
        float64 array of the same shape as ``offsets``; it equals ``(d/2 + 1) / 2`` at
        offset 0.
    """
    offsets = np.asarray(offsets)
    if offsets.dtype.kind not in "iuf":
        raise TypeError(
            f"offsets must be an array of real numbers, got dtype {offsets.dtype}"
        )
    theta = rope_frequencies(dim, base=base)
    phases = np.exp(1j * offsets.astype(np.float64)[..., None] * theta)  # (..., d/2)
    # S_1 .. S_{d/2}
    partial_sums = np.cumsum(phases, axis=-1)
    return np.abs(partial_sums).mean(axis=-1)


def layout_permutation(dim: int) -> np.ndarray:
    """Feature permutation ``perm``: ``apply_rope(x[..., perm], layout="halves")``
    equals ``apply_rope(x, layout="interleaved")[..., perm]``.

    It moves interleaved pair ``(2i, 2i + 1)`` to halves pair ``(i, i + d/2)``.
    """
    return interleaved_to_halves(dim)


def permute_qk_weights(
    weight: torch.Tensor, num_heads: int, *, to: str
) -> torch.Tensor:
    """Reorder the output features of a query or key projection between RoPE layouts.

    A checkpoint trained with one layout runs correctly with the other once the rows of
    ``W_Q`` and ``W_K`` (and their biases) are permuted within every head: then the
    rotated queries and keys are the old ones with permuted features, and every score
    ``q . k`` is unchanged.

    Args:
        weight: ``(h * d, in_features)`` weight of an ``nn.Linear``, or its ``(h * d,)``
            bias.
        num_heads: number of heads ``h``; ``d`` must be even.
        to: ``"halves"`` (from interleaved) or ``"interleaved"`` (from halves).

    Returns:
        A new tensor of the same shape.
    """
    if not isinstance(weight, torch.Tensor):
        raise TypeError(f"weight must be a torch.Tensor, got {type(weight).__name__}")
    if weight.ndim not in (1, 2):
        raise ValueError(
            "weight must be (h * d, in_features) or a (h * d,) bias, got shape "
            f"{tuple(weight.shape)}"
        )
    num_heads = _checks.positive_int("num_heads", num_heads)
    to = _checks.choice("to", to, LAYOUTS)
    if weight.shape[0] % num_heads:
        raise ValueError(
            f"num_heads={num_heads} must divide the {weight.shape[0]} output features "
            "of weight"
        )
    head_dim = _checks.even_int(
        "the head dimension (output features / num_heads)", weight.shape[0] // num_heads
    )
    perm = torch.from_numpy(layout_permutation(head_dim))
    if to == "interleaved":
        perm = torch.argsort(perm)
    index = (torch.arange(num_heads)[:, None] * head_dim + perm).flatten()
    return weight[index].clone()


def _check_positions(
    positions: Any,
    seq: int,
    *,
    name: str = "positions",
    against: str = "x",
    batch: int | None = None,
) -> torch.Tensor:
    """``positions`` as given, after checks: integer ``(seq,)``, or ``(batch, seq)`` if
    ``batch`` is given."""
    if positions is None:
        return torch.arange(seq)
    shapes = "(seq,)" if batch is None else "(seq,) or (batch, seq)"
    if not isinstance(positions, torch.Tensor):
        raise TypeError(
            f"{name} must be an integer torch.Tensor of shape {shapes}, got "
            f"{type(positions).__name__}"
        )
    if (
        positions.is_floating_point()
        or positions.is_complex()
        or positions.dtype == torch.bool
    ):
        raise TypeError(f"{name} must be integers, got dtype {positions.dtype}")
    if positions.shape == (seq,) or (
        batch is not None and positions.shape == (batch, seq)
    ):
        return positions
    if batch is None:
        raise ValueError(
            f"{name} must have shape (seq,) = ({seq},) to match {against}, got "
            f"{tuple(positions.shape)}"
        )
    raise ValueError(
        f"{name} must have shape (seq,) = ({seq},) to match {against}, or (batch, seq) "
        f"= ({batch}, {seq}) for one row of positions per batch element, got "
        f"{tuple(positions.shape)}"
    )


def _per_row(table: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Make cos/sin rows broadcast against ``x (b, ..., s, d)``: ``(s, d/2)`` is kept,
    and ``(b, s, d/2)`` (one row of positions per batch element) becomes
    ``(b, 1, .., 1, s, d/2)``."""
    if table.ndim == 2:
        return table
    return table.reshape(table.shape[0], *[1] * (x.ndim - 3), *table.shape[1:])


def _rotate(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str
) -> torch.Tensor:
    """Rotate pairs of ``x (..., s, d)`` by angles whose cos/sin broadcast to
    ``(..., s, d/2)``."""
    if layout == "interleaved":
        x1, x2 = x[..., 0::2], x[..., 1::2]
    else:
        x1, x2 = x.chunk(2, dim=-1)
    r1 = x1 * cos - x2 * sin
    r2 = x1 * sin + x2 * cos
    if layout == "interleaved":
        # (..., s, d/2, 2) -> (..., s, d)
        return torch.stack((r1, r2), dim=-1).flatten(-2)
    return torch.cat((r1, r2), dim=-1)


def _short_form(scaling: Any) -> Any:
    if isinstance(scaling, dict) and "rope_type" in scaling:
        raise ValueError(
            "a transformers rope_parameters dict (with 'rope_type') may rotate part of "
            "the head and scale cos and sin; read it with "
            "companion.rope_config.from_rope_parameters, or pass the book's short form "
            "here (e.g. {'type': 'yarn', 'factor': 4.0, 'original_max_len': L})"
        )
    return scaling


def _check_input(x: Any) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise TypeError(
            f"x must be a torch.Tensor of shape (..., seq, dim), got {type(x).__name__}"
        )
    if x.ndim < 2:
        raise ValueError(f"x must have shape (..., seq, dim), got {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    _checks.even_int("the last dimension of x", x.shape[-1])
    return x


def apply_rope(
    x: torch.Tensor,
    positions: torch.Tensor | None = None,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    scaling: dict | None = None,
) -> torch.Tensor:
    """Rotate each feature pair of ``x`` at position ``m`` by ``m * theta_i``.

    Args:
        x: ``(..., s, d)`` queries or keys (``d`` even), e.g. ``(b, h, s, d)``.
        positions: integer ``(s,)``, shared by every row; or ``(b, s)``, one row of
            positions per batch element (``x`` is then ``(b, ..., s, d)``, e.g. a padded
            batch); defaults to ``0 .. s-1``.
        base, scaling: as in :func:`rope_frequencies`.
        layout: ``"interleaved"`` or ``"halves"`` (see the module docstring).

    Returns:
        Tensor of the same shape and dtype as ``x``; every pair keeps its norm.
    """
    x = _check_input(x)
    layout = _checks.choice("layout", layout, LAYOUTS)
    positions = _check_positions(
        positions, x.shape[-2], batch=x.shape[0] if x.ndim >= 3 else None
    )
    theta = torch.from_numpy(
        rope_frequencies(x.shape[-1], base=base, scaling=_short_form(scaling))
    )
    # (s, d/2) or (b, s, d/2): float64 on purpose, on the CPU (MPS has no float64)
    angles = positions.cpu().to(torch.float64)[..., None] * theta
    cos, sin = (
        _per_row(angles.cos().to(x.dtype), x),
        _per_row(angles.sin().to(x.dtype), x),
    )
    return _rotate(x, cos.to(x.device), sin.to(x.device), layout)


class RotaryEmbedding(nn.Module):
    """RoPE as a ``qk_transform`` hook: ``forward(q, k, positions=None) -> (q, k)``.

    Keeps cos/sin tables for positions ``0 .. cached_len - 1`` as non-persistent buffers
    and rebuilds them, at least twice as long, when a later position arrives. The tables
    are always rebuilt from float64 speeds, even after ``.to(torch.bfloat16)``.

    Args:
        dim: features per head ``d`` (even).
        base, layout, scaling: as in :func:`apply_rope`.
        max_len: initial length of the cached tables.
        attention_scale: factor applied to the rotated queries and keys; use
            ``yarn_attention_scale(s)`` with YaRN scaling, 1.0 otherwise.
    """

    def __init__(
        self,
        dim: int,
        *,
        base: float = 10000.0,
        layout: str = "interleaved",
        scaling: dict | None = None,
        max_len: int = 256,
        attention_scale: float = 1.0,
    ):
        super().__init__()
        self.dim = _checks.even_int("dim", dim)
        # Multiplies the rotated q and k, so logits scale by its square (YaRN's
        # temperature).
        self.attention_scale = _checks.real("attention_scale", attention_scale)
        if self.attention_scale <= 0:
            raise ValueError(f"attention_scale must be positive, got {attention_scale}")
        self.layout = _checks.choice("layout", layout, LAYOUTS)
        # A plain array, so that casting the module (e.g. to bfloat16) cannot round the
        # speeds.
        self._theta64 = rope_frequencies(dim, base=base, scaling=_short_form(scaling))
        self.register_buffer(
            "theta", torch.from_numpy(self._theta64.copy()), persistent=False
        )
        self._build_cache(_checks.positive_int("max_len", max_len))

    @property
    def cached_len(self) -> int:
        return self.cos.shape[0]

    def _build_cache(self, length: int) -> None:
        theta = torch.from_numpy(self._theta64).to(self.theta.device)
        angles = (
            torch.arange(length, dtype=torch.float64, device=theta.device)[:, None]
            * theta
        )
        self.register_buffer("cos", angles.cos(), persistent=False)  # (cached_len, d/2)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def rotate(
        self, x: torch.Tensor, positions: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Rotate one tensor, e.g. new keys before they are cached.

        Args:
            x: ``(..., s, d)`` queries or keys, e.g. ``(b, h, s, d)``.
            positions: non-negative integers, ``(s,)`` shared by every row, or
                ``(b, s)`` with one row of positions per batch element (``x`` is then
                ``(b, ..., s, d)``); defaults to ``0 .. s-1``.

        Returns:
            Tensor of the same shape and dtype as ``x``.
        """
        x = _check_input(x)
        if x.shape[-1] != self.dim:
            raise ValueError(
                f"x has {x.shape[-1]} features per head but the embedding has "
                f"dim={self.dim}"
            )
        batch = x.shape[0] if x.ndim >= 3 else None
        positions = _check_positions(positions, x.shape[-2], batch=batch).to(
            self.theta.device
        )
        if positions.numel() and int(positions.min()) < 0:
            raise ValueError(
                "positions must be non-negative for the cached tables; use apply_rope "
                "for others"
            )
        needed = int(positions.max()) + 1 if positions.numel() else 0
        if needed > self.cached_len:
            self._build_cache(max(needed, 2 * self.cached_len))
        # (s, d/2) or (b, s, d/2)
        cos = (self.cos[positions] * self.attention_scale).to(x.dtype)
        sin = (self.sin[positions] * self.attention_scale).to(x.dtype)
        return _rotate(x, _per_row(cos, x), _per_row(sin, x), self.layout)

    def forward(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        positions: torch.Tensor | None = None,
        *,
        q_positions: torch.Tensor | None = None,
        k_positions: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rotate queries ``(..., q, d)`` and keys ``(..., k, d)``.

        Either ``positions`` (``(s,)``, shared; then ``q`` and ``k`` have the same
        length ``s``; default ``0 .. s-1``) or both ``q_positions`` ``(q,)`` and
        ``k_positions`` ``(k,)``, for queries and keys of different lengths (decoding
        with a cache). Each may also be ``(b, s)``, one row of positions per batch
        element (a padded or packed batch), with ``q`` and ``k`` of shape
        ``(b, ..., s, d)``.
        """
        q, k = _check_input(q), _check_input(k)
        separate = q_positions is not None or k_positions is not None
        if separate and positions is not None:
            raise ValueError(
                "pass either positions (shared by q and k) or q_positions and "
                "k_positions, not both"
            )
        if separate:
            if q_positions is None or k_positions is None:
                raise ValueError(
                    "pass both q_positions and k_positions (one (seq,) tensor each)"
                )
            batch = q.shape[0] if q.ndim >= 3 else None
            _check_positions(
                q_positions, q.shape[-2], name="q_positions", against="q", batch=batch
            )
            _check_positions(
                k_positions, k.shape[-2], name="k_positions", against="k", batch=batch
            )
            return self.rotate(q, q_positions), self.rotate(k, k_positions)
        if q.shape[-2] != k.shape[-2]:
            raise ValueError(
                "q and k must have the same length to share positions, got "
                f"{q.shape[-2]} and {k.shape[-2]}; pass q_positions and k_positions "
                "for different lengths"
            )
        positions = _check_positions(
            positions, q.shape[-2], batch=q.shape[0] if q.ndim >= 3 else None
        )
        return self.rotate(q, positions), self.rotate(k, positions)
