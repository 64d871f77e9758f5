"""Checkers for the exercises of chapter 12 (adding or concatenating positions)."""

from __future__ import annotations

import numbers

import numpy as np

from companion.exercises._feedback import Feedback, right, wrong

__all__ = ["check_widened_concat_parameters", "check_seed_spread_verdicts"]

# The exercises' fixed data (stated in the exercise texts of chapter 12).
WIDENED = {"vocab_size": 8, "dim": 96, "position_dim": 32, "num_layers": 2, "max_len": 32}
SEED_PAIRS = {  # losses of three seeds, per pair: (configuration X, configuration Y)
    "A": ((1.702, 1.690, 1.711), (1.684, 1.679, 1.688)),
    "B": ((1.650, 1.671, 1.662), (1.641, 1.668, 1.655)),
}
VERDICTS = ("real", "within the spread")


def _describe(answer) -> str:
    shape = getattr(answer, "shape", None)
    kind = type(answer).__name__
    return f"{kind} of shape {tuple(shape)}" if shape is not None else kind


def _decoder_parameters(vocab: int, dim: int, layers: int, token_dim: int, table_rows: int, table_width: int) -> int:
    """Parameters of the companion's TinyDecoder (MLP ratio 4, biases and LayerNorms included)."""
    layer = 12 * dim * dim + 13 * dim
    return vocab * token_dim + table_rows * table_width + layers * layer + 2 * dim + dim * vocab + vocab


def check_widened_concat_parameters(answer) -> Feedback:
    """Exercise ch12-widened-params: parameters of the concatenating model widened to D + D_pos."""
    if hasattr(answer, "detach") and getattr(answer, "numel", lambda: 0)() == 1 and not answer.is_floating_point():
        answer = answer.item()
    if isinstance(answer, np.ndarray) and answer.size == 1 and answer.dtype.kind in "iu":
        answer = answer.item()
    if isinstance(answer, bool) or not isinstance(answer, numbers.Integral):
        return wrong(f"expected an integer number of parameters, got {_describe(answer)}")
    value = int(answer)
    v, d, p, layers, rows = (WIDENED[k] for k in ("vocab_size", "dim", "position_dim", "num_layers", "max_len"))
    target = _decoder_parameters(v, d + p, layers, d, rows, p)
    added = _decoder_parameters(v, d, layers, d, rows, d)
    if value == target:
        return right(f"{value} parameters, {value / added:.2f} times the adding model's {added}: "
                     "every layer grows with the square of the width.")
    if value == added:
        return wrong("that is the adding model, 96 wide; the twin is wider, and every layer after the embedding grows.")
    if value == 2 * added:
        return wrong("doubling is a guess; a layer's weight matrices grow with the square of the width. Count them.")
    if value == _decoder_parameters(v, d, layers, d - p, rows, p):
        return wrong("that is the model that splits a fixed width of 96; this one keeps all 96 token features.")
    if value == _decoder_parameters(v, d + p, layers, d + p, rows, p) or value == _decoder_parameters(v, d + p, layers, d, rows, d + p):
        return wrong("close: check the width of the token table and of the position table separately.")
    if value == target - rows * p:
        return wrong("close: a learned position table has parameters too.")
    return wrong("not yet: build the twin with ModelConfig (combine='concat') at its full width, "
                 "or count embeddings, layers, final norm and head by hand.")


def _verdict(x, y) -> str:
    (mx, sx), (my, sy) = [(float(np.mean(v)), float((np.max(v) - np.min(v)) / 2)) for v in (x, y)]
    overlap = mx - sx <= my + sy and my - sy <= mx + sx
    return "within the spread" if overlap else "real"


def check_seed_spread_verdicts(answer) -> Feedback:
    """Exercise ch12-real-or-not: the verdicts for pairs A and B under the chapter's rule."""
    if isinstance(answer, (str, bytes)) or not isinstance(answer, (list, tuple)):
        return wrong(f"expected a list of two strings (the verdicts for A and B), got {_describe(answer)}")
    if len(answer) != 2 or not all(isinstance(a, str) for a in answer):
        return wrong("expected exactly two strings, one verdict per pair, in the order A, B.")
    given = [" ".join(a.strip().lower().split()) for a in answer]
    if any(g not in VERDICTS for g in given):
        return wrong(f"each verdict must be one of {VERDICTS}.")
    target = [_verdict(*SEED_PAIRS[k]) for k in ("A", "B")]
    if given == target:
        return right("both verdicts follow the rule: compare the intervals mean +/- spread, not the means alone.")
    if given == target[::-1]:
        return wrong("the two verdicts are swapped: check the order A, B.")
    if all(g == "real" for g in given):
        return wrong("every pair of means differs a little; the rule asks whether the intervals mean +/- spread overlap.")
    return wrong("not yet: for each configuration take the mean and half the range of its three seeds, "
                 "then check whether the two intervals overlap.")
