"""A position doctor: the checks that find position bugs, run on a causal LM.

``diagnose(model)`` takes the book's :class:`~companion.model.TinyDecoder` or any
``transformers`` causal LM and returns a list of :class:`Finding`. Most checks run the
same random token sequences twice, in a batch (right-padded, left-padded, packed) or
through a cache (one token at a time, in chunks), and once each alone in one plain pass,
and compare the logits of every real token. The tokens are the same in both runs, so a
gap comes from their positions, their mask, or something else that crosses the batch:
the batching, padding, packing and cache bugs. The comparisons run on a float64 copy of
the model, so that rounding is not mistaken for a bug; one check compares the model in
its own dtype with that copy, and one reads the dtype of every position buffer.

Each finding has a status:

* ``"pass"``: batch or cache and alone agree within the tolerance;
* ``"fail"``: they do not, or a buffer that multiplies positions (RoPE's ``inv_freq``,
  ALiBi's slopes) is below float32: a bug in the model or its buffers;
* ``"warn"``: not a bug in the model, but something to know: a common call that gives
  some tokens the wrong positions (the finding names the call that works), frequencies
  that depend on the batch, a table of values stored in bfloat16, or a reference run in
  float32 because float64 does not work for this model;
* ``"skip"``: the check does not apply (its detail says why).

What no comparison of a model with itself can find: a bug that gives every call the
same wrong positions (every position off by one, a RoPE layout mismatched with its
checkpoint, a window of the wrong size in both mask and cache), and bugs that appear
only at positions the sequences do not reach (by default about 11: a table too short, a
scaling threshold, a long window; pass longer ``lengths`` and ``max_tokens``). Chapter
16's checklist, and a comparison with a reference implementation, find those.

From the command line, on a local checkpoint folder or a ``config.json`` (random
weights; nothing is downloaded)::

    python -m companion.doctor PATH [--dtype bfloat16] [--lengths 7,4,9]

Conventions: ``transformers`` 5.24 (``cache``, formerly ``past_key_values``;
``position_ids``; ``DynamicCache``); a packed row restarts its position ids at each
document, as ``DataCollatorWithFlattening`` writes them.
"""

from __future__ import annotations

import argparse
import copy
import inspect
import itertools
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from companion.batching import (
    document_ids_from_position_ids,
    pack,
    packed_attention_mask,
    pad_batch,
    position_ids_from_attention_mask,
)
from companion.model import TinyDecoder

STATUSES = ("pass", "fail", "warn", "skip")
CHECKS = (
    "position buffers",
    "float64 reference",
    "right-padded batch",
    "left-padded batch, forward",
    "left-padded batch, generate",
    "packed batch",
    "packed batch, default call",
    "cached decoding",
    "chunked prefill",
    "dynamic scaling",
    "sliding window",
)
# Buffers that hold positions: RoPE frequencies and tables, sinusoidal tables, slopes;
# of those, the ones multiplied by a position (so their rounding grows with it).
POSITION_BUFFER = re.compile(
    r"inv_freq|rotary|rope|position|pos_emb|alibi|slopes|(^|[._])(cos|sin)(_\w*)?$"
)


MULTIPLIES_POSITIONS = re.compile(r"inv_freq|slopes|alibi")


@dataclass(frozen=True)
class Finding:
    """One check's result: ``check`` (a name in ``CHECKS``), ``status`` (one of
    ``STATUSES``), ``detail`` (one line, with the measured number) and ``value``
    (the measured number itself, or None)."""

    check: str
    status: str
    detail: str
    value: float | None = None

    @property
    def passed(self) -> bool:
        """True unless the status is ``"fail"`` (a warning or a skip is not a bug)."""
        return self.status != "fail"

    def __str__(self) -> str:
        return f"{self.status.upper():4}  {self.check:28} {self.detail}"


def _fmt(value: float) -> str:
    """A measured gap: two significant digits, marked as measured (``≈0.27``)."""
    return f"≈{value:.2g}"


def _bound(tolerance: float) -> str:
    return f"within {tolerance:.0e}"


# --- the two kinds of model -----------------------------------------------------------


class _Runner:
    """Calls a TinyDecoder or a transformers model the way its users call it. Inputs
    are moved to the model's device; logits come back as float64 on the CPU."""

    def __init__(self, model):
        self.model = model
        self.tiny = isinstance(model, TinyDecoder)
        self.config = model.config
        params = (
            set() if self.tiny else set(inspect.signature(model.forward).parameters)
        )
        self.takes_positions = self.tiny or "position_ids" in params
        # transformers 5.24 renamed past_key_values to cache (the old name warns).
        self.cache_arg = "cache" if "cache" in params else "past_key_values"
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype

    @property
    def vocab_size(self) -> int:
        return int(self.config.vocab_size)

    @property
    def pad_id(self) -> int:
        pad = None if self.tiny else getattr(self.config, "pad_token_id", None)
        return int(pad) if isinstance(pad, int) and 0 <= pad < self.vocab_size else 0

    def _to(self, *tensors):
        return [None if t is None else t.to(self.device) for t in tensors]

    def logits(self, ids, *, mask=None, position_ids=None, **kwargs) -> torch.Tensor:
        """Logits ``(b, s, V)`` of one forward pass on ``ids (b, s)``."""
        ids, mask, position_ids = self._to(ids, mask, position_ids)
        with torch.no_grad():
            if self.tiny:
                if mask is not None and mask.ndim == 3:
                    mask = mask.bool()
                out = self.model(ids, attention_mask=mask, position_ids=position_ids)
            else:
                extra = {} if position_ids is None else {"position_ids": position_ids}
                out = self.model(
                    input_ids=ids, attention_mask=mask, **extra, **kwargs
                ).logits
        return out.double().cpu()

    def cached(self, ids, chunk: int, *, prefill: int | None = None) -> torch.Tensor:
        """Logits ``(1, s, V)`` of ``ids (1, s)`` fed through a cache: ``prefill``
        tokens first (default: ``chunk``), then ``chunk`` tokens per call."""
        (ids,) = self._to(ids)
        first = chunk if prefill is None else prefill
        bounds = [0, first] + list(range(first + chunk, ids.shape[1], chunk))
        bounds = sorted({b for b in bounds if b < ids.shape[1]}) + [ids.shape[1]]
        out, cache = [], None
        with torch.no_grad():
            if self.tiny:
                cache = self.model.new_cache()
            for lo, hi in itertools.pairwise(bounds):
                if self.tiny:
                    out.append(self.model(ids[:, lo:hi], cache=cache))
                    continue
                step = self.model(
                    input_ids=ids[:, lo:hi], use_cache=True, **{self.cache_arg: cache}
                )
                cache = step[self.cache_arg]
                out.append(step.logits)
        return torch.cat(out, dim=1).double().cpu()

    def generate(self, ids, mask, new_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy decoding of a batch ``ids (b, s)`` with its ``mask (b, s)``: the new
        tokens ``(b, n)`` and the raw logits that chose them ``(b, n, V)``."""
        ids, mask = self._to(ids, mask)
        with torch.no_grad():
            if not self.tiny:
                out = self.model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    max_new_tokens=new_tokens,
                    min_new_tokens=new_tokens,
                    do_sample=False,
                    pad_token_id=self.pad_id,
                    output_logits=True,
                    return_dict_in_generate=True,
                )
                logits = torch.stack(out.logits, dim=1).double().cpu()
                return out.sequences[:, ids.shape[1] :].cpu(), logits
            cache, tokens, steps = self.model.new_cache(), ids, []
            for _ in range(new_tokens):
                logits = self.model(tokens, attention_mask=mask, cache=cache)[:, -1]
                steps.append(logits)
                tokens = logits.argmax(-1, keepdim=True)
                mask = torch.cat([mask, torch.ones_like(tokens)], dim=1)
            logits = torch.stack(steps, dim=1).double().cpu()
            return logits.argmax(-1), logits


def _copy(model, dtype: torch.dtype):
    return copy.deepcopy(model).to(dtype).eval()


# --- what the checks compare ----------------------------------------------------------


def _sequences(run: _Runner, lengths: Sequence[int], seed: int) -> list[torch.Tensor]:
    """Random token ids ``(n,)`` per length (id 0 left out: it is often padding)."""
    gen = torch.Generator().manual_seed(seed)
    low = 1 if run.vocab_size > 2 else 0
    return [torch.randint(low, run.vocab_size, (n,), generator=gen) for n in lengths]


def _padded(run: _Runner, seqs, side: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids ``(b, s)`` and mask ``(b, s)`` of ``seqs`` padded on ``side``."""
    return pad_batch(seqs, pad_id=run.pad_id, side=side)


def _rows(logits, mask) -> list[torch.Tensor]:
    """The logits ``(n_i, V)`` of each row's real tokens, from ``(b, s, V)``."""
    return [row[m.bool()] for row, m in zip(logits, mask.cpu())]


def _finite_when_padded(run: _Runner, seqs) -> bool:
    ids, mask = _padded(run, seqs, "left")
    return bool(torch.cat(_rows(run.logits(ids, mask=mask), mask)).isfinite().all())


def _alone(run: _Runner, seqs) -> list[torch.Tensor]:
    """Each sequence's logits ``(n_i, V)``, run alone in one plain pass."""
    return [run.logits(s[None])[0] for s in seqs]


def _gap(batch_rows: Sequence[torch.Tensor], alone: Sequence[torch.Tensor]) -> float:
    """The largest absolute difference between matching ``(n_i, V)`` logits."""
    return max(float((a - b).abs().max()) for a, b in zip(batch_rows, alone))


def _scale(alone: Sequence[torch.Tensor]) -> float:
    """``max(1, max |logit|)``: tolerances are relative to it."""
    return max(1.0, max(float(a.abs().max()) for a in alone))


# --- the checks -----------------------------------------------------------------------


def _angle_error(buffer, reference, position: int) -> float:
    """``max_i |m (θ_i - θ̂_i)|`` at ``m = position``, for frequencies ``(d/2,)``."""
    diff = buffer.double().flatten().cpu() - reference.double().flatten()
    return float((diff.abs() * position).max())


def _reference_inv_freqs(module) -> dict[str, torch.Tensor]:
    """The float32 ``inv_freq`` ``(d/2,)`` a transformers rotary module computes at
    init, by the buffer name it is stored under; empty where it cannot be recomputed."""
    try:
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    except ImportError:  # pragma: no cover - transformers is pinned
        return {}
    config = getattr(module, "config", None)
    rope_type = getattr(module, "rope_type", None)
    if config is None or rope_type is None:
        return {}
    kinds = rope_type.items() if isinstance(rope_type, dict) else [(None, rope_type)]
    out = {}
    for layer_type, kind in kinds:
        fn = ROPE_INIT_FUNCTIONS.get(kind)
        if kind == "default" or fn is None:
            fn = getattr(module, "compute_default_rope_parameters", None)
        if fn is None:
            continue
        kwargs = {} if layer_type is None else {"layer_type": layer_type}
        try:
            inv_freq, _ = fn(config, device=torch.device("cpu"), **kwargs)
        except (TypeError, KeyError, ValueError, AttributeError):
            continue  # a config this version cannot rebuild: dtype check only
        prefix = "" if layer_type is None else f"{layer_type}_"
        out[f"{prefix}original_inv_freq"] = inv_freq.float()
        if kind not in ("dynamic", "longrope"):  # these rewrite inv_freq as they run
            out[f"{prefix}inv_freq"] = inv_freq.float()
    return out


def _restorable(module, buf_name: str, refs: dict) -> str | None:
    if buf_name in refs:
        return buf_name
    original = buf_name.replace("inv_freq", "original_inv_freq")
    return original if buf_name.endswith("inv_freq") and original in refs else None


def restore_position_buffers(model) -> list[str]:
    """Recompute, in float32, the RoPE frequencies of every ``transformers`` rotary
    module of ``model`` (``inv_freq``, ``original_inv_freq`` and their per-layer-type
    forms), as its ``__init__`` computed them; return the names of the buffers
    rewritten. The fix for ``model.to(torch.bfloat16)``, which rounds them: casting them
    back with ``.float()`` keeps the rounded values. Other position buffers (a
    TinyDecoder's cos/sin tables, GPT-J's ``embed_positions``) are not recomputed:
    rebuild or reload that model instead."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    done = []
    for mod_name, module in model.named_modules():
        refs = _reference_inv_freqs(module)
        for buf_name, buf in list(module.named_buffers(recurse=False)):
            key = _restorable(module, buf_name, refs)
            if key is None:
                continue
            setattr(module, buf_name, refs[key].clone().to(buf.device))
            done.append(f"{mod_name}.{buf_name}" if mod_name else buf_name)
    return done


def check_position_buffers(model, position: int | None = None) -> Finding:
    """Every floating-point buffer that holds positions (RoPE frequencies, cos/sin
    tables, sinusoidal tables, ALiBi slopes) must be float32 or float64:
    ``model.to(torch.bfloat16)`` casts them too. Where the module can recompute its
    frequencies, the angle error ``max_i |m (θ_i - θ̂_i)|`` at ``position`` (default:
    the configuration's maximum length) is measured."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    config = getattr(model, "config", None)
    position = position or int(
        getattr(config, "max_position_embeddings", 0)
        or getattr(config, "max_len", 0)
        or 4096
    )
    names, low, tables, worst, fixable = [], [], [], 0.0, True
    for mod_name, module in model.named_modules():
        refs = _reference_inv_freqs(module)
        for buf_name, buf in module.named_buffers(recurse=False):
            full = f"{mod_name}.{buf_name}" if mod_name else buf_name
            if not buf.is_floating_point() or not POSITION_BUFFER.search(full):
                continue
            names.append(full)
            key = _restorable(module, buf_name, refs)
            if buf.dtype not in (torch.float32, torch.float64):
                what = f"{full} is {str(buf.dtype).removeprefix('torch.')}"
                # A frequency or slope multiplies the position: its rounding grows
                # with it. A table of cos, sin or sinusoid values is rounded once.
                if MULTIPLIES_POSITIONS.search(full):
                    low.append(what)
                    fixable = fixable and key is not None
                else:
                    tables.append(what)
            if key is not None:
                worst = max(worst, _angle_error(buf, refs[key], position))
    if not names:
        return Finding(
            "position buffers",
            "skip",
            "no floating-point position buffer (positions come from parameters or "
            "are computed in the forward pass)",
        )
    if low:
        angle = f"; angles off by up to {_fmt(worst)} rad at position {position}"
        fix = (
            "doctor.restore_position_buffers(model) recomputes them in float32"
            if fixable
            else "rebuild the model in float32, or cast only its parameters"
        )
        return Finding(
            "position buffers",
            "fail",
            ", ".join(low + tables)
            + (angle if worst else "")
            + f": the values are rounded, so .float() does not restore them; {fix}",
            worst,
        )
    if tables:
        return Finding(
            "position buffers",
            "warn",
            ", ".join(tables)
            + ": a table of values rounded once (about 2**-9 of each entry in "
            "bfloat16, not growing with the position); float32 is exact to 2**-24",
        )
    return Finding(
        "position buffers",
        "pass",
        f"{len(names)} position buffer(s), all float32 or float64 ({names[0]}"
        + (", ..." if len(names) > 1 else "")
        + ")",
        worst,
    )


# How far a healthy model in each dtype may stray from its float64 copy: 32 times the
# dtype's machine epsilon (0.25 in bfloat16), and at least 1e-3, times
# max(1, max |logit|). Rounding at every layer adds up; a position bug in one dtype's
# code path moves the logits by far more.
ROUNDING_UNITS = 32


def _check_reference(
    run: _Runner, ref: _Runner, seq, tolerance: float, fallback: str
) -> Finding:
    name = "float64 reference"
    ours_dtype = str(run.dtype).removeprefix("torch.")
    ref_dtype = str(ref.dtype).removeprefix("torch.")
    if fallback:
        return Finding(
            name,
            "warn",
            f"{fallback}: the checks below run on a float32 copy, within "
            f"{tolerance:.0e}",
        )
    if run.dtype == ref.dtype:
        return Finding(
            name, "skip", f"the model is {ours_dtype} already: the checks run on a copy"
        )
    ours = run.logits(seq[None])
    theirs = ref.logits(seq[None])
    if not bool(ours.isfinite().all()):
        return Finding(
            name, "fail", f"the model gives non-finite logits in {ours_dtype}"
        )
    gap = float((ours - theirs).abs().max())
    scale = max(1.0, float(theirs.abs().max()))
    allowed = max(ROUNDING_UNITS * torch.finfo(run.dtype).eps, 1e-3) * scale
    if gap > allowed:
        return Finding(
            name,
            "fail",
            f"one sequence in {ours_dtype} differs from {ref_dtype} by {_fmt(gap)}, "
            f"more than {ours_dtype}'s rounding explains (up to {_fmt(allowed)}): a "
            f"bug in the {ours_dtype} code path, which the comparisons below (on the "
            "copy) cannot see",
            gap,
        )
    agrees = (
        f"agrees with {ref_dtype} ({_bound(tolerance * scale)})"
        if gap <= tolerance * scale
        else f"differs from {ref_dtype} by {_fmt(gap)}, within what {ours_dtype}'s "
        f"rounding may give (up to {_fmt(allowed)} allowed): rounding explains it, "
        f"and a bug in the {ours_dtype} code path smaller than that would not show"
    )
    return Finding(
        name,
        "pass",
        f"one sequence in {ours_dtype} {agrees}; the checks below run in {ref_dtype}, "
        f"within {tolerance:.0e}",
        gap,
    )


def _compare(
    name, gap, scale, tolerance, what, fix="", warn=False, against="each sequence alone"
) -> Finding:
    bound = tolerance * scale
    if gap <= bound:
        return Finding(name, "pass", f"{what} matches {against} ({_bound(bound)})", gap)
    status = "warn" if warn else "fail"
    return Finding(
        name, status, f"{what} differs from {against} by {_fmt(gap)}{fix}", gap
    )


def _check_right(ref, seqs, alone, tol) -> Finding:
    ids, mask = _padded(ref, seqs, "right")
    gap = _gap(_rows(ref.logits(ids, mask=mask), mask), alone)
    return _compare(
        "right-padded batch",
        gap,
        _scale(alone),
        tol,
        "model(ids, attention_mask)",
        ": with right padding the positions are those of each sequence alone, so "
        "something else in the batch reaches the real tokens",
    )


def _check_left_forward(ref, seqs, alone, tol) -> Finding:
    name = "left-padded batch, forward"
    ids, mask = _padded(ref, seqs, "left")
    gap = _gap(_rows(ref.logits(ids, mask=mask), mask), alone)
    scale = _scale(alone)
    if gap <= tol * scale or not ref.takes_positions:
        return _compare(name, gap, scale, tol, "model(ids, attention_mask)")
    pos = position_ids_from_attention_mask(mask)
    fixed = _gap(_rows(ref.logits(ids, mask=mask, position_ids=pos), mask), alone)
    if fixed > tol * scale:
        warn = False
        fix = (
            f", and by {_fmt(fixed)} with position_ids from the mask: the padding "
            "mask itself is not applied"
        )
    else:
        warn = True
        fix = (
            ": a plain forward numbers padding as positions (generate does not); pass "
            "position_ids=(mask.cumsum(-1) - 1).clamp(min=0) "
            f"({_bound(tol * scale)} then)"
        )
    return _compare(name, gap, scale, tol, "model(ids, attention_mask)", fix, warn)


def _check_generate(ref, seqs, tol, new_tokens=3) -> Finding:
    """Greedy ``generate`` on the left-padded batch: the logits of each step against
    one plain pass over that row's prompt and generated tokens, alone."""
    if not ref.tiny and not hasattr(ref.model, "generate"):
        return Finding(
            "left-padded batch, generate", "skip", "the model has no generate"
        )
    ids, mask = _padded(ref, seqs, "left")
    tokens, logits = ref.generate(ids, mask, new_tokens)
    gap = 0.0
    for i, seq in enumerate(seqs):
        text = torch.cat([seq, tokens[i, :-1]])
        full = ref.logits(text[None])[0, len(seq) - 1 :]
        gap = max(gap, float((logits[i] - full).abs().max()))
    scale = max(1.0, float(logits.abs().max()))
    return _compare(
        "left-padded batch, generate",
        gap,
        scale,
        tol,
        f"each step of greedy generate ({new_tokens} tokens)",
        against="one pass over the row's own prompt and tokens",
    )


def _infers_documents(ref, ids, pos) -> bool:
    """Whether a forward with ``use_cache=False`` hands its position ids to
    transformers' packed-sequence detection (most decoders of transformers 5 do; OPT,
    BLOOM, MPT and others never infer documents)."""
    from transformers import masking_utils

    original = masking_utils.find_packed_sequence_indices
    calls = []

    def spy(position_ids, *args, **kwargs):
        calls.append(position_ids is not None)
        return original(position_ids, *args, **kwargs)

    masking_utils.find_packed_sequence_indices = spy
    try:
        ref.logits(ids, position_ids=pos, use_cache=False)
    finally:
        masking_utils.find_packed_sequence_indices = original
    return any(calls)


def _block_mask(position_ids, dtype) -> torch.Tensor:
    """A 4-D additive mask ``(1, 1, n, n)`` for a packed row's ``position_ids (1, n)``:
    0 where a token may attend (its own document, causally), else the dtype's min."""
    allowed = packed_attention_mask(document_ids_from_position_ids(position_ids))
    allowed = allowed & torch.ones_like(allowed[0]).tril()  # (1, n, n)
    mask = torch.zeros(allowed.shape, dtype=dtype)
    return mask.masked_fill(~allowed, torch.finfo(dtype).min)[:, None]


def _check_packed(ref, seqs, alone, tol) -> list[Finding]:
    name = "packed batch"
    if not ref.takes_positions:
        skip = "the model takes no position_ids, so a packed row cannot restart them"
        return [
            Finding(name, "skip", skip),
            Finding(f"{name}, default call", "skip", skip),
        ]
    ids, pos = pack(seqs)
    lengths = [len(s) for s in seqs]

    def rows(logits):
        return list(torch.split(logits[0], lengths))

    scale = _scale(alone)
    if not ref.tiny and not _infers_documents(ref, ids, pos):
        return _packed_without_inference(ref, ids, pos, lengths, alone, tol)
    if ref.tiny:
        allowed = packed_attention_mask(document_ids_from_position_ids(pos))
        good = _gap(rows(ref.logits(ids, mask=allowed, position_ids=pos)), alone)
        calls = (
            "model(row, attention_mask=packed_attention_mask(docs), position_ids)",
            "model(row, position_ids) without a document mask",
        )
        fixes = ("", ": documents attend to each other; pass the block-diagonal mask")
    else:
        good = _gap(rows(ref.logits(ids, position_ids=pos, use_cache=False)), alone)
        calls = (
            "model(row, position_ids, use_cache=False)",
            "model(row, position_ids) with use_cache at its default",
        )
        fixes = (
            ": the documents' mask inferred from position_ids lets them leak",
            (
                ": documents attend to each other (transformers infers the document "
                "mask only with no mask and no cache); pass use_cache=False, as "
                "Trainer does"
            ),
        )
    plain = _gap(rows(ref.logits(ids, position_ids=pos)), alone)
    return [
        _compare(name, good, scale, tol, calls[0], fixes[0]),
        _compare(f"{name}, default call", plain, scale, tol, calls[1], fixes[1], True),
    ]


def _packed_without_inference(ref, ids, pos, lengths, alone, tol) -> list[Finding]:
    """A transformers model whose mask never sees position ids (OPT, BLOOM): how much
    a packed row leaks, and whether a 4-D block-diagonal mask repairs it."""
    scale = _scale(alone)

    def gap(**kwargs):
        logits = ref.logits(ids, position_ids=pos, use_cache=False, **kwargs)
        return _gap(list(torch.split(logits[0], lengths)), alone)

    leak, block = gap(), gap(mask=_block_mask(pos, ref.dtype))
    works = (
        f"with a 4-D block-diagonal attention_mask it matches ({_bound(tol * scale)})"
        if block <= tol * scale
        else f"a 4-D block-diagonal attention_mask gives {_fmt(block)}: pad instead "
        "of packing"
    )
    detail = (
        "this model never infers documents from position_ids (they do not reach its "
        f"mask): model(row, position_ids) leaks by {_fmt(leak)}; {works}"
    )
    skip = "see packed batch: this model never infers documents"
    return [
        Finding("packed batch", "warn", detail, leak),
        Finding("packed batch, default call", "skip", skip),
    ]


def _check_cached(ref, seq, full, tol, chunk, prefill, name, what) -> Finding:
    got = ref.cached(seq[None], chunk, prefill=prefill)[0]
    gap = float((got - full).abs().max())
    scale = max(1.0, float(full.abs().max()))
    return _compare(name, gap, scale, tol, what, against="the full pass")


def _rope_params(config) -> list[dict]:
    params = getattr(config, "rope_parameters", None) or {}
    if not isinstance(params, dict):
        return []
    if "rope_type" in params:
        return [params]
    return [v for v in params.values() if isinstance(v, dict) and "rope_type" in v]


def _rope_types(config) -> set[str]:
    return {p["rope_type"] for p in _rope_params(config)}


def _switch_length(config) -> int | None:
    """Where dynamic NTK or LongRoPE change their frequencies; None if static."""
    for p in _rope_params(config):
        if p.get("rope_type") == "longrope":
            return int(
                p.get("original_max_position_embeddings")
                or getattr(config, "original_max_position_embeddings", 0)
                or config.max_position_embeddings
            )
        if p.get("rope_type") == "dynamic":
            return int(config.max_position_embeddings)
    return None


def _check_dynamic(ref, lengths, tol, max_tokens, seed) -> Finding:
    name = "dynamic scaling"
    if ref.tiny:
        return Finding(name, "skip", "a TinyDecoder's RoPE scaling is static")
    switch = _switch_length(ref.config)
    if switch is None:
        kinds = ", ".join(sorted(_rope_types(ref.config))) or "no rope_parameters"
        return Finding(name, "skip", f"no dynamic RoPE scaling ({kinds})")
    long_len = 2 * switch + 2
    if long_len > max_tokens:
        return Finding(
            name,
            "skip",
            f"needs a {long_len}-token sequence, over max_tokens={max_tokens}",
        )
    short_len = min(min(lengths), switch)
    short, long = _sequences(ref, [short_len, long_len], seed + 1)
    alone = ref.logits(short[None])[0]
    ids, mask = _padded(ref, [short, long], "right")
    together = ref.logits(ids, mask=mask)[0, :short_len]
    batch_gap = float((together - alone).abs().max())
    full = ref.logits(long[None])[0]
    cached = ref.cached(long[None], 1, prefill=short_len)[0]
    cache_gap = float((cached - full).abs().max())
    scale = max(1.0, float(alone.abs().max()), float(full.abs().max()))
    bound = tol * scale
    shown = {g: _fmt(g) if g > bound else _bound(bound) for g in (batch_gap, cache_gap)}
    if max(batch_gap, cache_gap) <= bound:
        return Finding(
            name,
            "pass",
            f"a {short_len}-token prompt batched with a {long_len}-token one, and the "
            f"{long_len}-token one decoded through a cache, match ({_bound(bound)})",
            max(batch_gap, cache_gap),
        )
    return Finding(
        name,
        "warn",
        f"a {short_len}-token prompt batched with a {long_len}-token one differs from "
        f"itself alone by {shown[batch_gap]}; decoding the {long_len}-token one "
        f"through a cache differs from its full pass by {shown[cache_gap]}: the "
        f"frequencies follow the longest position of each call (they change past "
        f"{switch}) and cached keys keep the old ones; batch by length, or use a "
        "static scaling",
        max(batch_gap, cache_gap),
    )


def _window(run: _Runner) -> int | None:
    if run.tiny:
        return run.config.rope_window
    config = run.config
    window = getattr(config, "sliding_window", None)
    if not isinstance(window, int) or window <= 0:
        return None
    types = getattr(config, "layer_types", None)
    if types is not None and "sliding_attention" not in types:
        return None
    if getattr(config, "use_sliding_window", True) is False:
        return None
    return window


def _check_window(ref, tol, max_tokens, seed) -> Finding:
    name = "sliding window"
    window = _window(ref)
    if window is None:
        return Finding(name, "skip", "no sliding window in the config")
    length = 2 * window + 3
    if length > max_tokens:
        return Finding(
            name,
            "skip",
            f"window {window}: needs {length} tokens, over max_tokens={max_tokens}",
        )
    seq = _sequences(ref, [length], seed + 2)[0]
    full = ref.logits(seq[None])[0]
    got = ref.cached(seq[None], 1, prefill=window - 1)[0]
    gap = float((got - full).abs().max())
    scale = max(1.0, float(full.abs().max()))
    return _compare(
        name,
        gap,
        scale,
        tol,
        f"decoding {length} tokens one at a time past the window of {window}",
        ": the cache keeps the wrong keys or gives them the wrong positions",
        against="the full pass",
    )


def _dtype(name: str, given) -> torch.dtype:
    value = getattr(torch, given, None) if isinstance(given, str) else given
    if not isinstance(value, torch.dtype) or not value.is_floating_point:
        raise ValueError(
            f"{name} must be a floating torch.dtype such as torch.float64, "
            f"got {given!r}"
        )
    return value


def _check_model(model) -> None:
    if not isinstance(model, torch.nn.Module):
        raise TypeError(
            "model must be a torch.nn.Module (a TinyDecoder or a transformers causal "
            f"LM), got {type(model).__name__}"
        )
    if isinstance(model, TinyDecoder):
        return
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "vocab_size"):
        raise TypeError(
            f"model must be a TinyDecoder or a transformers causal LM, got "
            f"{type(model).__name__} (no .config with a vocab_size)"
        )
    if getattr(config, "is_encoder_decoder", False):
        raise ValueError(
            f"model is an encoder-decoder ({type(model).__name__}); diagnose checks "
            "decoder-only causal LMs (AutoModelForCausalLM)"
        )
    if hasattr(model, "can_generate") and not model.can_generate():
        raise TypeError(
            f"model must be a causal LM that can generate, got {type(model).__name__}: "
            "pass the ...ForCausalLM class (AutoModelForCausalLM), not a base model, "
            "an encoder or a masked LM"
        )
    if any(p.is_meta for p in model.parameters()):
        raise ValueError("model is on the meta device: load or initialise its weights")


def diagnose(
    model,
    *,
    lengths: Sequence[int] = (7, 4, 9),
    seed: int = 0,
    tolerance: float | None = None,
    reference_dtype: torch.dtype | str = torch.float64,
    max_tokens: int = 256,
    checks: Sequence[str] | str | None = None,
) -> list[Finding]:
    """Run the position checks on ``model`` and return one :class:`Finding` per check.

    Args:
        model: a :class:`~companion.model.TinyDecoder` or a ``transformers`` causal LM
            (``AutoModelForCausalLM``); it is not changed. The comparisons run on a copy
            in ``reference_dtype`` (a float64 copy takes four times the memory of a
            bfloat16 model).
        lengths: lengths of the random sequences batched together (at least two,
            different, of 2 or more tokens; keep them below a dynamic scaling's
            switch, where the frequencies change).
        seed: seed of the random token ids.
        tolerance: the largest gap, relative to ``max(1, max |logit|)``, counted as
            agreement. Default: 1e-5 with a float64 copy (transformers computes RoPE's
            angles in float32), 1e-4 with a float32 one. On tiny random models real
            position bugs give 1e-3 or more.
        reference_dtype: the copy's dtype; ``torch.float32`` halves the memory of the
            copy (and needs no float64 kernels, which some MoE layers lack).
        max_tokens: the longest sequence a check may build; longer checks are skipped.
        checks: names from ``CHECKS`` to run (default: all).

    What no comparison of a model with itself can find: a bug that gives every call the
    same wrong positions (every position off by one, a RoPE layout mismatched with
    its checkpoint, a window of the wrong size in both mask and cache). Chapter 16's
    checklist and a comparison with a reference implementation find those.
    """
    _check_model(model)
    lengths = [int(n) for n in lengths]
    if len(lengths) < 2 or min(lengths) < 2 or len(set(lengths)) < 2:
        raise ValueError(
            "lengths must be at least two different lengths of 2 or more, "
            f"got {lengths}"
        )
    if max(lengths) > max_tokens:
        raise ValueError(
            f"the longest of lengths={lengths} exceeds max_tokens={max_tokens}; "
            "raise max_tokens or give shorter lengths"
        )
    reference_dtype = _dtype("reference_dtype", reference_dtype)
    if tolerance is None:
        tolerance = 1e-5 if reference_dtype == torch.float64 else 1e-4
    if not tolerance > 0:
        raise ValueError(f"tolerance must be positive, got {tolerance}")
    wanted = [checks] if isinstance(checks, str) else list(checks or CHECKS)
    unknown = [c for c in wanted if c not in CHECKS]
    if unknown:
        raise ValueError(f"unknown checks {unknown}; choose from {list(CHECKS)}")
    findings: list[Finding] = []
    if "position buffers" in wanted:
        findings.append(check_position_buffers(model))
    if wanted == ["position buffers"]:
        return findings
    run = _Runner(model)
    switch = None if run.tiny else _switch_length(run.config)
    if switch is not None and max(lengths) > switch:
        raise ValueError(
            f"lengths={lengths} pass the {switch} tokens where this model's dynamic "
            "RoPE scaling changes its frequencies; give lengths below it (the "
            "'dynamic scaling' check measures the switch)"
        )
    ref = _Runner(_copy(model, reference_dtype))
    seqs = _sequences(ref, lengths, seed)
    fallback = ""
    try:
        finite = _finite_when_padded(ref, seqs)
    except RuntimeError as err:
        if reference_dtype != torch.float64:
            raise
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        finite, fallback = True, f"its float64 copy does not run ({first[:120]})"
    if (
        not finite
        and reference_dtype == torch.float64
        and _finite_when_padded(run, seqs)
    ):
        fallback = (
            "in float64 it gives NaN on a left-padded batch while its own dtype does "
            "not (its masks overflow in float64)"
        )
    if fallback:
        ref = _Runner(_copy(model, torch.float32))
        tolerance = max(tolerance, 1e-4)
    alone = _alone(ref, seqs)
    longest = seqs[lengths.index(max(lengths))]
    full = alone[lengths.index(max(lengths))]
    half = len(longest) // 2
    steps: dict[str, Callable[[], Finding | list[Finding]]] = {
        "float64 reference": lambda: _check_reference(
            run, ref, longest, tolerance, fallback
        ),
        "right-padded batch": lambda: _check_right(ref, seqs, alone, tolerance),
        "left-padded batch, forward": lambda: _check_left_forward(
            ref, seqs, alone, tolerance
        ),
        "left-padded batch, generate": lambda: _check_generate(ref, seqs, tolerance),
        "packed batch": lambda: _check_packed(ref, seqs, alone, tolerance),
        "cached decoding": lambda: _check_cached(
            ref,
            longest,
            full,
            tolerance,
            1,
            half,
            "cached decoding",
            f"a prefill of {half} tokens, then one token at a time through the cache",
        ),
        "chunked prefill": lambda: _check_cached(
            ref,
            longest,
            full,
            tolerance,
            3,
            3,
            "chunked prefill",
            "prefill in chunks of 3 tokens",
        ),
        "dynamic scaling": lambda: _check_dynamic(
            ref, lengths, tolerance, max_tokens, seed
        ),
        "sliding window": lambda: _check_window(ref, tolerance, max_tokens, seed),
    }
    packed_wanted = {"packed batch", "packed batch, default call"} & set(wanted)
    for name in CHECKS:
        if name in ("position buffers", "packed batch, default call"):
            continue
        if name not in wanted and not (name == "packed batch" and packed_wanted):
            continue
        result = steps[name]()
        for f in result if isinstance(result, list) else [result]:
            if f.check in wanted:
                findings.append(f)
    return findings


def report(findings: Sequence[Finding], title: str = "", width: int = 88) -> str:
    """The findings as a readable report: per finding its status and check, then its
    detail wrapped at ``width`` (indented); last a one-line summary."""
    lines = [title] if title else []
    for f in findings:
        lines += textwrap.wrap(
            f"{f.status.upper():4}  {f.check}: {f.detail}",
            width=width,
            subsequent_indent=" " * 6,
            break_on_hyphens=False,
        )
    counts = {s: sum(f.status == s for f in findings) for s in STATUSES}
    lines.append(
        f"{counts['fail']} failed, {counts['warn']} warning(s), "
        f"{counts['pass']} passed, {counts['skip']} skipped"
    )
    return "\n".join(lines)


def describe(model) -> str:
    """One line: the model's class, positions and dtype."""
    dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
    if isinstance(model, TinyDecoder):
        return f"TinyDecoder ({model.config.position}), {dtype}"
    kinds = ", ".join(sorted(_rope_types(model.config))) or "no rope_parameters"
    layers = getattr(model.config, "num_hidden_layers", None)
    return f"{type(model).__name__} ({kinds}), {dtype}, {layers} layers"


# --- the command line -----------------------------------------------------------------


def _has_weights(folder: Path) -> bool:
    return any(folder.glob("*.safetensors")) or any(folder.glob("pytorch_model*.bin"))


def load(path: str | Path, *, dtype: torch.dtype | None = None, seed: int = 0):
    """A transformers causal LM from a local checkpoint folder (its weights), or from a
    ``.json`` file or a folder holding only a config (random weights, ``seed``).
    Nothing is downloaded."""
    from transformers import AutoConfig, AutoModelForCausalLM

    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"path {str(path)!r} does not exist: give a checkpoint folder or a "
            "config.json"
        )
    if path.is_dir() and _has_weights(path):
        return AutoModelForCausalLM.from_pretrained(
            path, local_files_only=True, dtype=dtype or torch.float32
        ).eval()
    config_file = path if path.is_file() else path / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(
            f"no config.json in {str(path)!r}: give a checkpoint folder or a "
            "config file"
        )
    config = AutoConfig.from_pretrained(config_file, local_files_only=True)
    torch.manual_seed(seed)
    # from_config(dtype=...) keeps the position buffers float32 (so does
    # from_pretrained).
    return AutoModelForCausalLM.from_config(config, dtype=dtype or torch.float32).eval()


DTYPES = ("float32", "float64", "bfloat16", "float16")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m companion.doctor",
        description="Run the position checks on a local checkpoint or config.",
    )
    parser.add_argument("path", help="checkpoint folder, or a config.json")
    parser.add_argument(
        "--dtype",
        choices=DTYPES,
        default=None,
        help="load the model in this dtype (default float32)",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=256,
        help="the longest sequence a check may build",
    )
    parser.add_argument(
        "--reference-dtype", choices=("float64", "float32"), default="float64"
    )
    parser.add_argument(
        "--lengths",
        default="7,4,9",
        help="comma-separated lengths of the batched sequences; longer ones reach "
        "larger positions (raise --max-tokens with them)",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        lengths = [int(n) for n in args.lengths.split(",")]
    except ValueError:
        parser.error(
            f"--lengths must be integers separated by commas, got {args.lengths!r}"
        )
    if args.max_tokens < max(lengths):
        parser.error(
            f"--max-tokens ({args.max_tokens}) must be at least the longest of "
            f"--lengths ({max(lengths)})"
        )
    path = Path(args.path)
    random = not (path.is_dir() and _has_weights(path))
    dtype = None if args.dtype is None else getattr(torch, args.dtype)
    try:
        model = load(path, dtype=dtype, seed=args.seed)
        findings = diagnose(
            model,
            lengths=lengths,
            seed=args.seed,
            max_tokens=args.max_tokens,
            reference_dtype=getattr(torch, args.reference_dtype),
        )
    except (FileNotFoundError, ValueError, TypeError) as err:
        parser.error(str(err))
    weights = "random weights from the config" if random else "checkpoint weights"
    print(report(findings, title=f"Position doctor: {describe(model)}, {weights}"))
    return 1 if any(f.status == "fail" for f in findings) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
