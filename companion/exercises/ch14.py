"""Checkers for the exercises of chapter 14 (stretching a trained RoPE model)."""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from companion.exercises._answers import as_array, as_bool, as_number, close, near_miss
from companion.exercises.ch08 import ntk_base_feedback
from companion.exercises._feedback import Feedback, checker, wrong
from companion.exercises._feedback import right_folded as right

__all__ = [
    "check_tiny_yarn_gamma",
    "check_ntk_base_head16",
    "check_best_zero_shot_at_4x",
    "check_small_base_rerun",
]

_BASE = 10000.0
# The parameters the exercise texts state.
HEAD_DIM, TRAIN_LEN, BETA_FAST, BETA_SLOW = 16, 32, 32.0, 1.0
NTK_FACTOR = 4
_GAMMA_RTOL, _GAMMA_ATOL = 1e-6, 1e-9
# The zero-shot losses printed in exercise ch14-best-at-4x.
ZERO_SHOT = {"none": {2: 1.71, 4: 1.98, 8: 2.40}, "linear": {2: 1.69, 4: 1.83, 8: 1.95},
             "ntk": {2: 1.66, 4: 1.88, 8: 2.13}, "yarn": {2: 1.70, 4: 1.85, 8: 1.93}}
_ALIASES = {
    "linear": "linear",
    "pi": "linear",
    "position interpolation": "linear",
    "interpolation": "linear",
    "ntk": "ntk",
    "ntk-aware": "ntk",
    "yarn": "yarn",
    "none": "none",
    "no scaling": "none",
}


def _speeds(dim: int, base: float = _BASE) -> np.ndarray:
    return base ** (-2.0 * np.arange(dim // 2) / dim)


def _gamma(rotations: np.ndarray) -> np.ndarray:
    return np.clip((rotations - BETA_SLOW) / (BETA_FAST - BETA_SLOW), 0.0, 1.0)


def _as_vector(answer: Any, size: int) -> np.ndarray | str:
    """Return ``answer`` as a float64 vector of ``size`` entries, or a message saying
    why not."""
    array = as_array(answer, (size,))
    if isinstance(array, str) and "NaN" in array:
        return "expected finite numbers, got nan or inf"
    return array


def _same(values: np.ndarray, target: np.ndarray) -> bool:
    """Weights in [0, 1]: float32 gets them within a few 1e-7 relative."""
    return close(values, target, rtol=_GAMMA_RTOL, atol=_GAMMA_ATOL)


@checker
def check_tiny_yarn_gamma(answer: Any) -> Feedback:
    """Exercise ch14-yarn-gamma: YaRN's blend weight per pair for d = 16, L = 32, beta
    32 / 1."""
    values = _as_vector(answer, HEAD_DIM // 2)
    if isinstance(values, str):
        return wrong(values)
    rotations = TRAIN_LEN * _speeds(HEAD_DIM) / (2 * math.pi)
    target = _gamma(rotations)
    if _same(values, target):
        on_ramp = int(np.sum(target > 0))
        return right(
            f"Only {on_ramp} pairs are on the ramp, with weights {target[0]:.3f} and "
            f"{target[1]:.3f}; no pair is kept, so the paper's YaRN is close to "
            "position interpolation for this model (the library's ramp, over pair "
            "indices, keeps pair 0)."
        )
    miss = near_miss(values, target, rtol=_GAMMA_RTOL, atol=_GAMMA_ATOL)
    if miss:
        return wrong(miss)
    unclipped = (rotations - BETA_SLOW) / (BETA_FAST - BETA_SLOW)
    if _same(values, unclipped):
        return wrong(
            "some of your weights are negative: a pair with fewer than beta_slow turns "
            "is simply interpolated, so gamma is limited to the range [0, 1]."
        )
    if _same(values, _gamma(TRAIN_LEN * _speeds(HEAD_DIM))):
        return wrong(
            "the thresholds count full turns within L, not radians: one turn is 2*pi "
            "radians."
        )
    if _same(values, 1.0 - target):
        return wrong(
            "gamma is the weight of the original speed: 1 means the pair is kept, 0 "
            "that it is fully interpolated."
        )
    if _same(values, target[::-1]):
        return wrong(
            "the order is reversed: pair 0 is the fastest, so it has the most turns."
        )
    if np.any(values < 0) or np.any(values > 1):
        return wrong("a blend weight lies between 0 and 1.")
    return wrong(
        "count the turns of each pair within the trained length, L * theta_i / (2*pi), "
        "and place them between beta_slow (weight 0) and beta_fast (weight 1) on a "
        "straight line."
    )


@checker
def check_ntk_base_head16(answer: Any) -> Feedback:
    """Exercise ch14-ntk-base: the NTK-aware base for d = 16 and s = 4 (original base
    10000)."""
    return ntk_base_feedback(answer, HEAD_DIM, NTK_FACTOR)


@checker
def check_best_zero_shot_at_4x(answer: Any) -> Feedback:
    """Exercise ch14-best-at-4x: the method with the lowest zero-shot loss at 4L in the
    printed dict."""
    if not isinstance(answer, str):
        return wrong(
            "expected the method's key as a string, such as 'none', got "
            f"{type(answer).__name__}"
        )
    method = _ALIASES.get(answer.strip().lower())
    if method is None:
        return wrong(f"expected one of the keys {sorted(ZERO_SHOT)}, got {answer!r}")
    best = min(ZERO_SHOT, key=lambda m: ZERO_SHOT[m][4])
    if method == best:
        return right(
            f"{best!r} has the lowest loss at 4L ({ZERO_SHOT[best][4]:.2f}); note that "
            "another method is best at 2L and a third at 8L, so a ranking holds for "
            "one length only."
        )
    if all(ZERO_SHOT[method][4] >= ZERO_SHOT[m][4] for m in ZERO_SHOT):
        return wrong("that is the highest loss at 4L; a lower loss is better.")
    for factor in (2, 8):
        if method == min(ZERO_SHOT, key=lambda m: ZERO_SHOT[m][factor]):
            return wrong(
                f"that method is best at {factor}L; the question asks about the column "
                "for factor 4."
            )
    return wrong(
        "compare the losses of the four methods at factor 4 and pick the lowest."
    )


# The rerun trains two seeds for 200 steps with rope_extension's own recipe (a constant
# rate after warm-up), to stay quick (one round on two cores); the chapter's recorded
# models trained for 1600 steps with a decaying rate.
SMALL_BASE, RERUN_SEEDS, RERUN_STEPS = 100.0, [0, 1], 200


@checker
def check_small_base_rerun(result, answer) -> Feedback:
    """A RoPE model with base 100, stretched 4 times: YaRN's kept pairs, and YaRN
    against PI.

    ``result`` is what ``lab.rope_extension(...)`` returned; ``answer`` is a pair
    ``(pairs YaRN keeps at full speed, YaRN below PI at 4L in every seed)``. The second
    part is checked against the learner's own numbers.
    """
    from companion.rope import rope_frequencies

    if not isinstance(result, dict) or not {
        "zero_shot",
        "seeds",
        "model_options",
        "factors",
    } <= set(result):
        return wrong("result should be the dict that lab.rope_extension(...) returns")
    if result["model_options"] != {"rope_base": SMALL_BASE}:
        return wrong(
            f"pass model_options={{'rope_base': {SMALL_BASE}}}, got "
            f"{result['model_options']}"
        )
    if list(result["seeds"]) != RERUN_SEEDS or list(result["factors"]) != [4]:
        return wrong("use seeds=(0, 1) and factors=(4,)")
    if result.get("steps") != RERUN_STEPS:
        return wrong(f"use steps={RERUN_STEPS}, as the exercise says")
    if not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return wrong("answer should be a pair: (number of kept pairs, True or False)")
    kept, better = answer
    scaling = {"type": "yarn", "factor": 4, "original_max_len": TRAIN_LEN}
    ratio = rope_frequencies(
        HEAD_DIM, base=SMALL_BASE, scaling=scaling
    ) / rope_frequencies(HEAD_DIM, base=SMALL_BASE)
    expected_kept = int(np.sum(np.isclose(ratio, 1.0)))
    value = as_number(kept)
    if isinstance(value, str) or value != expected_kept:
        return wrong(
            "Count the pairs whose speed YaRN leaves unchanged: compare "
            "rope_frequencies with and without the scaling, at base 100."
        )
    if as_bool(better) is None:
        return wrong(
            f"the second part should be True or False, got {type(better).__name__}"
        )
    better = as_bool(better)
    yarn, pi = (
        np.asarray(result["zero_shot"]["yarn"])[:, 0],
        np.asarray(result["zero_shot"]["linear"])[:, 0],
    )
    if bool(better) != bool(np.all(yarn < pi)):
        return wrong(
            "Compare result['zero_shot']['yarn'] with result['zero_shot']['linear'] "
            "seed by seed."
        )
    return right(
        f"YaRN keeps {expected_kept} pair(s) at full speed at base 100; pairs that "
        "keep their speed keep the angles between neighbours that the model learned."
    )
