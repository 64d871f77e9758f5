"""Checks for position bugs, and the small training runs of the debugging chapter.

Each check looks at one place where a position scheme is commonly broken and returns
numbers (or raises, for :func:`check_position_table`, which guards a slice):

* :func:`check_position_table`: is the table ``(max_len, d)``, and long enough for the
  input?
* :func:`embedding_scale_report`: how large are the token part and the position part
  (of a :class:`~companion.model.TinyDecoder` or a transformers model with a learned
  table)?
* :func:`dropout_report`: was dropout applied once, after the sum, with its own mask per
  sequence?
* :func:`find_position_offset`: which row of a reference table does position 0 read?
* :func:`rope_partners`: which features does a RoPE implementation rotate together
  (:func:`transformers_rotate` wraps transformers' own RoPE code for it)?
  :func:`permute_rotary_rows` moves a checkpoint's ``W_Q`` and ``W_K`` rows to the
  other pairing, per head, with grouped-query attention and partial rotary.
* :func:`distance_profile`: what a causal query's bias (or bucket) is at each distance.
* :func:`check_position_ids`: is every real token's position the number of real tokens
  before it, at prefill, in a cached step, or within each document of a packed row?
* :func:`low_precision_buffers`: which floating-point buffers (RoPE's ``inv_freq``) a
  cast such as ``model.to(torch.bfloat16)`` rounded; :func:`to_keeping_buffers` casts
  the model and keeps RoPE's frequency buffers.

The training side (:func:`checklist_runs`) trains :class:`~companion.model.TinyDecoder`
models in :func:`companion.lab.run_parallel` workers, one setting and seed per run.

Notation: ``b`` batch, ``s`` sequence, ``d`` features, ``h`` heads, ``q`` queries, ``k``
keys.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Callable, Sequence

import numpy as np
import torch

from companion import _checks
from companion.data import MarkovChain
from companion.model import ABSOLUTE, ModelConfig, TinyDecoder
from companion.rope import RotaryEmbedding, permute_qk_weights
from companion.sinusoidal import LAYOUTS

# What a setting of checklist_runs may set: the model's fields, except the source's
# vocabulary.
FIELDS = {f.name for f in dataclasses.fields(ModelConfig)} - {"vocab_size"}

__all__ = [
    "check_position_table",
    "embedding_scale_report",
    "dropout_report",
    "find_position_offset",
    "shift_positions",
    "rope_partners",
    "transformers_rotate",
    "layout_of_partners",
    "with_rope_layout",
    "permute_rotary_rows",
    "distance_profile",
    "check_position_ids",
    "low_precision_buffers",
    "to_keeping_buffers",
    "train_and_evaluate",
    "checklist_runs",
]


def _array(name: str, value, *, ndim: int | tuple[int, ...], shape: str) -> np.ndarray:
    """A float64 copy of a real numpy array or torch tensor of the given rank."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if not isinstance(value, np.ndarray):
        raise TypeError(
            f"{name} must be a numpy array or torch tensor of shape {shape}, got "
            f"{type(value).__name__}"
        )
    if value.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {value.dtype}")
    ranks = (ndim,) if isinstance(ndim, int) else ndim
    if value.ndim not in ranks:
        raise ValueError(f"{name} must have shape {shape}, got shape {value.shape}")
    return value.astype(np.float64)


# ---- 1. shapes and slice ranges ------------------------------------------------------

def check_position_table(table, seq_len: int):
    """Return ``table[:seq_len]`` after checking that it has one row per position.

    A hand-written ``pe[:seq_len]`` does not complain when ``seq_len`` exceeds the table
    (Python slices stop at the end), and a sequence-first table ``(max_len, 1, d)``
    sliced with the batch size broadcasts without an error. This check refuses both.

    Args:
        table: ``(max_len, d)`` numpy array or torch tensor, one row per position.
        seq_len: the number of positions the input has.

    Returns:
        The first ``seq_len`` rows, ``(seq_len, d)``, of the same type as ``table``.
    """
    if not isinstance(table, (np.ndarray, torch.Tensor)):
        raise TypeError(
            "table must be a (max_len, d) numpy array or torch tensor, got "
            f"{type(table).__name__}"
        )
    seq_len = _checks.positive_int("seq_len", seq_len)
    shape = tuple(table.shape)
    if len(shape) == 3 and 1 in shape[:2]:
        axis = (
            "sequence-first (max_len, 1, d)"
            if shape[1] == 1
            else "batch-first (1, max_len, d)"
        )
        raise ValueError(
            f"table has shape {shape}, a {axis} layout: slicing it along the wrong "
            "axis broadcasts one row over a whole sequence without an error; squeeze "
            "it to (max_len, d) first"
        )
    if len(shape) != 2:
        raise ValueError(f"table must have shape (max_len, d), got {shape}")
    if seq_len > shape[0]:
        raise ValueError(
            f"the input has {seq_len} positions but the table has only {shape[0]} "
            f"rows: table[:{seq_len}] would return {shape[0]} rows; build the table "
            f"with max_len >= {seq_len}"
        )
    return table[:seq_len]


# ---- 2. the scale of E against P -----------------------------------------------------

# The names transformers gives a learned table of absolute positions: GPT-2 and GPT-Neo
# (wpe), BERT and its relatives (position_embeddings), OPT, BART and others
# (embed_positions).
POSITION_TABLE_NAMES = ("wpe", "position_embeddings", "embed_positions")


def _learned_position_table(model: torch.nn.Module) -> torch.Tensor:
    """The rows a transformers model adds for positions 0, 1, ...: its one
    ``nn.Embedding`` named like :data:`POSITION_TABLE_NAMES`, after its offset."""
    tables = [
        module
        for name, module in model.named_modules()
        if name.rsplit(".", 1)[-1] in POSITION_TABLE_NAMES
        and isinstance(module, torch.nn.Embedding)
    ]
    if len(tables) != 1:
        raise ValueError(
            f"model has {len(tables)} learned position tables (nn.Embedding modules "
            f"named {', '.join(POSITION_TABLE_NAMES)}); the report needs exactly one. "
            "Models with RoPE, ALiBi or a relative bias add nothing to the tokens, so "
            "there is no scale to compare"
        )
    offset = getattr(tables[0], "offset", 0)  # OPT reads row position + 2
    return tables[0].weight.detach()[offset:]


def embedding_scale_report(
    model: torch.nn.Module, seq_len: int, *, token_scale: float | None = None
) -> dict[str, float]:
    """Standard deviations of the two parts of ``x = scale * E[token] + P[position]``.

    The token part is measured over the whole vocabulary, after the scale; the position
    part over the rows that positions ``0 .. seq_len - 1`` read. Both are population
    standard deviations of all entries, in float64.

    Args:
        model: a :class:`~companion.model.TinyDecoder` with ``position`` in
            ``("sinusoidal", "learned")`` and ``combine="add"``; or a transformers
            model with one learned position table (GPT-2, BERT, OPT, ...: an
            ``nn.Embedding`` named ``wpe``, ``position_embeddings`` or
            ``embed_positions``; OPT's offset of 2 rows is skipped) and
            ``get_input_embeddings()``.
        seq_len: how many positions the model is run on.
        token_scale: the factor the forward multiplies the token vectors by. By
            default the TinyDecoder's ``embed_scale``, and for a transformers model the
            ``embed_scale`` of its input embedding if it has one (M2M100, Gemma), else
            1 (GPT-2, BERT, OPT).

    Returns:
        ``{"token_std", "position_std", "ratio"}`` with
        ``ratio = token_std / position_std``: near 1 the parts are comparable; far above
        1 the positions are drowned by the tokens.
    """
    if isinstance(model, TinyDecoder):
        config = model.config
        if config.position not in ABSOLUTE or config.combine != "add":
            raise ValueError(
                "the report compares an added absolute table with the tokens; this "
                f"model has position={config.position!r}, combine={config.combine!r}"
            )
        table, words = model.position.table.detach(), model.token
        default_scale = model.embed_scale
    elif isinstance(model, torch.nn.Module) and hasattr(model, "get_input_embeddings"):
        table, words = _learned_position_table(model), model.get_input_embeddings()
        default_scale = float(getattr(words, "embed_scale", 1.0))
    else:
        raise TypeError(
            "model must be a TinyDecoder or a transformers model with a learned "
            f"position table, got {type(model).__name__}"
        )
    scale = default_scale if token_scale is None else token_scale
    if _checks.real("token_scale", scale) <= 0:
        raise ValueError(f"token_scale must be positive, got {scale}")
    rows = check_position_table(table, seq_len)  # (s, d)
    tokens = words.weight.detach().double() * scale  # (V, d)
    token_std, position_std = (
        tokens.std(unbiased=False).item(),
        rows.double().std(unbiased=False).item(),
    )
    return {
        "token_std": token_std,
        "position_std": position_std,
        "ratio": token_std / position_std,
    }


# ---- 3. dropout placement ------------------------------------------------------------

def dropout_report(train_out, eval_out, p: float) -> dict[str, float | bool | None]:
    """What a train-mode embedding output says about where dropout was applied.

    Dropout applied once to ``E + P`` leaves every entry either 0 or
    ``(E + P) / (1 - p)``, zeroes a share ``p`` of the entries, and draws a new mask for
    every sequence. Dropout applied to ``E`` and ``P`` separately zeroes only about
    ``p**2`` of the entries (both parts dropped) and leaves entries that hold one part
    alone; dropout applied to the ``(s, d)`` position table before it is broadcast
    zeroes nothing and drops the same position features in every sequence of the batch.

    Args:
        train_out: ``(b, s, d)`` output in train mode.
        eval_out: ``(b, s, d)`` output for the same tokens in eval mode (no dropout).
        p: the dropout probability, in ``[0, 1)``.

    Returns:
        ``"zero_share"``: share of the entries that are exactly 0 in ``train_out``
        (among those that are not 0 in ``eval_out``); ``"consistent_share"``: share of
        them that are 0 or ``eval_out / (1 - p)`` (relative tolerance 1e-5);
        ``"shared_across_batch"``: if every sequence of ``eval_out`` is the same (give
        the batch one sequence ``b >= 2`` times), whether every sequence of
        ``train_out`` is also the same, i.e. one mask for the whole batch; None
        otherwise.
    """
    out = _array("train_out", train_out, ndim=3, shape="(b, s, d)")
    ref = _array("eval_out", eval_out, ndim=3, shape="(b, s, d)")
    if out.shape != ref.shape:
        raise ValueError(
            f"train_out {out.shape} and eval_out {ref.shape} must have the same shape"
        )
    p = _checks.probability("p", p)
    live = ref != 0
    if not live.any():
        raise ValueError(
            "eval_out is all zeros: pass the eval-mode output for the same tokens"
        )
    zero = (out == 0) & live
    scaled = np.isclose(out, ref / (1 - p), rtol=1e-5, atol=0)
    repeated = out.shape[0] >= 2 and bool(np.all(ref == ref[:1]))
    return {"zero_share": float(zero.sum() / live.sum()),
            "consistent_share": float(np.mean((zero | scaled)[live])),
            "shared_across_batch": bool(np.all(out == out[:1])) if repeated else None}


# ---- 4. where positions start --------------------------------------------------------

def find_position_offset(
    rows, reference, *, max_shift: int = 8, atol: float = 1e-6
) -> int | None:
    """The shift ``k`` with ``rows[t] == reference[t + k]`` for every ``t``, or None.

    ``rows`` are the vectors an implementation gives positions ``0 .. n - 1``;
    ``reference`` is the table those positions should read, starting at position 0. A
    result of 0 means the numbering agrees; 1 means the implementation numbers from 1
    (or skips a padding row); None means no shift up to ``max_shift`` matches (another
    formula, layout or scale).

    Args:
        rows: ``(n, d)``.
        reference: ``(m, d)`` with ``m >= n``; shifts need ``m >= n + k``.
        max_shift: the largest ``k`` tried (shifts ``0 .. max_shift``).
        atol: absolute tolerance of the comparison.
    """
    rows = _array("rows", rows, ndim=2, shape="(n, d)")
    reference = _array("reference", reference, ndim=2, shape="(m, d)")
    if rows.shape[1] != reference.shape[1]:
        raise ValueError(
            f"rows have {rows.shape[1]} features but reference has {reference.shape[1]}"
        )
    if reference.shape[0] < rows.shape[0]:
        raise ValueError(
            f"reference needs at least the {rows.shape[0]} rows of rows, got "
            f"{reference.shape[0]}"
        )
    if _checks.integer("max_shift", max_shift) < 0:
        raise ValueError(f"max_shift must be 0 or more, got {max_shift}")
    if _checks.real("atol", atol) < 0:
        raise ValueError(f"atol must be non-negative, got {atol}")
    n = rows.shape[0]
    for k in range(min(max_shift, reference.shape[0] - n) + 1):
        if np.allclose(rows, reference[k : k + n], rtol=0, atol=atol):
            return k
    return None


def shift_positions(model: TinyDecoder, shift: int) -> TinyDecoder:
    """A copy of ``model`` whose position ``t`` reads row ``t + shift`` of its absolute
    table.

    This is the off-by-one bug of code that numbers positions from ``shift`` instead
    of 0. The last ``shift`` rows wrap around to the start, so run the copy on at most
    ``max_len - shift`` positions.
    """
    if not isinstance(model, TinyDecoder):
        raise TypeError(f"model must be a TinyDecoder, got {type(model).__name__}")
    if model.config.position not in ABSOLUTE:
        raise ValueError(
            "shift_positions needs an absolute table, this model uses "
            f"{model.config.position!r}"
        )
    shift = _checks.integer("shift", shift)
    if not 0 <= shift < model.config.max_len:
        raise ValueError(
            f"shift must be in [0, max_len={model.config.max_len}), got {shift}"
        )
    shifted = copy.deepcopy(model)
    with torch.no_grad():
        shifted.position.table.copy_(torch.roll(shifted.position.table, -shift, dims=0))
    return shifted


# ---- 5. the layout of RoPE pairs -----------------------------------------------------

def rope_partners(
    rotate: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], dim: int
) -> np.ndarray:
    """Probe a RoPE implementation: the feature each feature is rotated together with.

    Feeds the ``d`` unit vectors at position 1, in float64, to ``rotate(x, positions)``
    with ``x (d, 1, d)`` (one sequence of one token per unit vector) and ``positions``
    int64 ``(1,)``. A rotation mixes feature ``i`` with exactly one partner.

    Returns:
        int64 ``(d,)``: ``partners[i]`` is the partner of feature ``i``. Interleaved
        pairs give ``[1, 0, 3, 2, ...]``, halves give ``[d/2, d/2 + 1, ..., 0, 1, ...]``
        (see :func:`layout_of_partners`).
    """
    if not callable(rotate):
        raise TypeError(
            "rotate must be a function (x, positions) -> x, got "
            f"{type(rotate).__name__}"
        )
    dim = _checks.even_int("dim", dim)
    # (d, 1, d): feature i alone
    units = torch.eye(dim, dtype=torch.float64)[:, None, :]
    out = rotate(units, torch.tensor([1]))
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (dim, 1, dim):
        raise ValueError(
            f"rotate must return a tensor of the input's shape ({dim}, 1, {dim}), got "
            f"{getattr(out, 'shape', type(out).__name__)}"
        )
    # (d, d): which features each unit reaches
    moved = out[:, 0, :].detach().abs() > 1e-12
    moved[torch.arange(dim), torch.arange(dim)] = False
    if not torch.all(moved.sum(dim=1) == 1):
        raise ValueError(
            "rotate does not mix each feature with exactly one other: not a RoPE "
            "pairing"
        )
    return moved.int().argmax(dim=1).numpy().astype(np.int64)


def transformers_rotate(
    rotary_emb: torch.nn.Module, apply_rotary_pos_emb: Callable
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """A ``rotate(x, positions)`` for :func:`rope_partners`, from transformers' code.

    Args:
        rotary_emb: a rotary module of the Llama family (``LlamaRotaryEmbedding``,
            ``GPTNeoXRotaryEmbedding``, ...): called as ``rotary_emb(x, position_ids)``,
            it returns ``(cos, sin)`` of shape ``(batch, seq, head_dim)``.
        apply_rotary_pos_emb: the function of the same modeling file,
            ``(q, k, cos, sin) -> (q, k)`` on ``(batch, heads, seq, head_dim)``.

    Returns:
        A function of ``x (n, s, d)`` and int64 ``positions (s,)`` that returns the
        rotated ``x``: the query of one head, as the library rotates it.
    """
    if not isinstance(rotary_emb, torch.nn.Module):
        raise TypeError(
            "rotary_emb must be a transformers rotary module such as "
            f"LlamaRotaryEmbedding, got {type(rotary_emb).__name__}"
        )
    if not callable(apply_rotary_pos_emb):
        raise TypeError(
            "apply_rotary_pos_emb must be the modeling file's function (q, k, cos, "
            f"sin) -> (q, k), got {type(apply_rotary_pos_emb).__name__}"
        )

    def rotate(x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        cos, sin = rotary_emb(x, positions[None])  # (1, s, d)
        q = x[:, None]  # (n, 1 head, s, d)
        return apply_rotary_pos_emb(q, q, cos, sin)[0][:, 0]

    return rotate


def layout_of_partners(partners) -> str | None:
    """``"interleaved"``, ``"halves"`` or None for a ``(d,)`` array from
    :func:`rope_partners`."""
    partners = np.asarray(partners)
    if partners.ndim != 1 or partners.size % 2 or partners.dtype.kind not in "iu":
        raise ValueError(
            f"partners must be an integer array of even length (d,), got {partners!r}"
        )
    index = np.arange(partners.size)
    if np.array_equal(partners, index ^ 1):
        return "interleaved"
    if np.array_equal(partners, (index + partners.size // 2) % partners.size):
        return "halves"
    return None


def with_rope_layout(
    model: TinyDecoder, layout: str, *, permute_weights: bool
) -> TinyDecoder:
    """A copy of a RoPE ``model`` that pairs its features with ``layout``.

    ``permute_weights=False`` is the porting bug: the weights stay as trained and only
    the pairing changes. ``permute_weights=True`` is the fix: the rows of ``W_Q`` and
    ``W_K`` (and their biases) are permuted within every head
    (:func:`~companion.rope.permute_qk_weights`), so that every attention score, and the
    model's output, stays the same.
    """
    if not isinstance(model, TinyDecoder) or model.config.position != "rope":
        raise TypeError(
            "model must be a TinyDecoder with position='rope', got "
            f"{type(model).__name__}"
        )
    layout = _checks.choice("layout", layout, LAYOUTS)
    if not isinstance(permute_weights, bool):
        raise TypeError(
            f"permute_weights must be True or False, got {permute_weights!r}"
        )
    ported = copy.deepcopy(model)
    heads, dim = model.config.num_heads, model.config.dim
    for block in ported.blocks:
        old = block.attn.qk_transform
        if old is None:  # a NoPE layer (config.nope_layers)
            continue
        if permute_weights and old.layout != layout:
            qkv = block.attn.qkv  # rows: W_Q (dim), W_K (dim), W_V (dim)
            with torch.no_grad():
                for tensor in (qkv.weight, qkv.bias):
                    for part in (slice(0, dim), slice(dim, 2 * dim)):
                        tensor[part] = permute_qk_weights(
                            tensor[part], heads, to=layout
                        )
        block.attn.qk_transform = RotaryEmbedding(
            old.dim, base=model.config.rope_base, layout=layout
        )
    return ported


def permute_rotary_rows(
    weight: torch.Tensor, num_heads: int, *, to: str, rotary_dim: int | None = None
) -> torch.Tensor:
    """Reorder the rows of a query or key projection between RoPE layouts, head by head.

    The rows of ``W_Q`` and ``W_K`` (and of their biases) that feed the rotated features
    are permuted within every head, as :func:`~companion.rope.permute_qk_weights` does;
    with partial rotary only the first ``rotary_dim`` features of each head are rotated
    (GPT-NeoX, Phi), and only those rows move. Pass the heads of the projection: the
    query heads for ``W_Q``, the key-value heads for ``W_K`` under grouped-query
    attention (``num_key_value_heads`` in transformers).

    Args:
        weight: ``(h * head_dim, in_features)`` weight of an ``nn.Linear``, or its
            ``(h * head_dim,)`` bias.
        num_heads: the number of heads ``h`` of this projection.
        to: ``"halves"`` (from interleaved) or ``"interleaved"`` (from halves).
        rotary_dim: how many features of each head are rotated (even); None for all.

    Returns:
        A new tensor of the same shape.
    """
    if not isinstance(weight, torch.Tensor) or weight.ndim not in (1, 2):
        raise TypeError(
            "weight must be a torch.Tensor (h * head_dim, in_features) or a bias "
            f"(h * head_dim,), got {getattr(weight, 'shape', type(weight).__name__)}"
        )
    num_heads = _checks.positive_int("num_heads", num_heads)
    if weight.shape[0] % num_heads:
        raise ValueError(
            f"num_heads={num_heads} must divide the {weight.shape[0]} rows of weight; "
            "for W_K under grouped-query attention pass num_key_value_heads"
        )
    head_dim = weight.shape[0] // num_heads
    rotary = (
        head_dim if rotary_dim is None else _checks.even_int("rotary_dim", rotary_dim)
    )
    if rotary > head_dim:
        raise ValueError(
            f"rotary_dim={rotary} is more than the {head_dim} features of a head"
        )
    rest = tuple(weight.shape[1:])
    heads = weight.reshape(num_heads, head_dim, *rest)
    rotated = permute_qk_weights(
        heads[:, :rotary].reshape(num_heads * rotary, *rest), num_heads, to=to
    )
    out = torch.cat([rotated.reshape(num_heads, rotary, *rest), heads[:, rotary:]], 1)
    return out.reshape(weight.shape)


# ---- 6. the sign of relative offsets -------------------------------------------------

def distance_profile(values) -> np.ndarray:
    """What a causal query sees at each distance, from a ``(..., q, k)`` bias or bucket
    matrix.

    The last query is aligned with the last key (as everywhere in the companion). For a
    relative scheme every visible entry ``(i, j)``, ``j <= i``, depends only on the
    distance ``i - j``; this is checked, and the values of the last query are returned
    by distance.

    Returns:
        float64 ``(..., k)``: entry ``n`` is the value at distance ``n`` (``0`` = the
        query's own key). A penalty (ALiBi) falls with ``n``; T5 buckets grow with
        ``n``.
    """
    values = _array("values", values, ndim=(2, 3), shape="(q, k) or (h, q, k)")
    q, k = values.shape[-2:]
    if k < q:
        raise ValueError(
            f"values must have at least as many keys as queries, got (q, k) = ({q}, "
            f"{k})"
        )
    last = values[..., -1, ::-1]  # (..., k): distance 0, 1, ..., k - 1
    for i in range(q):
        seen = values[..., i, : k - q + i + 1][..., ::-1]  # distances 0 .. k - q + i
        if not np.allclose(seen, last[..., : seen.shape[-1]], rtol=0, atol=1e-9):
            raise ValueError(
                f"query {i} sees other values at the same distances than the last "
                "query: these values are not a function of the distance alone"
            )
    return last.copy()


# ---- 7. padding and position ids -----------------------------------------------------

def check_position_ids(
    position_ids,
    attention_mask=None,
    *,
    packed: bool = False,
    padding_min: int | None = 0,
) -> None:
    """Raise if some real token's position is not the number of real tokens before it.

    This is what transformers' ``generate`` passes, and what a model needs whatever
    the padding side. Three cases:

    * prefill: ``position_ids (b, s)`` and ``attention_mask (b, s)``, with padding (0)
      on either side; the real tokens of every row count ``0, 1, 2, ...``;
    * a cached continuation (a decode step, or a chunk of a chunked prefill):
      ``position_ids (b, s)`` for the ``s`` new tokens and ``attention_mask (b, k)``
      over the ``k >= s`` cached and new tokens, as ``generate`` passes them; the new
      tokens continue the count of real tokens in the cache;
    * a packed row (``packed=True``, no cache): positions restart at 0 where a document
      starts and go up by 1 otherwise.

    Args:
        position_ids: integer ``(b, s)``, or ``(1, s)`` for every row.
        attention_mask: ``(b, k)`` of 1 (token) and 0 (padding), ``k >= s``; None
            means no padding and no cache.
        packed: whether a row may hold several documents.
        padding_min: the smallest position a padding token may have; a table lookup at
            -1 reads the table's last row (``nn.Embedding`` raises). OPT writes -1 on
            padding and adds 2 to every position: pass -1 or None (no check) for it.

    The positions from the mask, ``(mask.cumsum(-1) - 1).clamp(min=0)[:, -s:]``, pass;
    without ``clamp`` left padding gets -1.
    """
    ids = _array("position_ids", position_ids, ndim=2, shape="(b, s)")
    if not np.array_equal(ids, np.round(ids)):
        raise ValueError("position_ids must hold whole numbers")
    if attention_mask is None:
        mask = np.ones(ids.shape)
    else:
        mask = _array("attention_mask", attention_mask, ndim=2, shape="(b, k)")
    if ids.shape[0] == 1:
        ids = np.repeat(ids, mask.shape[0], axis=0)
    s, k = ids.shape[1], mask.shape[1]
    if ids.shape[0] != mask.shape[0] or k < s:
        raise ValueError(
            f"position_ids {ids.shape} needs an attention_mask (b, k) with the same b "
            f"and k >= {s} (the cached and the new tokens), got {mask.shape}"
        )
    if not np.all((mask == 0) | (mask == 1)):
        raise ValueError("attention_mask must hold only 0 (padding) and 1 (token)")
    if not isinstance(packed, bool):
        raise TypeError(f"packed must be True or False, got {packed!r}")
    if packed and k > s:
        raise ValueError(
            "packed=True checks whole rows; this mask also covers cached tokens "
            f"(k = {k} > s = {s})"
        )
    if padding_min is not None:
        padding_min = _checks.integer("padding_min", padding_min)
    cached = mask[:, : k - s].sum(axis=1)
    hint = "(mask.cumsum(-1) - 1).clamp(min=0)" + (f"[:, -{s}:]" if k > s else "")
    for row, (pos, keep) in enumerate(zip(ids, mask[:, k - s :].astype(bool))):
        low = pos[~keep]
        if padding_min is not None and low.size and low.min() < padding_min:
            raise ValueError(
                f"row {row}: a padding token has position {int(low.min())}, below "
                f"{padding_min}: a table lookup at -1 reads the last row; clamp them, "
                f"{hint}"
            )
        got = pos[keep]
        if packed:
            steps = np.diff(got)
            if got.size and (got[0] != 0 or np.any((steps != 1) & (got[1:] != 0))):
                raise ValueError(
                    f"row {row}: positions {got[:8].astype(int).tolist()}... do not "
                    "start at 0 and go up by 1 within each document (a restart at 0 "
                    "starts a document)"
                )
            continue
        start = int(cached[row])
        expected = start + np.arange(keep.sum())
        if not np.array_equal(got, expected):
            shown = got[:4].astype(int).tolist()
            where = f"after {start} cached real tokens " if k > s else ""
            restart = got.size > 1 and got[0] == 0 and np.any(got[1:] == 0)
            raise ValueError(
                f"row {row}: its {keep.sum()} real tokens {where}have positions "
                f"{shown}..., not {start}, {start + 1}, {start + 2}, ...; compute "
                f"position ids from the mask, {hint}"
                + ("; if the row packs documents, pass packed=True" if restart else "")
            )


# ---- 8. the dtype of position buffers ----------------------------------------------

def low_precision_buffers(model: torch.nn.Module) -> dict[str, torch.dtype]:
    """The floating-point buffers of ``model`` stored in less than float32.

    ``model.to(torch.bfloat16)``, ``.half()`` and ``.bfloat16()`` cast buffers with the
    parameters, among them the ``inv_freq`` of transformers' rotary modules: the angle
    ``m * inv_freq`` then carries bfloat16's relative error of up to 2**-8, radians
    at positions in the thousands. An empty dict means no buffer was rounded.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    return {
        name: buffer.dtype
        for name, buffer in model.named_buffers(remove_duplicate=False)
        if buffer.is_floating_point() and torch.finfo(buffer.dtype).bits < 32
    }


def to_keeping_buffers(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """``model.to(dtype)``, with RoPE's frequency buffers kept as they were.

    Every buffer whose name ends in ``inv_freq`` (transformers' ``inv_freq``,
    ``original_inv_freq`` and their per-layer-type forms) keeps its float32 values, as
    ``from_pretrained(..., dtype=...)`` keeps them: the angle ``m * inv_freq`` would
    carry their rounding times the position. The parameters and every other buffer are
    cast, as ``.to()`` casts them: a table added to the activations (XGLM's sinusoidal
    ``embed_positions.weights``) must have their dtype, and a rounded table of values
    is off by one rounding at every position, not by an error that grows with it.
    (Casting a rounded buffer back to float32 afterwards would not undo the rounding;
    :func:`companion.doctor.restore_position_buffers` recomputes it.) Returns
    ``model``, changed in place like ``.to()``.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")
    kept = {
        name: buffer
        for name, buffer in model.named_buffers(remove_duplicate=False)
        if buffer.is_floating_point() and name.endswith("inv_freq")
    }
    model.to(dtype)
    for name, buffer in kept.items():
        owner, _, attr = name.rpartition(".")
        model.get_submodule(owner)._buffers[attr] = buffer
    return model


# ---- training runs -------------------------------------------------------------------

def train_and_evaluate(
    config: ModelConfig,
    train_config,
    source: MarkovChain,
    eval_lens: Sequence[int],
    num_tokens: int,
    token_init_std: float | None = None,
) -> dict:
    """One run of :func:`checklist_runs`: train, then evaluate; plain data only.

    ``token_init_std`` rescales the model's freshly drawn token table to that standard
    deviation before training (same random directions), e.g. 1.0 for ``nn.Embedding``'s
    default. For an absolute table, ``"offset"`` holds the loss at each position of a
    window of ``train_len`` tokens (:func:`~companion.train.loss_by_position`), with
    positions numbered from 0, as trained, and from 1 (:func:`shift_positions`),
    ``(2, train_len - 1)``.
    """
    from companion.train import evaluate, loss_by_position, train

    # as train() does, so the model is the one it would build
    torch.manual_seed(train_config.seed)
    model = TinyDecoder(config)
    if token_init_std is not None:
        with torch.no_grad():
            model.token.weight.mul_(
                token_init_std / model.token.weight.shape[1] ** -0.5
            )
    model, history = train(config, train_config, source, model=model)
    out = {
        "loss": [
            evaluate(model, source, [n], num_tokens=num_tokens)[n] for n in eval_lens
        ],
        "history": history,
        "offset": None,
    }
    if config.position in ABSOLUTE:
        length = train_config.seq_len
        out["offset"] = [
            loss_by_position(m, source, length).tolist()
            for m in (model, shift_positions(model, 1))
        ]
    return out


def checklist_runs(
    settings: dict[str, dict],
    seeds: Sequence[int] | None = None,
    *,
    train_len: int = 32,
    eval_lens: Sequence[int] | None = None,
    steps: int = 300,
    batch_size: int = 16,
    lr: float = 1e-2,
    num_tokens: int = 8192,
    source: MarkovChain | None = None,
    workers: int | None = None,
) -> dict:
    """Train one small model per setting and seed, in parallel; evaluate each at
    ``eval_lens``.

    Each setting is a dict of :class:`~companion.model.ModelConfig` fields
    (``vocab_size`` comes from the source, ``max_len`` defaults to the longest
    evaluation length) plus, optionally, ``"token_init_std"`` (see
    :func:`train_and_evaluate`). The defaults are the debugging chapter's budget: width
    32 (set ``"dim"`` in a setting to change it), 300 steps of 16 sequences at learning
    rate 0.01.

    Returns:
        ``{"seeds", "lens", "steps", "floor_by_length", "loss": {name: (seeds, lens)},
        "offset": {name: (seeds, 2, train_len - 1)} (absolute tables only: the loss at
        each position, with positions numbered from 0 and from 1),
        "history": {name: (seeds, steps)}}``.
    """
    from companion import lab
    from companion.train import TrainConfig, floor_by_length

    source = lab.default_source() if source is None else source
    if not isinstance(source, MarkovChain):
        raise TypeError(f"source must be a MarkovChain, got {type(source).__name__}")
    if not isinstance(settings, dict) or not settings:
        raise TypeError(
            "settings must be a non-empty dict {name: {ModelConfig field: value}}"
        )
    seeds = [
        _checks.integer("seed", seed)
        for seed in (lab.SEEDS if seeds is None else seeds)
    ]
    if not seeds:
        raise ValueError("seeds must name at least one seed, e.g. (0, 1, 2, 3, 4)")
    train_len = _checks.positive_int("train_len", train_len)
    lens = (
        [train_len]
        if eval_lens is None
        else [_checks.positive_int("eval length", n) for n in eval_lens]
    )
    tasks = []
    for name, options in settings.items():
        if not isinstance(options, dict):
            raise TypeError(
                f"settings[{name!r}] must be a dict of ModelConfig fields, got "
                f"{type(options).__name__}"
            )
        options = {"dim": 32, "max_len": max(lens + [train_len]), **options}
        init = options.pop("token_init_std", None)
        if init is not None and _checks.real("token_init_std", init) <= 0:
            raise ValueError(f"token_init_std must be positive, got {init}")
        unknown = sorted(set(options) - FIELDS)
        if unknown:
            raise ValueError(
                f"settings[{name!r}] has unknown keys {unknown}; use ModelConfig "
                "fields or token_init_std"
            )
        config = ModelConfig(vocab_size=source.vocab_size, **options)
        for seed in seeds:
            train_config = TrainConfig(
                steps=steps, batch_size=batch_size, seq_len=train_len, lr=lr, seed=seed
            )
            tasks.append((config, train_config, source, lens, num_tokens, init))
    runs = lab.run_parallel(train_and_evaluate, tasks, workers)
    per = {
        name: runs[i * len(seeds) : (i + 1) * len(seeds)]
        for i, name in enumerate(settings)
    }
    return {
        "seeds": seeds,
        "lens": lens,
        "steps": steps,
        "floor_by_length": floor_by_length(source, lens),
        "loss": {name: np.array([r["loss"] for r in rs]) for name, rs in per.items()},
        "offset": {
            name: np.array([r["offset"] for r in rs])
            for name, rs in per.items()
            if rs[0]["offset"] is not None
        },
        "history": {
            name: np.array([r["history"] for r in rs]) for name, rs in per.items()
        },
    }
