"""Checkers for the exercises of chapter 13 (adding or concatenating positions)."""

from __future__ import annotations

import numbers

import numpy as np

from companion.exercises._feedback import Feedback, checker, wrong
from companion.exercises._feedback import right_folded as right

__all__ = [
    "check_widened_concat_parameters",
    "check_seed_spread_verdicts",
    "check_position_dim_rerun",
]

# The exercises' fixed data (stated in the exercise texts of chapter 13).
WIDENED = {
    "vocab_size": 8,
    "dim": 96,
    "position_dim": 32,
    "num_layers": 2,
    "max_len": 32,
}
# hypothetical losses of seeds 0, 1, 2, per pair: (configuration X, configuration Y)
SEED_PAIRS = {
    "A": ((1.712, 1.705, 1.714), (1.684, 1.679, 1.688)),
    "B": ((1.650, 1.671, 1.662), (1.641, 1.668, 1.655)),
}
VERDICTS = ("real", "within the spread")


def _describe(answer) -> str:
    shape = getattr(answer, "shape", None)
    kind = type(answer).__name__
    return f"{kind} of shape {tuple(shape)}" if shape is not None else kind


def _decoder_parameters(
    vocab: int, dim: int, layers: int, token_dim: int, table_rows: int, table_width: int
) -> int:
    """Parameters of the companion's TinyDecoder (MLP ratio 4, biases and LayerNorms
    included)."""
    layer = 12 * dim * dim + 13 * dim
    return (
        vocab * token_dim
        + table_rows * table_width
        + layers * layer
        + 2 * dim
        + dim * vocab
        + vocab
    )


@checker
def check_widened_concat_parameters(answer) -> Feedback:
    """Exercise ch13-widened-params: parameters of the concatenating model widened to
    D + D_pos."""
    if (
        hasattr(answer, "detach")
        and getattr(answer, "numel", lambda: 0)() == 1
        and not answer.is_floating_point()
    ):
        answer = answer.item()
    if (
        isinstance(answer, np.ndarray)
        and answer.size == 1
        and answer.dtype.kind in "iu"
    ):
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, numbers.Integral):
        return wrong(
            f"expected an integer number of parameters, got {_describe(answer)}"
        )
    value = int(answer)
    v, d, p, layers, rows = (
        WIDENED[k]
        for k in ("vocab_size", "dim", "position_dim", "num_layers", "max_len")
    )
    target = _decoder_parameters(v, d + p, layers, d, rows, p)
    added = _decoder_parameters(v, d, layers, d, rows, d)
    if value == target:
        return right(
            f"{value} parameters, {value / added:.2f} times the adding model's "
            f"{added}: every layer grows with the square of the width."
        )
    if value == added:
        return wrong(
            "that is the adding model, 96 wide; the twin is wider, and every layer "
            "after the embedding grows."
        )
    if value == 2 * added:
        return wrong(
            "doubling is a guess; a layer's weight matrices grow with the square of "
            "the width. Count them."
        )
    if value == _decoder_parameters(v, d, layers, d - p, rows, p):
        return wrong(
            "that is the model that splits a fixed width of 96; this one keeps all 96 "
            "token features."
        )
    if value == _decoder_parameters(
        v, d + p, layers, d + p, rows, p
    ) or value == _decoder_parameters(v, d + p, layers, d, rows, d + p):
        return wrong(
            "close: check the width of the token table and of the position table "
            "separately."
        )
    if value == target - rows * p:
        return wrong("close: a learned position table has parameters too.")
    return wrong(
        "build the twin with ModelConfig (combine='concat') at its full width, "
        "or count embeddings, layers, final norm and head by hand."
    )


def _verdict(x, y) -> str:
    """The lab's rule on the per-seed differences (see companion.lab.robust)."""
    from companion.lab import robust

    difference = np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)
    return (
        "real"
        if robust(difference, above=0) or robust(difference, below=0)
        else "within the spread"
    )


@checker
def check_seed_spread_verdicts(answer) -> Feedback:
    """Exercise ch13-real-or-not: the verdicts for pairs A and B under the chapter's
    rule."""
    if isinstance(answer, (str, bytes)) or not isinstance(answer, (list, tuple)):
        return wrong(
            "expected a list of two strings (the verdicts for A and B), got "
            f"{_describe(answer)}"
        )
    if len(answer) != 2 or not all(isinstance(a, str) for a in answer):
        return wrong(
            "expected exactly two strings, one verdict per pair, in the order A, B."
        )
    given = [" ".join(a.strip().lower().split()) for a in answer]
    if any(g not in VERDICTS for g in given):
        return wrong(f"each verdict must be one of {VERDICTS}.")
    target = [_verdict(*SEED_PAIRS[k]) for k in ("A", "B")]
    if given == target:
        return right(
            "both verdicts follow the rule: a difference is real when every seed's "
            "difference clears zero by at least twice the spread of the differences."
        )
    if given == target[::-1]:
        return wrong("the two verdicts are swapped: check the order A, B.")
    if all(g == "real" for g in given):
        return wrong(
            "every pair of means differs a little; the rule asks whether each seed's "
            "difference clears zero with a margin of twice the differences' spread."
        )
    return wrong(
        "take the difference X - Y seed by seed, then check that all of them lie on "
        "one side of zero, at least twice their spread (half their range) away from it."
    )


RERUN_SEEDS, RERUN_STEPS, RERUN_DIMS = [0, 1, 2], 400, (8, 24)


def _concat_parameters(position_dim: int) -> int:
    """Parameters of the lab's sinusoidal-concat model with this split (no table
    parameters)."""
    from companion.lab import MODEL

    width = MODEL["dim"]
    return _decoder_parameters(8, width, 2, width - position_dim, 0, 0)


def _rerun_problem(rows, position_dim: int) -> str | None:
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return (
            "each rerun should be a list of the rows that lab.add_vs_concat(...) "
            "returns"
        )
    if [r.get("seed") for r in rows] != RERUN_SEEDS:
        return (
            "use seeds=(0, 1, 2) and keep one split per list, got seeds "
            f"{[r.get('seed') for r in rows]}"
        )
    if any(
        (r.get("position"), r.get("combine"), r.get("scale"))
        != ("sinusoidal", "concat", True)
        for r in rows
    ):
        return "use the configuration ('sinusoidal', 'concat', True)"
    if any(len(r.get("history", ())) != RERUN_STEPS for r in rows):
        return f"train for steps={RERUN_STEPS}"
    if any(r.get("parameters") != _concat_parameters(position_dim) for r in rows):
        return (
            f"these rows do not have {position_dim} position features: give the "
            f"configuration the options {{'position_dim': {position_dim}}}, and keep "
            "only its rows in this list"
        )
    return None


@checker
def check_position_dim_rerun(rows_8, rows_24, answer) -> Feedback:
    """Sinusoidal concat with 8 and with 24 of the 32 features for positions: 'real' or
    'within the spread'?

    The verdict is checked against the learner's own two reruns, with the chapter's
    rule.
    """
    for rows, dim in ((rows_8, 8), (rows_24, 24)):
        problem = _rerun_problem(rows, dim)
        if problem:
            return wrong(f"rows_{dim}: {problem}")
    if answer not in VERDICTS:
        return wrong(f"answer should be one of {VERDICTS}, got {answer!r}")
    loss_8, loss_24 = ([r["loss"] for r in rows] for rows in (rows_8, rows_24))
    truth = _verdict(loss_8, loss_24)
    if answer == truth:
        return right(
            "Your verdict follows your runs. More features for positions leave fewer "
            "for tokens: the split is a trade, not a free gain."
        )
    return wrong(
        "Apply the chapter's rule to your two reruns: take the differences seed by "
        "seed and ask whether they clear zero by twice their spread, as lab.robust "
        "does."
    )
