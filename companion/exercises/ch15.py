"""Checkers for the exercises of chapter 15 (batches: padding, position ids and
packing)."""

from __future__ import annotations

import numpy as np
import torch

from companion.batching import (
    attention_allowed,
    document_ids_from_position_ids,
    packed_attention_mask,
    packed_position_ids,
    position_ids_from_attention_mask,
)
from companion.exercises._answers import as_array
from companion.exercises._feedback import Feedback, checker, wrong
from companion.exercises._feedback import right_folded as right

__all__ = [
    "check_left_padded_position_ids",
    "check_packed_causal_mask",
    "check_schemes_without_position_ids",
]

# The parameters the exercise texts state.
LEFT_MASK = ((0, 0, 0, 1, 1, 1), (0, 1, 1, 1, 1, 1), (1, 1, 1, 1, 1, 1))
PACKED_LENGTHS = (2, 3, 1)
SCHEME_NAMES = ("none", "sinusoidal", "learned", "t5", "rope", "alibi")
# logits depend on differences of positions only
SHIFT_FREE = {"none", "t5", "rope", "alibi"}


def _whole_numbers(answer, shape):
    """Return ``(float64 array, None)`` or ``(None, Feedback)`` explaining why
    ``answer`` is unusable."""
    array = as_array(answer, shape)
    if isinstance(array, str):
        return None, wrong(array)
    if not np.all(array == np.round(array)):
        return None, wrong("expected whole numbers: position ids are integers")
    return array, None


@checker
def check_left_padded_position_ids(answer) -> Feedback:
    """Position ids of the left-padded mask ``LEFT_MASK``, as ``transformers`` computes
    them."""
    ids, problem = _whole_numbers(answer, (len(LEFT_MASK), len(LEFT_MASK[0])))
    if problem is not None:
        return problem
    mask = np.array(LEFT_MASK)
    expected = position_ids_from_attention_mask(torch.tensor(mask)).numpy()
    real = mask == 1
    if np.array_equal(ids, expected):
        return right(
            "Each real token counts the real tokens before it, and padding gets 0, as "
            "in transformers."
        )
    if np.array_equal(ids, np.broadcast_to(np.arange(mask.shape[1]), mask.shape)):
        return wrong(
            "These are the column indices: they count the padding too, so a short "
            "row's first word is not at 0. Count only real tokens (a running sum of "
            "the mask)."
        )
    running = np.cumsum(mask, axis=1)
    if np.array_equal(ids[real], running[real]):
        return wrong(
            "Off by one: the first real token of a row is position 0. Subtract 1 from "
            "the running sum."
        )
    if np.array_equal(ids[real], expected[real]):
        return wrong(
            "The real tokens are right. transformers puts 0 on every padding position "
            "(the running sum minus 1 gives -1 there)."
        )
    if np.array_equal(ids, np.where(real[:, ::-1], np.arange(mask.shape[1]), 0)):
        return wrong(
            "These would be the positions of a right-padded batch; here the padding "
            "comes first."
        )
    return wrong(
        "Not the position ids. In each row, count the real tokens before each token (a "
        "running sum of the mask minus 1), and write 0 on padding."
    )


def _as_matrix(answer, size: int):
    """A ``(size, size)`` 0/1 matrix (a leading batch dimension of 1 is accepted), or
    Feedback."""
    raw = as_array(answer, finite=False)
    if isinstance(raw, str):
        return None, wrong(
            f"The answer is a ({size}, {size}) array of True/False: {raw}"
        )
    if raw.ndim == 3 and raw.shape[0] == 1:
        raw = raw[0]
    if raw.shape != (size, size):
        return None, wrong(
            f"expected an array of shape ({size}, {size}), one row per query, got "
            f"shape {raw.shape}"
        )
    matrix = raw.astype(np.float64)
    if not np.all((matrix == 0) | (matrix == 1)):
        return None, wrong(
            "expected True/False (or 1/0) entries: may this query see this key?"
        )
    return matrix.astype(bool), None


@checker
def check_packed_causal_mask(answer) -> Feedback:
    """Allowed (query, key) pairs of one row packing documents of lengths
    ``PACKED_LENGTHS``."""
    n = sum(PACKED_LENGTHS)
    got, problem = _as_matrix(answer, n)
    if problem is not None:
        return problem
    documents = packed_attention_mask(
        document_ids_from_position_ids(packed_position_ids(list(PACKED_LENGTHS)))
    )
    expected = attention_allowed(documents, n)[0].numpy()
    causal = np.tril(np.ones((n, n), dtype=bool))
    if np.array_equal(got, expected):
        return right(
            "Lower-triangular blocks on the diagonal: causal inside each document, "
            "nothing across."
        )
    if np.array_equal(got, expected.T):
        return wrong(
            "This is the transpose: rows are queries, columns are keys, and a query "
            "sees keys before it."
        )
    if np.array_equal(got, documents[0].numpy()):
        return wrong(
            "Right blocks, but a token here sees later tokens of its own document. Add "
            "the causal part."
        )
    if np.array_equal(got, causal):
        return wrong(
            "This is the plain causal mask: every document sees the ones packed before "
            "it, the leak packing must avoid. Keep only pairs inside one document."
        )
    return wrong(
        "Not the mask. With documents of lengths "
        f"{', '.join(map(str, PACKED_LENGTHS))}: which tokens share a document, and "
        "which keys are not after the query?"
    )


@checker
def check_schemes_without_position_ids(answer) -> Feedback:
    """The schemes whose real-token logits survive left padding with the mask but
    positions 0..s-1."""
    if isinstance(answer, np.ndarray) and answer.ndim == 1 and answer.dtype.kind == "U":
        answer = answer.tolist()
    if isinstance(answer, (str, bytes)) or not isinstance(
        answer, (list, tuple, set, frozenset)
    ):
        return wrong(
            f"expected a set or list of scheme names, got {type(answer).__name__}"
        )
    if not all(isinstance(name, str) for name in answer):
        return wrong("expected the scheme names as strings, e.g. 'rope'")
    names = {name.strip().lower() for name in answer}
    unknown = sorted(names - set(SCHEME_NAMES))
    if unknown:
        return wrong(
            f"unknown scheme name(s) {unknown}; the schemes are {list(SCHEME_NAMES)}"
        )
    if names == SHIFT_FREE:
        return right(
            "Every real token moves by the same amount, and these schemes see only "
            "differences of positions (or none): the differences do not change."
        )
    if names & {"sinusoidal", "learned"}:
        return wrong(
            "An absolute scheme adds the table row of the position a token is given; "
            "counting the padding gives a short row's tokens rows of later positions."
        )
    missing = SHIFT_FREE - names
    if "none" in missing:
        return wrong(
            "A model with no position information cannot be affected by position ids "
            "at all."
        )
    if "rope" in missing:
        return wrong(
            "RoPE rotates queries and keys by their positions, but a score depends on "
            "the difference of the two positions only."
        )
    return wrong(
        "The T5 bias and ALiBi are computed from key position minus query position "
        "only. Does a common shift change that difference?"
    )
