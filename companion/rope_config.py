"""RoPE as ``transformers`` configurations write it: the ``rope_parameters`` dict.

A model's ``config.json`` describes its rotary embedding with a dict such as
``{"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
"original_max_position_embeddings": 4096}``; ``transformers`` 5 keeps it as
``config.rope_parameters`` (older configs call it ``rope_scaling`` and its first key
``type``). :func:`from_rope_parameters` reads such a dict and returns what
``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS[rope_type]`` returns for it:
the rotation speeds ``theta_i`` and the attention factor that multiplies the cos and
sin tables. It covers every rope type there in ``transformers`` 5.24 (``linear``,
``dynamic``, ``yarn``, ``longrope``, ``llama3``, ``proportional``) and ``default``, the
plain speeds (as GPT-NeoX computes them; Llama's ignores ``partial_rotary_factor``).

Two values a rope type may need are not in the dict but elsewhere in the config:
``max_position_embeddings`` (``dynamic`` always; ``yarn`` when ``factor`` is
``None``, ``longrope`` when it is absent or ``None``) and, for ``dynamic`` and
``longrope``, ``seq_len``, the length being run.

The library computes in float32, this module in float64: they agree to a relative
2e-6. The book's own short forms (``{"type": "yarn", "original_max_len": L, ...}``) are
those of :func:`companion.rope.rope_frequencies`, which passes a dict with
``"rope_type"`` here.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from companion import _checks

ROPE_TYPES = (
    "default",
    "linear",
    "dynamic",
    "yarn",
    "longrope",
    "llama3",
    "proportional",
)

_COMMON = {"rope_type", "type", "rope_theta", "partial_rotary_factor"}
#: Keys some configurations write into the dict that no rope type's speeds read (their
#: classes list them in ``ignore_keys_at_rope_validation``): Ministral 3's and Mistral
#: 4's query temperature ``llama_4_scaling_beta`` and their copy of
#: ``max_position_embeddings``, and M-RoPE's sections. Accepted with every rope type,
#: and ignored, as ``transformers`` ignores them; any other unknown key is refused.
NOT_ROPE = {
    "llama_4_scaling_beta",
    "max_position_embeddings",
    "mrope_section",
    "mrope_interleaved",
}
#: The keys each rope type reads (the library's required and optional keys for it).
KEYS = {
    "default": _COMMON,
    "linear": _COMMON | {"factor"},
    "dynamic": _COMMON | {"factor"},
    "yarn": _COMMON
    | {
        "factor",
        "original_max_position_embeddings",
        "attention_factor",
        "beta_fast",
        "beta_slow",
        "mscale",
        "mscale_all_dim",
        "truncate",
    },
    "longrope": _COMMON
    | {
        "short_factor",
        "long_factor",
        "original_max_position_embeddings",
        "attention_factor",
        "factor",
    },
    "llama3": _COMMON
    | {
        "factor",
        "original_max_position_embeddings",
        "low_freq_factor",
        "high_freq_factor",
    },
    "proportional": _COMMON | {"factor"},
}


def _rope_type(params: Any) -> str:
    if not isinstance(params, dict):
        raise TypeError(
            "rope_parameters must be a dict like "
            f"{{'rope_type': 'linear', 'factor': 2.0}}, "
            f"got {params!r}"
        )
    kind = params.get("rope_type", params.get("type"))
    if kind is None:
        raise ValueError(
            "rope_parameters needs 'rope_type' (older configs: 'type'), one of "
            f"{', '.join(ROPE_TYPES)}"
        )
    if (
        "rope_type" in params
        and "type" in params
        and params["type"] != params["rope_type"]
    ):
        raise ValueError(
            f"rope_parameters has 'rope_type' {params['rope_type']!r} and 'type' "
            f"{params['type']!r}; keep one"
        )
    kind = _checks.choice("rope_parameters['rope_type']", kind, ROPE_TYPES)
    unknown = set(params) - KEYS[kind] - NOT_ROPE
    if unknown:
        raise ValueError(
            f"rope_type {kind!r} does not read {sorted(unknown)}; it reads "
            f"{sorted(KEYS[kind])} (a misspelt key would be ignored silently)"
        )
    return kind


def _required(params: dict, key: str, kind: str, what: str) -> Any:
    if params.get(key) is None:
        raise ValueError(f"rope_type {kind!r} needs rope_parameters['{key}'], {what}")
    return params[key]


def _factor(
    params: dict, kind: str, max_position_embeddings: int | None, original: int | None
) -> float:
    """``factor``; for yarn's ``None`` and longrope's absent or ``None``, the ratio."""
    if kind == "yarn" and "factor" not in params:
        raise ValueError(
            "rope_type 'yarn' needs the key rope_parameters['factor'] (transformers "
            "refuses a yarn dict without it); set it to None to use the ratio "
            "max_position_embeddings / original_max_position_embeddings"
        )
    if params.get("factor") is None and kind in ("yarn", "longrope"):
        if max_position_embeddings is None:
            raise ValueError(
                f"rope_type {kind!r} without 'factor' needs max_position_embeddings: "
                "the factor is then max_position_embeddings / "
                "original_max_position_embeddings"
            )
        return max_position_embeddings / original
    if params.get("factor") is None and kind == "proportional":
        return 1.0
    factor = _checks.real(
        "rope_parameters['factor']",
        _required(params, "factor", kind, "the length multiplier s"),
    )
    if factor <= 0:
        raise ValueError(f"rope_parameters['factor'] must be positive, got {factor}")
    return factor


def _speeds(base: float, dim: int, over: int | None = None) -> np.ndarray:
    """``base ** (-2i / over)`` for ``2i < dim``; ``over = dim`` by default."""
    return 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / (over or dim))


def _mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn(
    params: dict, base: float, dim: int, factor: float, original: int
) -> tuple[np.ndarray, float]:
    attention = params.get("attention_factor")
    if attention is None:
        mscale, all_dim = params.get("mscale"), params.get("mscale_all_dim")
        # Both set (and non-zero): DeepSeek's ratio; otherwise YaRN's 0.1 ln s + 1.
        attention = (
            _mscale(factor, mscale) / _mscale(factor, all_dim)
            if mscale and all_dim
            else _mscale(factor)
        )
    beta_fast = _checks.real(
        "rope_parameters['beta_fast']", params.get("beta_fast") or 32
    )
    beta_slow = _checks.real(
        "rope_parameters['beta_slow']", params.get("beta_slow") or 1
    )

    def pair_with(
        turns: float,
    ) -> float:  # the fractional pair index that turns `turns` times
        return dim * math.log(original / (turns * 2 * math.pi)) / (2 * math.log(base))

    low, high = pair_with(beta_fast), pair_with(beta_slow)
    if params.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    keep = 1.0 - np.clip((np.arange(dim // 2) - low) / (high - low), 0.0, 1.0)
    theta = _speeds(base, dim)
    return theta / factor * (1.0 - keep) + theta * keep, float(attention)


def _longrope(
    params: dict,
    base: float,
    dim: int,
    factor: float,
    original: int,
    seq_len: int | None,
) -> tuple[np.ndarray, float]:
    pairs = len(range(0, dim, 2))
    chosen = (
        "long_factor" if seq_len is not None and seq_len > original else "short_factor"
    )
    factors = {}
    for key in ("short_factor", "long_factor"):
        value = np.asarray(
            _required(
                params, key, "longrope", f"a list of {pairs} numbers, one per pair"
            ),
            dtype=np.float64,
        )
        if value.shape != (pairs,):
            raise ValueError(
                f"rope_parameters['{key}'] needs {pairs} numbers (one per rotated "
                "pair of a "
                f"{dim}-dimensional rotary head), got shape {value.shape}"
            )
        factors[key] = value
    attention = params.get("attention_factor")
    if attention is None:
        attention = (
            1.0
            if factor <= 1.0
            else math.sqrt(1 + math.log(factor) / math.log(original))
        )
    return _speeds(base, dim) / factors[chosen], float(attention)


def _llama3(
    params: dict, base: float, dim: int, factor: float, original: int
) -> np.ndarray:
    low = _checks.real(
        "rope_parameters['low_freq_factor']",
        _required(params, "low_freq_factor", "llama3", "1 in Llama 3.1"),
    )
    high = _checks.real(
        "rope_parameters['high_freq_factor']",
        _required(params, "high_freq_factor", "llama3", "4 in Llama 3.1"),
    )
    if not 0 < low < high:
        raise ValueError(
            f"need 0 < low_freq_factor < high_freq_factor, got {low} and {high}"
        )
    theta = _speeds(base, dim)
    wavelength = 2 * math.pi / theta
    scaled = np.where(wavelength > original / low, theta / factor, theta)
    smooth = (original / wavelength - low) / (high - low)
    medium = (wavelength >= original / high) & (wavelength <= original / low)
    return np.where(medium, (1 - smooth) * scaled / factor + smooth * scaled, scaled)


def from_rope_parameters(
    rope_parameters: dict,
    head_dim: int,
    *,
    base: float | None = None,
    max_position_embeddings: int | None = None,
    seq_len: int | None = None,
) -> tuple[np.ndarray, float]:
    """Rotation speeds and attention factor of a ``transformers`` rope_parameters dict.

    Args:
        rope_parameters: the config's dict (see the module docstring); its
            ``rope_theta`` is the base, and ``partial_rotary_factor`` ``p`` rotates
            ``int(p * head_dim)`` features.
        head_dim: features per attention head.
        base: the base, for a dict without ``rope_theta`` (default 10000); giving both
            with different values is an error.
        max_position_embeddings: the config's value (``dynamic``; ``yarn`` with
            ``factor`` None, ``longrope`` without ``factor``).
        seq_len: the length being run: ``dynamic`` grows its base past
            ``max_position_embeddings``; ``longrope`` uses ``long_factor`` past
            ``original_max_position_embeddings`` and ``short_factor`` otherwise.

    Returns:
        ``(theta, attention_factor)``: float64 ``(r/2,)`` speeds for
        ``r = int(p * head_dim)`` rotated features (``proportional``: ``(head_dim/2,)``,
        zeros for the unrotated pairs), and the float that multiplies cos and sin (1 for
        most types).
    """
    kind = _rope_type(rope_parameters)
    head_dim = _checks.positive_int("head_dim", head_dim)
    theta_in = rope_parameters.get("rope_theta")
    if theta_in is not None and base is not None and float(theta_in) != float(base):
        raise ValueError(
            f"rope_parameters['rope_theta'] is {theta_in} but base is {base}; pass one"
        )
    base = _checks.base(
        "rope_parameters['rope_theta']",
        theta_in if theta_in is not None else 10000.0 if base is None else base,
    )
    p = _checks.real(
        "rope_parameters['partial_rotary_factor']",
        rope_parameters.get("partial_rotary_factor", 1.0),
    )
    if not 0 < p <= 1:
        raise ValueError(
            f"rope_parameters['partial_rotary_factor'] must be in (0, 1], got {p}"
        )
    dim = int(head_dim * p)
    if dim < 2:
        raise ValueError(
            f"int(partial_rotary_factor * head_dim) = {dim} rotates no pair; "
            "raise partial_rotary_factor or head_dim"
        )
    if max_position_embeddings is not None:
        max_position_embeddings = _checks.positive_int(
            "max_position_embeddings", max_position_embeddings
        )
    if seq_len is not None:
        seq_len = _checks.positive_int("seq_len", seq_len)
    original = None
    if "original_max_position_embeddings" in KEYS[kind] and kind != "default":
        original = _checks.positive_int(
            "rope_parameters['original_max_position_embeddings']",
            _required(
                rope_parameters,
                "original_max_position_embeddings",
                kind,
                "the length the model was trained at",
            ),
        )
    if kind == "default":
        return _speeds(base, dim), 1.0
    factor = _factor(rope_parameters, kind, max_position_embeddings, original)
    if kind == "linear":
        return _speeds(base, dim) / factor, 1.0
    if kind == "proportional":
        rotated = int(p * head_dim // 2)
        theta = np.zeros(head_dim // 2)
        theta[:rotated] = _speeds(base, 2 * rotated, over=head_dim)
        return theta / factor, 1.0
    if kind == "dynamic":
        if max_position_embeddings is None:
            raise ValueError(
                "rope_type 'dynamic' needs max_position_embeddings, the length past "
                "which "
                "its base grows"
            )
        if dim < 3:
            raise ValueError(
                "rope_type 'dynamic' needs a rotary dimension of at least 3 "
                "(its exponent is d / (d - 2))"
            )
        n = max(seq_len or max_position_embeddings, max_position_embeddings)
        grown = base * (factor * n / max_position_embeddings - (factor - 1)) ** (
            dim / (dim - 2)
        )
        return _speeds(grown, dim), 1.0
    if kind == "yarn":
        return _yarn(rope_parameters, base, dim, factor, original)
    if kind == "longrope":
        return _longrope(rope_parameters, base, dim, factor, original, seq_len)
    return _llama3(rope_parameters, base, dim, factor, original), 1.0
