"""Checkers for the exercises of chapter 17 (how to choose a position scheme)."""

from __future__ import annotations

import decimal
import math
import numbers

import numpy as np

from companion.alibi import alibi_slopes
from companion.exercises._answers import as_array, as_number, close, near_miss
from companion.exercises._feedback import Feedback, checker, wrong
from companion.exercises._feedback import right_folded as right

__all__ = [
    "check_position_parameters",
    "check_kv_cache_entries",
    "check_scheme_for_requirement",
]

# The exercises' fixed data, as the statements in chapter 17 give them.
BERT_LARGE = {"positions": 512, "width": 1024, "base_width": 768, "type_vocab": 2}
T5_LARGE = {"heads": 16, "buckets": 32, "layers": 24, "stacks": 2, "width": 1024}
LLAMA31_8B = {"layers": 32, "heads": 32, "kv_heads": 8, "head_dim": 128, "tokens": 4096}
REQUIREMENT = {"trained": 2048, "served": 8192, "heads": 8}
# ALiBi's share of attention on far tokens, a sum of exponentials: float32 gets it
# within a few 1e-7 relative.
_SHARE_RTOL = 1e-3
TABLE2_8512 = {
    "sinusoidal": (20.05, 305.65),
    "rope": (20.07, 54.98),
    "t5": (19.65, 43.08),
    "alibi": (19.73, 18.34),
}


def _integer(value) -> int | None:
    """``value`` as an int if it is a whole number (int, integral float, 0-d array),
    else None."""
    if isinstance(value, (bool, np.bool_)) or str(getattr(value, "dtype", "")).endswith(
        "bool"
    ):
        return None
    if hasattr(value, "detach") or isinstance(value, np.ndarray):
        value = as_array(value)
        if isinstance(value, str) or value.size != 1:
            return None
        value = value.reshape(()).item()
    if isinstance(value, decimal.Decimal):
        value = as_number(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if (
        isinstance(value, numbers.Real)
        and math.isfinite(value)
        and float(value).is_integer()
    ):
        return int(value)
    return None


def _pair(answer, what: str):
    """``(first, second)`` from a tuple, list or array of two items, or
    ``(None, Feedback)``."""
    if isinstance(answer, np.ndarray) or hasattr(answer, "detach"):
        answer = as_array(answer, finite=False)
        answer = answer.tolist() if not isinstance(answer, str) else answer
    if (
        isinstance(answer, (str, bytes, dict))
        or not isinstance(answer, (tuple, list))
        or len(answer) != 2
    ):
        return None, wrong(f"expected a pair {what}, got {type(answer).__name__}")
    return tuple(answer), None


@checker
def check_position_parameters(answer) -> Feedback:
    """Exercise ch17-position-params: (BERT-large's learned table, T5-large's relative
    biases)."""
    pair, problem = _pair(answer, "(bert, t5) of two integers")
    if problem is not None:
        return problem
    bert, t5 = (_integer(x) for x in pair)
    if bert is None or t5 is None:
        return wrong("expected two whole numbers of parameters, (bert, t5)")
    b, t = BERT_LARGE, T5_LARGE
    right_bert = b["positions"] * b["width"]
    right_t5 = t["stacks"] * t["buckets"] * t["heads"]
    if (bert, t5) == (right_bert, right_t5):
        return right(
            f"{right_bert:,} for BERT-large's table against {right_t5:,} for all of "
            "T5's biases: one table per stack, one number per bucket and head."
        )
    if (t5, bert) == (right_bert, right_t5):
        return wrong("Both numbers are right but swapped: give (bert, t5).")
    if bert != right_bert:
        if bert == b["positions"] * b["base_width"]:
            return wrong("That is BERT-base's table: BERT-large is 1024 wide.")
        if bert == b["positions"] * b["width"] + b["type_vocab"] * b["width"]:
            return wrong(
                "Token-type (segment) embeddings are not positions: count the position "
                "table only."
            )
        return wrong(
            "The BERT number is off: a learned table has one trained vector per "
            "position."
        )
    if t5 == t["buckets"] * t["heads"]:
        return wrong(
            "T5 has one bias table per stack: the encoder's and the decoder's."
        )
    if t5 in (
        t["stacks"] * t["layers"] * t["buckets"] * t["heads"],
        t["layers"] * t["buckets"] * t["heads"],
    ):
        return wrong(
            "Each stack computes its bias once, in its first layer, and shares it with "
            "the others."
        )
    if t5 in (t["stacks"] * t["buckets"] * t["width"], t["buckets"] * t["width"]):
        return wrong(
            "T5's bias is one scalar per bucket and head, not a vector of the model's "
            "width."
        )
    return wrong(
        "The T5 number is off: how many buckets, heads and tables does the relative "
        "bias have?"
    )


@checker
def check_kv_cache_entries(answer) -> Feedback:
    """Exercise ch17-kv-cache: numbers a Llama-3.1-8B-shaped cache holds for 4096
    tokens."""
    value = _integer(answer)
    if value is None:
        number = as_number(answer)
        return wrong(
            number
            if isinstance(number, str)
            else "expected a whole number of cached entries"
        )
    c = LLAMA31_8B
    per_layer_token = c["kv_heads"] * c["head_dim"]
    expected = 2 * c["layers"] * per_layer_token * c["tokens"]
    if value == expected:
        return right(
            f"{expected:,} numbers: keys and values, for each layer, key-value head "
            "and token. RoPE, ALiBi or a learned table would not change it."
        )
    if value == 2 * expected:
        return wrong(
            "That is twice the count: bytes at 2 per entry (bfloat16), or query heads "
            "where the cache keeps only the key-value heads."
        )
    if value == 4 * expected:
        return wrong(
            "Grouped-query attention caches keys and values for the 8 key-value heads "
            "only, not for all 32 query heads."
        )
    if value * 2 == expected:
        return wrong(
            "The cache holds keys and values: two numbers per feature, not one."
        )
    if value == expected // c["layers"]:
        return wrong("That is one layer: every layer keeps its own keys and values.")
    if value == expected // c["tokens"]:
        return wrong("That is per token: multiply by the 4096 tokens of the sequence.")
    if value > expected and (value - expected) % c["tokens"] == 0:
        return wrong(
            "Positions add nothing to the cache: RoPE rotates the keys it stores, the "
            "others store none. Count keys and values only."
        )
    return wrong(
        "Not the count. Multiply: 2 (key, value) x layers x key-value heads x head "
        "dimension x tokens."
    )


def _alibi_far_share(nearest: int, served: int, heads: int) -> float:
    """Softmax weight of the last of ``served`` queries, under the flattest ALiBi head's
    bias and equal content scores, on the keys at distance ``nearest`` or more."""
    m = float(alibi_slopes(heads).min())
    # the last query's distance to every key
    distances = np.arange(served, dtype=np.float64)
    weights = np.exp(-m * distances)
    return float(weights[nearest:].sum() / weights.sum())


@checker
def check_scheme_for_requirement(answer) -> Feedback:
    """Exercise ch17-requirement: the scheme Table 2 supports, and ALiBi's weight on far
    tokens."""
    pair, problem = _pair(answer, "(scheme, share)")
    if problem is not None:
        return problem
    scheme, share = pair
    if not isinstance(scheme, str):
        return wrong("The first item is the scheme's name as a string, e.g. 'rope'.")
    scheme = scheme.strip().lower()
    if scheme not in TABLE2_8512:
        return wrong(f"Choose one of {sorted(TABLE2_8512)}.")
    if scheme != "alibi":
        short, long = TABLE2_8512[scheme]
        return wrong(
            f"Table 2 has {scheme} at perplexity {long} at 8512 tokens against {short} "
            "at 512: without fine-tuning it does not keep its quality on longer "
            "inputs."
        )
    value = as_number(share)
    if isinstance(value, str):
        return wrong(f"The second item is the share, a number: {value}")
    r = REQUIREMENT
    expected = _alibi_far_share(r["served"] - r["trained"], r["served"], r["heads"])
    if close(value, expected, rtol=_SHARE_RTOL):
        return right(
            f"ALiBi, and its flattest head puts about one part in {1 / expected:.1e} "
            "of its attention "
            "on the first 2048 tokens at equal content scores: it runs, but it does "
            "not look that far."
        )
    miss = near_miss(value, expected, rtol=_SHARE_RTOL)
    if miss:
        return wrong(miss)
    if value == 0:
        return wrong(
            "0 is what the steepest head gives (or float32 rounding); use the flattest "
            "head, slope 2^-8."
        )
    # 2048 of 8192, no bias
    if close(value, r["trained"] / r["served"], rtol=_SHARE_RTOL):
        return wrong(
            "That is the share without any bias; ALiBi subtracts m times the distance."
        )
    if close(value, 1 - expected, rtol=_SHARE_RTOL):
        return wrong(
            "That is the share of the most recent 6144 tokens; the question asks about "
            "the first 2048."
        )
    far = r["served"] - r["trained"]  # distance of the nearest of the first 2048 tokens
    for m in alibi_slopes(r["heads"])[:-1]:  # every head but the flattest
        weights = np.exp(-m * np.arange(r["served"], dtype=np.float64))
        if value > 0 and close(
            value, weights[far:].sum() / weights.sum(), rtol=_SHARE_RTOL
        ):
            return wrong(
                f"That is the head with slope {m:g}; the flattest head, slope 2^-8, "
                "looks farthest."
            )
    return wrong(
        "Not the share. The last query sits at position 8191; the first 2048 tokens "
        "are 6144 to 8191 tokens away. Sum their softmax weights under the flattest "
        "head's bias."
    )
