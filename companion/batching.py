"""Batches of sequences of different lengths: padding, position ids and packed
documents.

Notation: ``b`` batch, ``s`` sequence (``q`` queries, ``k`` keys), ``n`` tokens of a
packed row.

A batch must be a rectangle, and sequences rarely have equal lengths. Two ways out:

* **Padding**: one sequence per row, filled up with a pad token, on the right
  (``a b c _ _``) or on the left (``_ _ a b c``; decoders batch prompts this way for
  generation, so that every row's next token goes in the same, last, column). A
  ``(b, s)`` attention mask marks real tokens 1 and padding 0.
* **Packing**: several documents concatenated into one row with no padding at all. Their
  position ids restart at 0 where each document starts, and a block-diagonal mask keeps
  every token inside its own document.

The conventions are those of Hugging Face ``transformers``: the position id of a token
in a padded row counts the real tokens before it, and padding gets 0
(``GenerationMixin._prepare_position_ids_for_generation``); a new document starts
wherever a position id is not the previous one plus 1
(``masking_utils.find_packed_sequence_indices``); a packed row's labels carry -100 on
the first token of every document (``DataCollatorWithFlattening``).

Two more layouts put tokens where their index is not their position:

* **Shards** of one long sequence on several devices (sequence or context
  parallelism): each shard keeps the global positions of its tokens
  (:func:`shard_position_ids`; the zigzag layout is PyTorch's head-tail load balancer).
* **Token trees** of speculative decoding: candidates for the next tokens, flattened
  into one row; a candidate's position is the accepted length plus its depth in the
  tree, and it sees only its ancestors (:func:`token_tree`).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from companion import _checks

SIDES = ("right", "left")
SHARD_LAYOUTS = ("contiguous", "zigzag")


def _integer_tensor(
    name: str, value: Any, *, ndim: int, shape: str, allow_bool: bool = False
) -> torch.Tensor:
    """Return ``value`` if it is a non-empty integer (or, if allowed, bool) tensor of
    rank ``ndim``."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"{name} must be a torch.Tensor of shape {shape}, got "
            f"{type(value).__name__}; convert it with torch.tensor(...)"
        )
    if value.ndim != ndim:
        hint = (
            "; add a batch dimension with .unsqueeze(0)"
            if value.ndim == ndim - 1
            else ""
        )
        raise ValueError(
            f"{name} must have {ndim} dimensions {shape}, got shape "
            f"{tuple(value.shape)}{hint}"
        )
    if value.numel() == 0:
        raise ValueError(
            f"{name} is empty (shape {tuple(value.shape)}); pass at least one token "
            "per row"
        )
    kinds = "integers or booleans" if allow_bool else "integers"
    if (
        value.is_floating_point()
        or value.is_complex()
        or (value.dtype == torch.bool and not allow_bool)
    ):
        raise TypeError(
            f"{name} must hold {kinds}, got dtype {value.dtype}; convert it with "
            ".long()"
        )
    return value


def check_padding_mask(
    attention_mask: Any, name: str = "attention_mask"
) -> torch.Tensor:
    """Check a ``(b, s)`` padding mask of 0/1 (int or bool) and return it as bool.

    Raises:
        TypeError: not a tensor, or floating-point values.
        ValueError: not 2-D, empty, or values other than 0 and 1.
    """
    mask = _integer_tensor(
        name, attention_mask, ndim=2, shape="(batch, seq)", allow_bool=True
    )
    if mask.dtype != torch.bool and not bool(((mask == 0) | (mask == 1)).all()):
        raise ValueError(
            f"{name} must hold 1 for a real token and 0 for padding only, got values "
            f"{sorted(set(mask.unique().tolist()))[:6]}"
        )
    return mask.bool()


def position_ids_from_attention_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Position ids of a padded batch: the number of real tokens before each token.

    That is the running sum of the mask minus one, with padding set to 0, as
    ``transformers`` computes them for generation. Right padding gives ``0 .. n-1`` then
    zeros; left padding gives zeros then ``0 .. n-1``, so every real token gets the
    position it has alone.

    Args:
        attention_mask: ``(b, s)`` of 0/1 (int or bool), 1 for a real token.

    Returns:
        int64 ``(b, s)``.
    """
    mask = check_padding_mask(attention_mask)
    counted = mask.long().cumsum(-1) - 1  # (b, s): -1 before the first real token
    return counted.masked_fill(~mask, 0)


def document_ids_from_position_ids(position_ids: torch.Tensor) -> torch.Tensor:
    """The index of the document each token of a packed row belongs to.

    A document starts at the first token and wherever a position id is not the previous
    one plus 1 (a restart at 0, or any other jump). Unlike ``transformers``'
    ``find_packed_sequence_indices``, which returns None when no row is packed, this
    always returns the tensor (all zeros then).

    Args:
        position_ids: integer ``(b, s)``.

    Returns:
        int64 ``(b, s)``, 0 for the first document of each row, then 1, 2, ...
    """
    position_ids = _integer_tensor(
        "position_ids", position_ids, ndim=2, shape="(batch, seq)"
    )
    starts = torch.zeros(
        position_ids.shape, dtype=torch.bool, device=position_ids.device
    )
    starts[:, 1:] = position_ids[:, 1:] != position_ids[:, :-1] + 1
    return starts.long().cumsum(-1)


def _lengths(lengths: Any) -> list[int]:
    if isinstance(lengths, torch.Tensor):
        if (
            lengths.ndim != 1
            or lengths.is_floating_point()
            or lengths.dtype == torch.bool
        ):
            raise TypeError(
                "lengths must be a 1-D integer tensor or a list of ints, got "
                f"{lengths.dtype} {tuple(lengths.shape)}"
            )
        lengths = lengths.tolist()
    if not isinstance(lengths, (list, tuple)):
        raise TypeError(
            "lengths must be a list of positive ints (one per document), got "
            f"{type(lengths).__name__}"
        )
    if not lengths:
        raise ValueError("lengths is empty; pass the length of at least one document")
    return [_checks.positive_int(f"lengths[{i}]", n) for i, n in enumerate(lengths)]


def packed_position_ids(lengths: Sequence[int]) -> torch.Tensor:
    """Position ids of one packed row: ``0 .. n_i - 1`` for each document in turn.

    Args:
        lengths: the documents' lengths, positive ints, in the order they are packed.

    Returns:
        int64 ``(1, n)`` with ``n = sum(lengths)``, a batch of one row.
    """
    return torch.cat([torch.arange(n) for n in _lengths(lengths)])[None, :]


def packed_attention_mask(document_ids: torch.Tensor) -> torch.Tensor:
    """Block-diagonal mask of a packed batch: True where query and key share a document.

    It is symmetric; the model adds the causal part. ``transformers``'
    ``packed_sequence_mask_function`` gives the same value for every ``(q, k)`` pair.

    Args:
        document_ids: integer ``(b, s)``, e.g. from
            :func:`document_ids_from_position_ids`.

    Returns:
        bool ``(b, s, s)``: entry ``[r, i, j]`` says whether token ``i`` may see token
        ``j``.
    """
    ids = _integer_tensor("document_ids", document_ids, ndim=2, shape="(batch, seq)")
    return ids[:, :, None] == ids[:, None, :]


def _sequences(sequences: Any) -> list[torch.Tensor]:
    """The sequences as a list of 1-D int64 tensors, each with at least one token."""
    if isinstance(sequences, torch.Tensor) or not isinstance(sequences, (list, tuple)):
        raise TypeError(
            "sequences must be a list of token sequences (1-D integer tensors or "
            f"lists of ints), got {type(sequences).__name__}"
        )
    if not sequences:
        raise ValueError("sequences is empty; pass at least one sequence")
    out = []
    for i, seq in enumerate(sequences):
        if not isinstance(seq, torch.Tensor):
            if not isinstance(seq, (list, tuple)) or not all(
                isinstance(t, int) and not isinstance(t, bool) for t in seq
            ):
                raise TypeError(
                    f"sequences[{i}] must be a 1-D integer tensor or a list of ints, "
                    f"got {seq!r}"
                )
            seq = torch.tensor(list(seq), dtype=torch.long)
        if seq.ndim != 1:
            raise ValueError(
                f"sequences[{i}] must be 1-D (one sequence, no batch), got shape "
                f"{tuple(seq.shape)}"
            )
        if seq.is_floating_point() or seq.is_complex() or seq.dtype == torch.bool:
            raise TypeError(
                f"sequences[{i}] must hold integer token ids, got dtype {seq.dtype}"
            )
        if seq.numel() == 0:
            raise ValueError(
                f"sequences[{i}] is empty; every sequence needs at least one token"
            )
        out.append(seq.long())
    return out


def pad_batch(
    sequences: Sequence, *, side: str = "right", pad_id: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack sequences of different lengths into one batch, padding the short ones.

    Args:
        sequences: ``b`` token sequences, 1-D integer tensors or lists of ints.
        side: ``"right"`` puts the padding after the tokens, ``"left"`` before them.
        pad_id: the token id written into padding (the mask, not the id, keeps it out).

    Returns:
        ``(tokens, attention_mask)``, both int64 ``(b, s)`` with ``s`` the longest
        length; the mask is 1 on real tokens and 0 on padding.
    """
    rows = _sequences(sequences)
    side = _checks.choice("side", side, SIDES)
    pad_id = _checks.integer("pad_id", pad_id)
    longest = max(len(row) for row in rows)
    tokens = torch.full((len(rows), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), longest), dtype=torch.long)
    for r, row in enumerate(rows):
        cols = (
            slice(0, len(row))
            if side == "right"
            else slice(longest - len(row), longest)
        )
        tokens[r, cols] = row
        mask[r, cols] = 1
    return tokens, mask


def unpad(values: torch.Tensor, attention_mask: torch.Tensor) -> list[torch.Tensor]:
    """The entries of the real tokens of each row, e.g. a padded batch's logits.

    Args:
        values: ``(b, s, ...)``, one entry per token.
        attention_mask: ``(b, s)`` of 0/1 (int or bool), 1 for a real token.

    Returns:
        ``b`` tensors, row ``r`` of shape ``(n_r, ...)`` with ``n_r`` its number of real
        tokens, in their order.
    """
    mask = check_padding_mask(attention_mask)
    if not isinstance(values, torch.Tensor) or values.shape[:2] != mask.shape:
        raise ValueError(
            f"values must be a tensor (batch, seq, ...) = {tuple(mask.shape)} + (...) "
            "like attention_mask, got "
            f"{getattr(values, 'shape', type(values).__name__)}"
        )
    return [row[keep] for row, keep in zip(values, mask.to(values.device))]


def pack(sequences: Sequence) -> tuple[torch.Tensor, torch.Tensor]:
    """Concatenate documents into one row, with position ids that restart for each.

    The mask that keeps the documents apart follows from the position ids:
    ``packed_attention_mask(document_ids_from_position_ids(position_ids))``.

    Args:
        sequences: the documents, 1-D integer tensors or lists of ints.

    Returns:
        ``(tokens, position_ids)``, both int64 ``(1, n)`` with ``n`` the total length.
    """
    rows = _sequences(sequences)
    return torch.cat(rows)[None, :], packed_position_ids([len(row) for row in rows])


def attention_allowed(attention_mask: torch.Tensor, q_len: int) -> torch.Tensor:
    """Which keys each query may attend to in a causal model, given a batch's mask.

    A query sees key ``j`` when ``j`` is not in its future (the last query is aligned
    with the last key, as with a cache) and the mask allows it; it always sees its own
    key, so a padding query gets a finite output (which no real token reads) instead of
    NaN.

    Args:
        attention_mask: either a ``(b, k)`` padding mask of 0/1 (int or bool) covering
            every key (cached and new tokens), or a bool ``(b, q, k)`` mask of allowed
            pairs, e.g. from :func:`packed_attention_mask`.
        q_len: the number of queries ``q`` (the newest ``q`` of the ``k`` tokens).

    Returns:
        bool ``(b, q, k)``.
    """
    if not isinstance(attention_mask, torch.Tensor):
        raise TypeError(
            "attention_mask must be a torch.Tensor, got "
            f"{type(attention_mask).__name__}"
        )
    q_len = _checks.positive_int("q_len", q_len)
    if attention_mask.ndim == 3:
        if attention_mask.dtype != torch.bool:
            raise TypeError(
                "a 3-D attention_mask lists allowed (query, key) pairs and must be "
                f"bool, got dtype {attention_mask.dtype}; use a (batch, keys) mask of "
                "0/1 for padding"
            )
        if attention_mask.shape[1] != q_len or attention_mask.numel() == 0:
            raise ValueError(
                f"a 3-D attention_mask must have shape (batch, {q_len}, keys), got "
                f"{tuple(attention_mask.shape)}"
            )
        pairs = attention_mask
    elif attention_mask.ndim == 2:
        # (b, 1, k): the same for every query
        pairs = check_padding_mask(attention_mask)[:, None, :]
    else:
        raise ValueError(
            "attention_mask must be (batch, keys) of 0/1 or a bool (batch, queries, "
            f"keys), got shape {tuple(attention_mask.shape)}"
        )
    k_len = attention_mask.shape[-1]
    if k_len < q_len:
        raise ValueError(
            f"attention_mask covers {k_len} keys, fewer than the q_len={q_len} queries"
        )
    keys = torch.arange(k_len, device=attention_mask.device)
    queries = keys[k_len - q_len :, None]  # (q, 1): each query's own key
    return (pairs & (keys <= queries)) | (keys == queries)


def packed_labels(
    input_ids: torch.Tensor, position_ids: torch.Tensor, *, ignore_index: int = -100
) -> torch.Tensor:
    """Labels of packed rows for a causal language-model loss: no target crosses a
    document boundary.

    The labels are the tokens themselves, with ``ignore_index`` on the first token of
    every document, as ``transformers``' ``DataCollatorWithFlattening`` writes them
    (its ``separator_id``). The causal-LM losses of ``transformers`` shift the labels
    inside (the logits at token ``t`` are scored against label ``t + 1``), so the
    ignored label is the target the last token of the previous document would
    otherwise be trained to predict: the first token of an unrelated document.

    Args:
        input_ids: integer ``(b, n)``, the packed rows.
        position_ids: integer ``(b, n)``; a document starts wherever a position is not
            the previous one plus 1, e.g. from :func:`pack`.
        ignore_index: the label the loss skips (PyTorch's cross-entropy default).

    Returns:
        int64 ``(b, n)``.
    """
    input_ids = _integer_tensor("input_ids", input_ids, ndim=2, shape="(batch, seq)")
    if not isinstance(position_ids, torch.Tensor):
        raise TypeError(
            "position_ids must be a torch.Tensor of the same shape as input_ids "
            f"{tuple(input_ids.shape)}, got {type(position_ids).__name__}"
        )
    if position_ids.shape != input_ids.shape:
        raise ValueError(
            "position_ids must have the same shape as input_ids "
            f"{tuple(input_ids.shape)}, got {tuple(position_ids.shape)}"
        )
    ignore_index = _checks.integer("ignore_index", ignore_index)
    documents = document_ids_from_position_ids(position_ids)
    starts = torch.ones(documents.shape, dtype=torch.bool, device=documents.device)
    starts[:, 1:] = documents[:, 1:] != documents[:, :-1]
    return input_ids.long().masked_fill(starts, ignore_index)


def shard_position_ids(
    length: int, world_size: int, rank: int, *, layout: str = "contiguous"
) -> torch.Tensor:
    """The global positions of the tokens one device holds when a sequence is split
    across ``world_size`` devices (sequence or context parallelism).

    Each shard must be run with these positions, not with ``0, 1, ...`` of its own:
    the shards are pieces of one sequence.

    * ``"contiguous"``: rank ``r`` holds the ``r``-th of ``world_size`` equal slices,
      as ``torch.arange(length).chunk(world_size)[r]``.
    * ``"zigzag"``: the sequence is cut into ``2 * world_size`` chunks and rank ``r``
      holds chunk ``r`` and chunk ``2 * world_size - 1 - r``, so that every rank gets
      as much causal attention work (ring attention's zigzag layout, PyTorch's
      ``_HeadTailLoadBalancer``). Tokens and positions must be permuted together.

    Args:
        length: tokens in the whole sequence.
        world_size: devices the sequence is split across.
        rank: this device, ``0 .. world_size - 1``.
        layout: ``"contiguous"`` or ``"zigzag"``.

    Returns:
        int64 ``(length // world_size,)``: positions in the whole sequence, in the order
        the shard holds its tokens.
    """
    length = _checks.positive_int("length", length)
    world_size = _checks.positive_int("world_size", world_size)
    rank = _checks.integer("rank", rank)
    layout = _checks.choice("layout", layout, SHARD_LAYOUTS)
    if not 0 <= rank < world_size:
        raise ValueError(
            f"rank must be in 0 .. world_size - 1 = {world_size - 1}, got {rank}"
        )
    pieces = world_size if layout == "contiguous" else 2 * world_size
    if length % pieces:
        raise ValueError(
            f"the {layout} layout cuts the sequence into {pieces} equal pieces, but "
            f"length={length} is not a multiple of {pieces}; pad the sequence to "
            f"{-(-length // pieces) * pieces} tokens"
        )
    size = length // pieces
    if layout == "contiguous":
        return torch.arange(rank * size, (rank + 1) * size)
    tail = 2 * world_size - 1 - rank
    head = torch.arange(rank * size, (rank + 1) * size)
    return torch.cat([head, torch.arange(tail * size, (tail + 1) * size)])


def token_tree(parents: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Depths and attention mask of a tree of candidate tokens, flattened into a row.

    Tree-based speculative decoding verifies several continuations at once: the
    candidates are put in one row, each with the index of its parent (``-1`` for a
    candidate that follows the accepted text directly). A candidate's position is the
    number of accepted tokens plus its depth, not its index in the row, and it may
    attend to the accepted tokens, its ancestors and itself only.

    Args:
        parents: ``t`` ints; ``parents[i]`` is ``-1`` or the index of an earlier
            candidate.

    Returns:
        ``(depths, allowed)``: int64 ``(t,)``, 0 for the first candidates after the
        accepted text; bool ``(t, t)``, ``allowed[i, j]`` when candidate ``j`` is
        candidate ``i`` or one of its ancestors.
    """
    if isinstance(parents, torch.Tensor):
        parents = parents.tolist()
    if not isinstance(parents, (list, tuple)) or not parents:
        raise TypeError(
            "parents must be a non-empty list of ints (-1 for a candidate right after "
            f"the accepted text), got {parents!r}"
        )
    depths: list[int] = []
    allowed = torch.eye(len(parents), dtype=torch.bool)
    for i, parent in enumerate(parents):
        parent = _checks.integer(f"parents[{i}]", parent)
        if not -1 <= parent < i:
            raise ValueError(
                f"parents[{i}] must be -1 or the index of an earlier candidate "
                f"(0 .. {i - 1}), got {parent}; list parents before their children"
            )
        depths.append(0 if parent == -1 else depths[parent] + 1)
        if parent >= 0:
            allowed[i] |= allowed[parent]
    return torch.tensor(depths), allowed
