"""Checkers for the exercises of chapter 12 (train short, test long)."""

from __future__ import annotations

import math

import numpy as np

from companion.data import MarkovChain
from companion.exercises._answers import as_array, as_bool, as_number, close, near_miss
from companion.exercises._feedback import Feedback, checker, wrong
from companion.exercises._feedback import right_folded as right
from companion.lab import SOURCE

__all__ = [
    "check_chunk_floor_16",
    "check_table2_flat_methods",
    "check_early_token_counts",
    "check_order_one_rerun",
]

# The parameters the exercise texts state.
FLOOR_CHUNK = 16
# The chunk's floor, in nats (about 1.4): a mean of exact entropies; a right answer
# rounded to 3 decimals passes.
_FLOOR_ATOL = 5e-4
TABLE2 = {
    "sinusoidal": (20.05, 132.41),
    "rotary": (20.07, 31.58),
    "t5": (19.65, 20.41),
    "alibi": (19.73, 18.41),
}
TOLERANCE_NATS = 0.05
STREAM_TOKENS, CHUNK_LENS = 8192, (32, 64, 128, 256)


@checker
def check_chunk_floor_16(answer) -> Feedback:
    """The lab chain's best mean loss on non-overlapping chunks of 16 tokens (nats per
    prediction)."""
    value = as_number(answer)
    if isinstance(value, str):
        return wrong(value)
    chain = MarkovChain(**SOURCE)
    floors = chain.optimal_loss_by_position(FLOOR_CHUNK)
    def near(x: float) -> bool:
        return close(value, x, atol=_FLOOR_ATOL)

    if near(floors.mean()):
        return right(
            "The first prediction of each chunk has a higher floor, so the chunk's "
            "floor is above the entropy rate."
        )
    miss = near_miss(value, floors.mean(), atol=_FLOOR_ATOL)
    if miss:
        return wrong(miss)
    if near(chain.entropy_rate()):
        return wrong(
            "That is the floor of a prediction with its full context. Does every "
            "prediction in a chunk have it?"
        )
    if near(chain.optimal_loss_by_position(FLOOR_CHUNK + 1).mean()) or near(
        chain.optimal_loss_by_position(FLOOR_CHUNK - 1).mean()
    ):
        return wrong(
            "Off by one: how many predictions does a chunk of 16 tokens contain?"
        )
    if near(floors.sum()):
        return wrong(
            "That is a total over the chunk; the question asks for the mean per "
            "predicted token."
        )
    if near(floors[0]):
        return wrong(
            "That is the floor of the first prediction only; average over all "
            "predictions of the chunk."
        )
    return wrong(
        "Not the chunk's floor. Which predictions of a chunk lack part of their "
        "context, and how many are there?"
    )


def _as_names(answer):
    """Return ``(set of lower-case names, None)`` or ``(None, Feedback)``."""
    if isinstance(answer, np.ndarray) and answer.ndim == 1 and answer.dtype.kind == "U":
        answer = answer.tolist()
    if isinstance(answer, (str, bytes)) or not isinstance(
        answer, (list, tuple, set, frozenset, dict)
    ):
        return None, wrong(
            f"expected a list or set of method names, got {type(answer).__name__}"
        )
    names = list(answer)
    if not all(isinstance(n, str) for n in names):
        return None, wrong("expected the method names as strings, e.g. 'sinusoidal'")
    cleaned = {n.strip().lower() for n in names}
    unknown = sorted(cleaned - set(TABLE2))
    if unknown:
        return None, wrong(
            f"unknown method name(s) {unknown}; use the names in the dict: "
            f"{sorted(TABLE2)}"
        )
    return cleaned, None


@checker
def check_table2_flat_methods(answer) -> Feedback:
    """Methods of Press et al.'s Table 2 at most 0.05 nats worse at 2512 tokens than at
    512."""
    names, problem = _as_names(answer)
    if problem is not None:
        return problem
    change = {
        m: math.log(long) - math.log(short) for m, (short, long) in TABLE2.items()
    }
    expected = {m for m, c in change.items() if c <= TOLERANCE_NATS}
    if names == expected:
        return right(
            "In nats: one method gets better, one loses a few hundredths, the other "
            "two lose far more."
        )
    if names == {
        m for m, (short, long) in TABLE2.items() if long - short <= TOLERANCE_NATS
    }:
        return wrong(
            "That compares perplexities. A loss in nats is the logarithm of a "
            "perplexity: compare logarithms."
        )
    if names == {m for m, c in change.items() if abs(c) <= TOLERANCE_NATS}:
        return wrong(
            "Getting better counts as staying within the tolerance: only a rise of the "
            "loss is a problem."
        )
    if names - expected:
        return wrong(
            f"Look again at {sorted(names - expected)}: how much does its loss rise "
            "from 512 to 2512 tokens?"
        )
    return wrong(
        "Some method that qualifies is missing: compute the change of ln(perplexity) "
        f"for each of {sorted(TABLE2)}."
    )


@checker
def check_early_token_counts(answer) -> Feedback:
    """Predictions with a floor above the entropy rate in 8192 tokens cut into chunks of
    32, 64, 128, 256."""
    counts = as_array(answer, finite=False)
    if isinstance(counts, str):
        return wrong(f"The answer is four counts: {counts}")
    if counts.shape != (len(CHUNK_LENS),):
        return wrong(
            f"expected an array of shape ({len(CHUNK_LENS)},), one count per chunk "
            f"length, got shape {counts.shape}"
        )
    if not np.all(np.isfinite(counts)):
        return wrong("The array contains NaN or infinite values")
    lens = np.array(CHUNK_LENS, dtype=np.float64)
    chunks = STREAM_TOKENS // lens
    # order 2: only prediction 1 (from token 0 alone) lacks context
    expected = chunks * 1
    if np.allclose(counts, expected, atol=1e-9):
        return right(
            "One context-starved prediction per chunk: longer chunks, fewer of them."
        )
    if np.allclose(counts, expected[::-1], atol=1e-9):
        return wrong("Right numbers, wrong order: give them for n = 32, 64, 128, 256.")
    if np.allclose(counts, 2 * chunks, atol=1e-9):
        return wrong(
            "Two per chunk is too many: the first token of a chunk is never predicted, "
            "and from which prediction on is the context complete?"
        )
    if np.allclose(counts, np.ones(len(lens)), atol=1e-9):
        return wrong("That is per chunk; the stream holds many chunks.")
    if np.allclose(counts, 1 / (lens - 1), atol=1e-6) or np.allclose(
        counts, 1 / lens, atol=1e-6
    ):
        return wrong(
            "Those look like fractions; the question asks how many predictions, in the "
            "whole stream."
        )
    if np.allclose(counts, chunks * (lens - 1), atol=1e-9):
        return wrong(
            "That counts every prediction; count only those whose floor is above the "
            "entropy rate."
        )
    return wrong(
        "Not the counts. How many chunks does the stream give, and how many "
        "predictions per chunk lack full context?"
    )


ORDER_ONE = {"vocab_size": 8, "order": 1, "seed": 0}
RERUN_SCHEMES, RERUN_SEEDS, RERUN_STEPS, CLOSE_NATS = (
    ("none", "alibi"),
    [0, 1, 2],
    150,
    0.05,
)


def _rerun_problem(rerun, name: str, order: int) -> str | None:
    """Why ``rerun`` is not the run the exercise asks for (None if it is)."""
    if not isinstance(rerun, dict) or not {"floor", "loss", "seeds", "history"} <= set(
        rerun
    ):
        return f"{name} should be the dict that lab.length_extrapolation(...) returns"
    floor = MarkovChain(**{**ORDER_ONE, "order": order}).entropy_rate()
    if not isinstance(rerun["floor"], float) or abs(rerun["floor"] - floor) > 1e-9:
        return (f"{name} did not use the order-{order} chain: pass "
                f"source=MarkovChain(8, {order}, seed=0)")
    if sorted(rerun["loss"]) != sorted(RERUN_SCHEMES):
        return (
            f"Train exactly the schemes {RERUN_SCHEMES} in {name}, got "
            f"{sorted(rerun['loss'])}"
        )
    if list(rerun["seeds"]) != RERUN_SEEDS:
        return f"Use seeds=(0, 1, 2) in {name}, got {list(rerun['seeds'])}"
    if np.shape(rerun["history"]["none"]) != (len(RERUN_SEEDS), RERUN_STEPS):
        return f"Train {name} for steps={RERUN_STEPS}"
    return None


def _keeps_up(rerun) -> bool:
    gaps = np.abs(
        np.asarray(rerun["loss"]["none"])[:, 0]
        - np.asarray(rerun["loss"]["alibi"])[:, 0]
    )
    return bool(np.all(gaps < CLOSE_NATS))


@checker
def check_order_one_rerun(rerun, control, answer) -> Feedback:
    """Whether order information is worth nothing on an order-1 chain, against an
    order-2 control.

    ``rerun`` and ``control`` are what ``lab.length_extrapolation`` returned for the
    order-1 and the order-2 chain, at the same short budget; ``answer`` is True if the
    model without positions is within 0.05 nats of ALiBi at L in every seed of ``rerun``
    but not of ``control``. It is checked against the learner's own numbers, which
    differ slightly between machines.
    """
    for run, name, order in ((rerun, "rerun", 1), (control, "control", 2)):
        problem = _rerun_problem(run, name, order)
        if problem is not None:
            return wrong(problem)
    if as_bool(answer) is None:
        return wrong(f"answer should be True or False, got {type(answer).__name__}")
    answer = as_bool(answer)
    order_one, order_two = _keeps_up(rerun), _keeps_up(control)
    truth = order_one and not order_two
    if bool(answer) == truth and truth:
        return right(
            "With order 1 the next token depends only on the current one, which every "
            "query sees as its own token: order information is worth nothing there, "
            "and the model without positions keeps up; on the order-2 chain, at the "
            "same budget, it does not."
        )
    if bool(answer) == truth:
        which = "the order-1 run" if not order_one else "the order-2 control"
        return right(
            f"Your runs say no ({which} decides it). At 150 steps, is either model "
            "done learning? Which tokens must a model find in each chain?"
        )
    return wrong(
        "Compare the two schemes' losses at L (column 0 of run['loss'][scheme]) seed "
        f"by seed, in both runs, and count a gap below {CLOSE_NATS} as within."
    )
