"""Checkers for the exercises of chapter 11 (positions in current models)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from companion.exercises._answers import (
    FLOAT32_RTOL,
    as_array,
    as_number,
    close,
    counted,
    near_miss,
)
from companion.exercises._feedback import Feedback, checker, wrong
from companion.exercises._feedback import right_folded as right

__all__ = [
    "check_mrope_position_ids",
    "check_longrope_attention_factor",
    "check_mla_cache_entries",
]

# The exercises' fixed data, as the statements in chapter 11 give them.
MROPE = {"before": 2, "rows": 8, "cols": 6, "merge": 2, "after": 3}
LONGROPE = {"original": 8192, "longest": 65536}
MISTRAL4 = {"heads": 32, "latent": 256, "rope": 64, "nope": 64, "value": 128}

# The factor a is sqrt(1 + ln s / ln L): float32 logs and a square root get it within a
# few 1e-7 relative; the wrong factors the checker names are 1.7% off or more.
_FACTOR_RTOL = FLOAT32_RTOL
# A factor off in its 4th or 5th significant digit is within 1e-3 of the right one; the
# nearest wrong factor the checker names is 1.7% away.
_ROUNDED_RTOL = 1e-3


def _mrope_ids(
    after_at: int,
    *,
    offset: bool = True,
    swap: bool = False,
    by_column: bool = False,
    transposed_grid: bool = False,
) -> np.ndarray:
    """(3, s) ids of the exercise's prompt, with the variations a mistake makes."""
    p, m = MROPE["before"], MROPE["merge"]
    rows, cols = MROPE["rows"] // m, MROPE["cols"] // m
    if transposed_grid:  # read as 6 rows of 8 columns
        rows, cols = cols, rows
    start = p if offset else 0
    if by_column:
        cells = [(r, c) for c in range(cols) for r in range(rows)]
    else:
        cells = [(r, c) for r in range(rows) for c in range(cols)]
    image = [
        (p, start + (c if swap else r), start + (r if swap else c)) for r, c in cells
    ]
    text = [(i, i, i) for i in range(p)]
    tail = [(i, i, i) for i in range(after_at, after_at + MROPE["after"])]
    return np.array(text + image + tail, dtype=np.float64).T


def _shape(answer: Any) -> tuple[int, ...] | None:
    """The answer's shape (an array's, a tensor's or a nested list's), or None."""
    shape = getattr(answer, "shape", None)
    if shape is not None:
        return tuple(shape)
    try:
        return np.shape(answer)
    except (TypeError, ValueError):  # ragged lists and other odd objects
        return None


def _after_image() -> int:
    """Where the text after the image continues: p + max(H, W) / m."""
    return MROPE["before"] + max(MROPE["rows"], MROPE["cols"]) // MROPE["merge"]


def _mrope_truth() -> np.ndarray:
    return _mrope_ids(_after_image())


@checker
def check_mrope_position_ids(answer: Any) -> Feedback:
    """Exercise ch11-mrope-ids: the (t, h, w) ids of 2 text tokens, an image of 8 x 6
    patches merged 2 x 2, and 3 text tokens."""
    truth = _mrope_truth()
    if answer is None or isinstance(answer, (str, bytes, dict, set)):
        return wrong(
            f"expected an integer array of shape {truth.shape}, rows t, h, w; got "
            f"{type(answer).__name__}"
        )
    p, m = MROPE["before"], MROPE["merge"]
    unmerged = (3, p + MROPE["rows"] * MROPE["cols"] + MROPE["after"])
    shape = _shape(answer)
    if shape is not None and tuple(shape) == unmerged:
        return wrong(
            f"an array of shape {unmerged} has one token per patch; the vision encoder "
            f"merges {m} x {m} patches into one token, so the image has "
            f"{(MROPE['rows'] // m) * (MROPE['cols'] // m)} tokens"
        )
    if shape is not None and tuple(shape) == (3, 1, truth.shape[1]):
        return wrong(
            f"an array of shape {tuple(shape)} has get_rope_index's batch axis, "
            f"(3, batch, s); give the ids of the one prompt, shape {truth.shape} "
            "(answer[:, 0])"
        )
    if shape is not None and tuple(shape) == truth.shape[::-1]:
        return wrong(
            f"expected rows t, h, w: shape {truth.shape}; you gave {tuple(shape)}, "
            "one row per token (transpose it)"
        )
    ids = as_array(answer, truth.shape)
    if isinstance(ids, str):
        return wrong(ids)
    if not np.array_equal(ids, np.round(ids)):
        return wrong("position ids are whole numbers; some of yours are not")
    if np.array_equal(ids, truth):
        return right(
            "The image's 12 tokens share t = 2 and spread over h = 2..5 and w = 2..4; "
            "the text after it continues at 2 + max(8, 6)/2 = 6."
        )
    length = truth.shape[1]
    after_tokens = p + (MROPE["rows"] // m) * (MROPE["cols"] // m)
    mistakes = [
        (
            np.tile(np.arange(length, dtype=np.float64), (3, 1)),
            "these are plain RoPE positions, one per token on all three axes; an "
            "image's tokens share one t and spread over rows (h) and columns (w)",
        ),
        (
            _mrope_ids(_after_image(), swap=True),
            "rows and columns are swapped: h counts the rows of the image, w its "
            "columns",
        ),
        (
            _mrope_ids(_after_image(), transposed_grid=True),
            "rows and columns are swapped: the image has 8 rows and 6 columns of "
            "patches, so 4 rows and 3 columns of tokens",
        ),
        (
            _mrope_ids(_after_image(), by_column=True),
            "the image's tokens come row by row (all columns of row 0, then row 1), "
            "not column by column",
        ),
        (
            _mrope_ids(_after_image(), offset=False),
            "h and w of the image start at the image's first position p, like its t, "
            "not at 0",
        ),
        (
            _mrope_ids(after_tokens),
            "the image is right, but the text after it does not continue one position "
            "per image token: it continues at p + max(H, W)/m",
        ),
        (
            _mrope_ids(p + max(MROPE["rows"], MROPE["cols"])),
            "the text after the image continues at p + max(H, W)/m: divide the "
            "patches by the merge size",
        ),
    ]
    for ids_wrong, message in mistakes:
        if np.array_equal(ids, ids_wrong):
            return wrong(message)
    if np.array_equal(ids[:, :after_tokens], truth[:, :after_tokens]):
        start = _after_image()
        for shift in (-1, 1):
            if np.array_equal(ids, _mrope_ids(start + shift)):
                return wrong(
                    "the text and the image are right, but the text after the image "
                    "is off by one: it starts one past the image's largest position, "
                    f"{start - 1}, so at {start} = p + max(H, W)/m"
                )
        return wrong(
            "the text and the image are right; the text after the image starts at "
            "p + max(H, W)/m, one past the image's largest position, and goes on one "
            "position per token, the same on t, h and w"
        )
    if np.array_equal(ids[:, :p], truth[:, :p]) and np.array_equal(
        ids[0, p:after_tokens], truth[0, p:after_tokens]
    ):
        return wrong(
            "the text before the image and the image's t are right; check h and w of "
            "each image token (row by row, starting at p) and where the text after it "
            "continues"
        )
    return wrong(
        "text tokens get (p, p, p); an image at p gets t = p, h = p + row, w = p + "
        "column for its merged tokens, row by row; the text after it continues at "
        "p + max(H, W)/m"
    )


@checker
def check_longrope_attention_factor(answer: Any) -> Feedback:
    """Exercise ch11-longrope-factor: transformers' longrope factor on cos and sin for
    original_max_position_embeddings 8192 and max_position_embeddings 65536."""
    value = as_number(answer)
    if isinstance(value, str):
        return wrong(value)
    original, longest = LONGROPE["original"], LONGROPE["longest"]
    s = longest / original
    target = math.sqrt(1 + math.log(s) / math.log(original))

    def near(x: float) -> bool:
        return close(value, x, rtol=_FACTOR_RTOL)

    if near(target):
        return right(
            f"The factor is a = sqrt(1 + ln {s:.0f} / ln {original}) = sqrt(16/13) = "
            f"{target:.4f}, on cos and sin at every length."
        )
    miss = near_miss(value, target, rtol=_FACTOR_RTOL)
    if miss:
        return wrong(miss)
    if math.isclose(value, target, rel_tol=_ROUNDED_RTOL):
        return wrong(
            f"the formula is right, but {value:g} is rounded off in its last digits: "
            "compute a (math.sqrt, math.log) rather than rounding it by hand"
        )
    if near(0.1 * math.log(s) + 1):
        return wrong(
            "0.1 ln s + 1 is YaRN's factor; longrope's default is sqrt(1 + ln s / ln L)"
        )
    if near(1 + math.log(s) / math.log(original)):
        return wrong(
            "that is a squared, the factor on the rotated logits; the factor on cos "
            "and sin is its square root"
        )
    if near(math.sqrt(1 + math.log(s) / math.log(longest))):
        return wrong(
            "the denominator is ln L for the original length L = "
            "original_max_position_embeddings, not for max_position_embeddings"
        )
    if near(math.sqrt(1 + math.log(longest) / math.log(original))):
        return wrong(
            "the numerator is ln s for the ratio s = max_position_embeddings / "
            "original_max_position_embeddings, not ln max_position_embeddings"
        )
    if near(s):
        return wrong(
            "that is the stretch s itself; the factor on cos and sin grows only with "
            "its logarithm"
        )
    if near(1.0):
        return wrong(
            "a is 1 only when s <= 1; here s = 65536 / 8192, and transformers applies "
            "the factor at every length, short inputs included"
        )
    return wrong(
        "with no factor in the configuration, s = max_position_embeddings / "
        "original_max_position_embeddings; then a = sqrt(1 + ln s / ln L)"
    )


def _whole(value: Any) -> int | None:
    number = as_number(value)
    if isinstance(number, str) or number != round(number):
        return None
    return int(round(number))


def _pair(answer: Any) -> tuple[int, int] | str:
    """``(mla, per_head)`` as two whole numbers, or a message saying why not."""
    if isinstance(answer, (str, bytes, dict, set, frozenset)) or not hasattr(
        answer, "__len__"
    ):
        return f"expected a pair (mla, per_head), got {type(answer).__name__}"
    shape = getattr(answer, "shape", None)
    if shape is not None and len(shape) != 1:
        return f"expected a pair (mla, per_head), got an array of shape {tuple(shape)}"
    values = list(answer)
    if len(values) != 2:
        return f"expected a pair (mla, per_head), got {counted(len(values), 'value')}"
    counts = [_whole(v) for v in values]
    if None in counts:
        for number in map(as_number, values):
            if isinstance(number, str) and "complex" in number:
                return number
        return "expected two whole numbers of cached values, (mla, per_head)"
    return counts[0], counts[1]


@checker
def check_mla_cache_entries(answer: Any) -> Feedback:
    """Exercise ch11-mla-cache: numbers cached per token and layer by Mistral 4's MLA,
    and by every head's own key and value."""
    pair = _pair(answer)
    if isinstance(pair, str):
        return wrong(pair)
    mla, per_head = pair
    c = MISTRAL4
    right_mla = c["latent"] + c["rope"]
    right_heads = c["heads"] * (c["nope"] + c["rope"] + c["value"])
    if (mla, per_head) == (right_mla, right_heads):
        return right(
            f"MLA caches {right_mla} numbers per token and layer (a latent of "
            f"{c['latent']} and one rotated key of {c['rope']}), against {right_heads} "
            f"for every head's key and value: {right_mla / right_heads:.1%}."
        )
    if (mla, per_head) == (right_heads, right_mla):
        return wrong("the two numbers are swapped: MLA's cache is the small one")
    if mla == 512 + 64:
        return wrong(
            "576 is DeepSeek-V3's cache; read the sizes of Mistral4Config instead"
        )
    if mla != right_mla:
        if mla == c["latent"]:
            return wrong(
                "the latent is not all: the one rotated key, qk_rope_head_dim "
                "features, is cached beside it"
            )
        if mla == c["latent"] + c["heads"] * c["rope"]:
            return wrong(
                "the rotated key is one key shared by all heads, cached once per token"
            )
        if mla == c["heads"] * c["latent"] + c["rope"]:
            return wrong(
                "the latent is one vector per token, shared by all heads, not one per "
                "head"
            )
        return wrong(
            "MLA caches, per token and layer, one latent (kv_lora_rank numbers) and "
            "one rotated key (qk_rope_head_dim numbers)"
        )
    if per_head == c["heads"] * (c["nope"] + c["rope"]):
        return wrong("the first number is right; count each head's value too")
    if per_head == c["heads"] * (c["nope"] + c["value"]):
        return wrong(
            "the first number is right; each head's key has both parts, "
            "qk_nope_head_dim + qk_rope_head_dim features"
        )
    return wrong(
        "the first number is right; every head caches a key of qk_nope_head_dim + "
        "qk_rope_head_dim features and a value of v_head_dim features"
    )
