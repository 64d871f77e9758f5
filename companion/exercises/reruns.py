"""The rerun exercises, verified by the grader: it trains the run the statement asks
for itself, and compares the learner's numbers with its own.

A learner's checker (``check_order_one_rerun`` and the two others) can only check that
the numbers it is given are consistent with the verdict; numbers made up by hand pass
it. The grader, in its own process, also calls :func:`verify`: each rerun is fully
specified by its statement (source, schemes, seeds, steps), every run seeds itself, so
the grader's run is the learner's run, up to the rounding of another CPU, which
training amplifies (``make lab-check`` allows 0.03 nats; this allows
:data:`TOLERANCE`). The grader's runs are kept for the rest of the grading process, so
a class costs one run per exercise.

Pure grading code: nothing here is called by the book's notebooks.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

# nats: how far a learner's loss may be from the grader's run of the same training
TOLERANCE = 0.05


@functools.lru_cache(maxsize=None)
def _order_one() -> tuple[dict, dict]:
    from companion import lab
    from companion.data import MarkovChain

    short = dict(schemes=("none", "alibi"), seeds=(0, 1, 2), steps=150, eval_lens=(32,))
    return (lab.length_extrapolation(**short, source=MarkovChain(8, 1, seed=0)),
            lab.length_extrapolation(**short, source=MarkovChain(8, 2, seed=0)))


@functools.lru_cache(maxsize=None)
def _position_dim() -> list:
    from companion import lab

    cat = ("sinusoidal", "concat", True)
    splits = ((*cat, {"position_dim": 8}), (*cat, {"position_dim": 24}))
    return lab.add_vs_concat(configs=splits, seeds=(0, 1, 2), steps=400)


@functools.lru_cache(maxsize=None)
def _small_base() -> dict:
    from companion import lab

    return lab.rope_extension(factors=(4,), seeds=(0, 1), steps=200, finetune_steps=0,
                              model_options={"rope_base": 100.0})


def _off(theirs: Any, ours: Any, what: str) -> str | None:
    try:
        theirs = np.asarray(theirs, dtype=np.float64)
    except (TypeError, ValueError):
        return f"{what} is not an array of losses"
    ours = np.asarray(ours, dtype=np.float64)
    if theirs.shape != ours.shape:
        return f"{what} has shape {theirs.shape}, the run gives {ours.shape}"
    gap = float(np.max(np.abs(theirs - ours)))
    if not np.isfinite(gap) or gap > TOLERANCE:
        return (f"{what} is not what this training gives: the grader ran it and got "
                f"losses up to {gap:.2f} nats away (more than {TOLERANCE})")
    return None


def _ch12(rerun, control, answer) -> str | None:
    ours = _order_one()
    pairs = ((rerun, ours[0], "rerun"), (control, ours[1], "control"))
    for theirs, mine, name in pairs:
        for scheme in ("none", "alibi"):
            problem = _off(theirs["loss"][scheme], mine["loss"][scheme],
                           f"{name}['loss']['{scheme}']")
            if problem:
                return problem
    return None


def _ch13(rows_8, rows_24, answer) -> str | None:
    ours = _position_dim()
    for theirs, dim, name in ((rows_8, 8, "rows_8"), (rows_24, 24, "rows_24")):
        mine = [r["loss"] for r in ours if r["options"]["position_dim"] == dim]
        problem = _off([r["loss"] for r in theirs], mine, f"the losses of {name}")
        if problem:
            return problem
    return None


def _ch14(result, answer) -> str | None:
    ours = _small_base()
    for scheme in ("yarn", "linear"):
        problem = _off(result["zero_shot"][scheme], ours["zero_shot"][scheme],
                       f"result['zero_shot']['{scheme}']")
        if problem:
            return problem
    return None


VERIFIERS = {"ch12-order-one": _ch12, "ch13-position-dim": _ch13,
             "ch14-small-base": _ch14}


def verify(label: str, *values: Any) -> str | None:
    """Why the learner's rerun is not the training it claims to be, or None.

    Call it only on values the exercise's checker accepted (their shapes and keys are
    then right)."""
    check = VERIFIERS.get(label)
    if check is None:
        return None
    try:
        return check(*values)
    except (KeyError, TypeError, IndexError) as err:
        return f"the rerun could not be compared with the grader's ({err!r})"
