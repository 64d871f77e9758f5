"""Every exercise of the book, in one table the book, the student edition and the grader
share.

An entry says, for one exercise label (the ``:label:`` of its ``{exercise}`` block):

* the chapter notebook it belongs to (from the label's ``chNN`` prefix and
  :data:`CHAPTERS`);
* ``names``: the names the exercise statement asks the learner to define (mostly just
  ``answer``), the only things the grader reads from the learner's kernel;
* ``checker``: the ``check_...`` function of :mod:`companion.exercises` that the grader
  calls, in its own process, on what it read (``checker(*values)``, in the order of
  ``names``);
* ``givens``: names the statement tells the learner to import from
  :mod:`companion.exercises` (the student notebook's stub imports them);
* ``function``: for an answer that is a function, a :class:`FunctionAnswer`: the grader
  draws inputs with a seed the notebook never sees, the kernel calls the learner's
  function on them and sends back only the outputs, as data
  (:mod:`companion.exercises.wire`).

Adding an exercise
------------------
1. In the chapter notebook, write the ``{exercise}`` block with
   ``:label: chNN-short-name``; its statement must name what the grader reads, e.g.
   "Store it in `answer` and call `check_...(answer)`.", then the solution between
   ``{solution-start}`` and ``{solution-end}``, as the other exercises do.
2. Add one line below, in the chapter's group, e.g.::

       _value("ch06-my-exercise", "answer", check_my_thing)

   (``_value(label, ("rerun", "answer"), check_...)`` for a checker of two values, and
   ``givens=("helper",)`` if the statement tells the learner to import ``helper`` from
   ``companion.exercises``: the student notebook's stub imports it).
3. Run ``make test TESTS=tests/test_student.py``: it fails while a notebook has a label
   the registry lacks, or the registry a label no notebook has.

A function answer needs a :class:`FunctionAnswer` (see the two of chapter 1): how to
draw secret inputs and their right outputs in the grader, and how the kernel calls the
function.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from companion.exercises import ch01
from companion.exercises import (
    check_alibi_bias_entry,
    check_alibi_half_lives,
    check_alibi_slopes_12,
    check_best_zero_shot_at_4x,
    check_chunk_floor_16,
    check_denominators,
    check_distinct_orderings,
    check_early_token_counts,
    check_equivariance_probe,
    check_expected_abs_cosine,
    check_extend_table,
    check_fairseq_mapping,
    check_first_negative,
    check_halves_to_interleaved,
    check_longest_wavelength,
    check_longrope_attention_factor,
    check_matching_init_std,
    check_mla_cache_entries,
    check_mrope_position_ids,
    check_ntk_base,
    check_ntk_base_head16,
    check_ntk_unseen_pairs,
    check_offset_only_scores,
    check_order_one_rerun,
    check_position_dim_rerun,
    check_small_base_rerun,
    check_pair_block,
    check_pe_row,
    check_permuted_weights,
    check_pooled_groups,
    check_ported_query_weight,
    check_positions_without_row,
    check_rope_halves_query_weight,
    check_rope_pair_permutation,
    check_rope_rotated_vector,
    check_rule_of_thumb_base,
    check_seed_spread_verdicts,
    check_shaw_index_matrix,
    check_shift_property,
    check_smallest_max_len,
    check_t5_buckets_of_offsets,
    check_table2_flat_methods,
    check_table_row_rms,
    check_tensor2tensor_base,
    check_tiny_yarn_gamma,
    check_wavelength_ratio,
    check_widened_concat_parameters,
    check_yarn_classes,
)
from companion.exercises.ch18 import check_alibi_slopes_of_24, check_checkpoint_layouts
from companion.exercises.ch17 import (
    check_kv_cache_entries, check_position_parameters, check_scheme_for_requirement,
)
from companion.exercises.ch15 import (
    check_left_padded_position_ids,
    check_packed_causal_mask,
    check_schemes_without_position_ids,
)
from companion.exercises.ch16 import check_fixes, check_std_ratio, check_suspect_offset
from companion.exercises._answers import as_array
from companion.exercises._feedback import Feedback

__all__ = ["CHAPTERS", "EXERCISES", "Exercise", "FunctionAnswer", "chapter_exercises",
           "chapter_of", "grade_value", "grade_function"]

# Chapter number -> notebook file name (without .ipynb), as in book/ and the student
# edition.
CHAPTERS = {
    "01": "01_why_order",
    "02": "02_input",
    "03": "03_formula",
    "04": "04_frequencies",
    "05": "05_rotation",
    "06": "06_learned_and_relative",
    "07": "07_rope",
    "08": "08_stretching_rope",
    "09": "09_alibi",
    "10": "10_porting",
    "11": "11_current_models",
    "12": "12_train_short_test_long",
    "13": "13_add_or_concat",
    "14": "14_stretching_trained_rope",
    "15": "15_batches_and_padding",
    "16": "16_debugging_positions",
    "17": "17_how_to_choose",
    "18": "18_cheat_sheet",
}


@dataclass(frozen=True)
class FunctionAnswer:
    """How the grader tests an answer that is a function.

    Every case is plain data (:mod:`~companion.exercises.wire`); ``kernel_call`` names a
    ``module:function`` that the kernel runs as ``kernel_call(learner_fn, case)``,
    turning the case into arguments and the result into plain data.
    """

    # "permuted_weights(weights, perm)": the stub the student notebook shows
    signature: str
    # grader: [(case, right output)], in the checker's call order
    public_cases: Callable[[], list]
    # grader: [(case, right output)], fresh
    secret_cases: Callable[[np.random.Generator], list]
    same: Callable[[Any, Any], bool]  # grader: is this output the right one?
    describe: Callable[[Any], str]  # grader: a case in a few words, for feedback
    kernel_call: str


@dataclass(frozen=True)
class Exercise:
    label: str
    names: tuple[str, ...]
    checker: Callable[[Any], Feedback]
    givens: tuple[str, ...] = ()
    function: FunctionAnswer | None = None

    @property
    def chapter(self) -> str:
        """The notebook's file name without ``.ipynb``, e.g. ``03_formula``."""
        return chapter_of(self.label)

    @property
    def name(self) -> str:
        """The names as the statement gives them: ``answer``, or ``rerun, answer``."""
        return ", ".join(self.names)

    @property
    def checker_name(self) -> str:
        return self.checker.__name__

    def stub(self) -> str:
        """The code cell that replaces the solution in the student edition."""
        read = " and ".join(f"`{n}`" for n in self.names)
        lines = [
            f"# Exercise {self.label}: write your code here; the grader reads {read}."
        ]
        if self.givens:
            lines.append(f"from companion.exercises import {', '.join(self.givens)}")
            lines.append("")
        if self.function is not None:
            lines.append(f"def {self.function.signature}: ...  # your code")
        else:
            lines.extend(f"{name} = ...  # your code" for name in self.names)
        return "\n".join(lines)

    def check_call(self) -> str:
        """The code cell that calls the checker, kept in the student edition."""
        return (f"from companion.exercises import {self.checker_name}\n\n"
                f"{self.checker_name}({self.name})")


EXERCISES: dict[str, Exercise] = {}


def chapter_of(label: str) -> str:
    match = re.fullmatch(r"ch(\d\d)-[a-z0-9-]+", label)
    if not match or match.group(1) not in CHAPTERS:
        raise KeyError(
            f"{label!r}: labels are chNN-name, with NN a chapter of CHAPTERS"
        )
    return CHAPTERS[match.group(1)]


def chapter_exercises(chapter: str) -> list[Exercise]:
    """The chapter's exercises (``chapter`` is a notebook stem), in registry order."""
    return [ex for ex in EXERCISES.values() if ex.chapter == chapter]


def _add(ex: Exercise) -> None:
    chapter_of(ex.label)
    if ex.label in EXERCISES:
        raise ValueError(f"{ex.label} is registered twice")
    for name in ex.names:
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("__"):
            raise ValueError(
                f"{ex.label}: {name!r} is not a Python name a learner defines"
            )
    EXERCISES[ex.label] = ex


def _value(
    label: str, names: str | tuple[str, ...], checker, givens: tuple[str, ...] = ()
) -> None:
    _add(
        Exercise(
            label, (names,) if isinstance(names, str) else tuple(names), checker, givens
        )
    )


def _function(label: str, name: str, checker, function: FunctionAnswer) -> None:
    if not function.signature.startswith(name + "("):
        raise ValueError(f"{label}: the signature must define {name}")
    _add(Exercise(label, (name,), checker, (), function))


# ---- chapter 1: the two function answers ---------------------------------------------

def _as_float_array(value) -> np.ndarray | None:
    array = as_array(value, finite=False)
    return None if isinstance(array, str) else array


def _same_array(got, expected, atol: float = 1e-5) -> bool:
    got, expected = _as_float_array(got), np.asarray(expected, dtype=np.float64)
    return (got is not None and got.shape == expected.shape
            and bool(np.all(np.abs(got - expected) <= atol)))


def _weights_public():
    cases = []
    for seq, perm in ch01._PERM_CASES:
        weights, perm_t, expected = ch01._attention_case(seq, perm)
        cases.append(({"args": (weights, perm_t)}, expected.numpy()))
    return cases


def _weights_secret(rng: np.random.Generator):
    from companion.attention import MultiHeadSelfAttention

    cases = []
    for _ in range(6):
        seq, heads = int(rng.integers(3, 10)), int(rng.choice([1, 2, 4]))
        perm = rng.permutation(seq)
        while np.all(perm == np.arange(seq)):
            perm = rng.permutation(seq)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(rng.integers(2**31)))
            attn = MultiHeadSelfAttention(8, heads).double().eval()
            x = torch.randn(int(rng.integers(1, 3)), seq, 8, dtype=torch.float64)
        perm_t = torch.from_numpy(perm).to(torch.int64)
        with torch.no_grad():
            attn(x)
            weights = attn.last_weights.clone()
            # what the layer gives for the permuted input: the right output
            attn(x[:, perm_t])
            expected = attn.last_weights.clone()
        cases.append(({"args": (weights, perm_t)}, expected.numpy()))
    return cases


def call_with_args(fn, case):
    """Kernel side: ``fn(*case["args"])`` on copies of tensor arguments."""
    args = [a.clone() if isinstance(a, torch.Tensor) else a for a in case["args"]]
    return fn(*args)


def _describe_weights(case) -> str:
    weights, perm = case["args"]
    return f"weights of shape {tuple(weights.shape)}, perm={perm.tolist()}"


def _probe_kinds():
    """(name, build(dim), equivariant) for the layer kinds of
    check_equivariance_probe."""
    return [
        ("per-token MLP with LayerNorm", ch01._PerToken, True),
        (
            "bidirectional self-attention",
            lambda d: ch01._Attention(d, causal=False),
            True,
        ),
        ("mean mixing", lambda d: ch01._MeanMix(), True),
        ("causal self-attention", lambda d: ch01._Attention(d, causal=True), False),
        ("running sum", lambda d: ch01._Cumsum(), False),
        ("1-D convolution", ch01._Conv, False),
        ("RNN", ch01._Rnn, False),
        ("zeroing the last position", lambda d: ch01._LastPositionZero(), False),
        ("sequence reversal", lambda d: ch01._Reverse(), False),
        ("swap of the first two tokens", lambda d: ch01._SwapFirstTwo(), False),
        ("cyclic shift", lambda d: ch01._Roll(), False),
    ]


def _probe_public():
    cases, _ = ch01._probe_cases()
    return [({"public": i}, truth) for i, (_, _, truth) in enumerate(cases)]


def _probe_secret(rng: np.random.Generator):
    kinds = _probe_kinds()
    cases = [
        (
            {
                "kind": k,
                "dim": int(rng.choice([4, 6, 8, 10, 12])),
                "double": double,
                "seed": int(rng.integers(2**31)),
                "call_seed": int(rng.integers(2**31)),
            },
            truth,
        )
        for k, (_, _, truth) in enumerate(kinds)
        for double in (False, True)
    ]
    return [cases[i] for i in rng.permutation(len(cases))]


_PUBLIC_PROBES: list = []


def call_probe(fn, case):
    """Kernel side: build the case's layer and return ``fn(layer, dim)``."""
    if "public" in case:
        if not _PUBLIC_PROBES:
            _PUBLIC_PROBES.extend(ch01._probe_cases()[0])
        layer, dim, seed = _PUBLIC_PROBES[int(case["public"])][1], 8, 0
    else:
        _, build, _ = _probe_kinds()[int(case["kind"])]
        dim, seed = int(case["dim"]), int(case["call_seed"])
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(case["seed"]))
            layer = build(dim).eval()
        if case["double"]:
            layer = layer.double()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return fn(layer, dim)


def _same_verdict(got, truth) -> bool:
    if isinstance(got, torch.Tensor):
        got = got.item() if got.numel() == 1 else got
    elif isinstance(got, np.ndarray):
        got = got.reshape(()).item() if got.size == 1 else got
    return isinstance(got, (bool, np.bool_)) and bool(got) == truth


def _describe_probe(case) -> str:
    if "public" in case:
        return f"the checker's layer {case['public']}"
    name = _probe_kinds()[int(case["kind"])][0]
    return (
        f"a {name} of width {case['dim']} "
        f"({'float64' if case['double'] else 'float32'})"
    )


# ---- the exercises, chapter by chapter -----------------------------------------------

_function(
    "ch01-permuted-weights",
    "permuted_weights",
    check_permuted_weights,
    FunctionAnswer(
        "permuted_weights(weights, perm)",
        _weights_public,
        _weights_secret,
        _same_array,
        _describe_weights,
        "companion.exercises.registry:call_with_args",
    ),
)
_value("ch01-pooled-groups", "labels", check_pooled_groups)
_value("ch01-distinct-orderings", "answer", check_distinct_orderings)
_function("ch01-equivariance-probe", "probe", check_equivariance_probe, FunctionAnswer(
    "probe(layer, dim)", _probe_public, _probe_secret, _same_verdict, _describe_probe,
    "companion.exercises.registry:call_probe"))

_value("ch02-matching-init", "answer", check_matching_init_std)
_value("ch02-row-rms", "answer", check_table_row_rms)
_value("ch02-max-len", "answer", check_smallest_max_len)
_value("ch02-random-cosine", "answer", check_expected_abs_cosine)

_value("ch03-pe-row", "answer", check_pe_row)
_value("ch03-denominators", "answer", check_denominators)
_value("ch03-halves-to-interleaved", "answer", check_halves_to_interleaved)
_value("ch03-t2t-base", "answer", check_tensor2tensor_base)

_value("ch04-longest-wavelength", "answer", check_longest_wavelength)
_value("ch04-first-negative", "answer", check_first_negative)
_value("ch04-wavelength-ratio", "answer", check_wavelength_ratio)
_value("ch04-base-rule", "answer", check_rule_of_thumb_base)

_value("ch05-pair-block", "answer", check_pair_block)
_value("ch05-extend-table", "answer", check_extend_table)
_value(
    "ch05-which-shift",
    "answer",
    check_shift_property,
    givens=("rotation_mystery_tables",),
)
_value("ch05-offset-scores", "A", check_offset_only_scores)

_value("ch06-t5-buckets", "answer", check_t5_buckets_of_offsets)
_value("ch06-shaw-index", "answer", check_shaw_index_matrix)
_value("ch06-missing-rows", "answer", check_positions_without_row)

_value(
    "ch07-rotate-by-hand",
    "answer",
    check_rope_rotated_vector,
    givens=("ROPE_HAND_VECTOR",),
)
_value("ch07-pair-permutation", "p", check_rope_pair_permutation)
_value("ch07-convert-query-weight", "answer", check_rope_halves_query_weight,
       givens=("rope_interleaved_query_weight",))

_value("ch08-ntk-base", "answer", check_ntk_base)
_value("ch08-yarn-classes", "answer", check_yarn_classes)
_value("ch08-ntk-unseen", "answer", check_ntk_unseen_pairs)

_value("ch09-slopes-12", "answer", check_alibi_slopes_12)
_value("ch09-bias-entry", "answer", check_alibi_bias_entry)
_value("ch09-half-lives", "answer", check_alibi_half_lives)

_value(
    "ch10-port-weights",
    "answer",
    check_ported_query_weight,
    givens=("porting_exercise_weights",),
)
_value("ch10-fairseq-mapping", "answer", check_fairseq_mapping)

_value("ch11-mrope-ids", "answer", check_mrope_position_ids)
_value("ch11-longrope-factor", "answer", check_longrope_attention_factor)
_value("ch11-mla-cache", "answer", check_mla_cache_entries)

_value("ch12-floor-16", "answer", check_chunk_floor_16)
_value("ch12-table2-flat", "answer", check_table2_flat_methods)
_value("ch12-early-tokens", "answer", check_early_token_counts)
_value("ch12-order-one", ("rerun", "control", "answer"), check_order_one_rerun)

_value("ch13-widened-params", "answer", check_widened_concat_parameters)
_value("ch13-real-or-not", "answer", check_seed_spread_verdicts)
_value("ch13-position-dim", ("rows_8", "rows_24", "answer"), check_position_dim_rerun)

_value("ch14-yarn-gamma", "answer", check_tiny_yarn_gamma)
_value("ch14-ntk-base", "answer", check_ntk_base_head16)
_value("ch14-best-at-4x", "answer", check_best_zero_shot_at_4x)
_value("ch14-small-base", ("result", "answer"), check_small_base_rerun)

_value("ch15-left-position-ids", "answer", check_left_padded_position_ids)
_value("ch15-packed-mask", "answer", check_packed_causal_mask)
_value("ch15-which-schemes", "answer", check_schemes_without_position_ids)

_value(
    "ch16-suspect-offset",
    "answer",
    check_suspect_offset,
    givens=("suspect_add_positions",),
)
_value("ch16-std-ratio", "answer", check_std_ratio)
_value("ch16-choose-fix", "answer", check_fixes)

_value("ch17-position-params", "answer", check_position_parameters)
_value("ch17-kv-cache", "answer", check_kv_cache_entries)
_value("ch17-requirement", "answer", check_scheme_for_requirement)

_value("ch18-checkpoint-layouts", "answer", check_checkpoint_layouts)
_value("ch18-alibi-24", "answer", check_alibi_slopes_of_24)

# The exercises whose statements also ask an open question, marked by hand (the three
# suggested assignments of INSTRUCTORS.md): the student edition gives each an answer
# cell headed "**Answer <label>**", which the grader collects (tools/assignment.py).
WRITTEN = {
    "ch01-equivariance-probe": "How small must the tolerance be, and why?",
    "ch02-row-rms": "Why does every row of the table have the same RMS?",
    "ch04-wavelength-ratio": "How many pairs does it take for the wavelength to grow "
                             "tenfold?",
    "ch08-ntk-base": "Why does NTK-aware scaling leave the fastest pair alone?",
    "ch09-half-lives": "Which head looks farthest, and what does that mean for a "
                       "2048-token input?",
    "ch12-order-one": "Your report: the losses per seed in both runs, whether the "
                      "model without positions keeps up and why, and what a "
                      "150-step run cannot show.",
}


# ---- grading, in the grader's own process --------------------------------------------

def _feedback(result: Any) -> Feedback:
    """A checker's verdict as a pristine Feedback (a checker always returns one)."""
    if type(result) is Feedback and type(result.ok) is bool:
        return Feedback(result.ok, str(result.message))
    return Feedback(False, f"the checker returned {type(result).__name__}")


def grade_value(ex: Exercise, *values: Any) -> Feedback:
    """Call the exercise's checker on the values read from the kernel (one per name);
    for a rerun exercise, also compare its numbers with the grader's own run
    (:mod:`companion.exercises.reruns`)."""
    try:
        verdict = _feedback(ex.checker(*values))
    except Exception as err:  # noqa: BLE001 - a checker must not stop the grading
        return Feedback(
            False,
            f"the checker could not read this answer ({type(err).__name__}: {err})",
        )
    if verdict.ok:
        from companion.exercises import reruns

        problem = reruns.verify(ex.label, *values)
        if problem:
            return Feedback(False, f"Not yet. The checker accepts your numbers, but "
                                   f"{problem}: hand in the run the exercise asks for.")
    return verdict


def _raised(message: str) -> Exception:
    """An exception that prints as the one the learner's function raised in the
    kernel."""
    name, _, text = message.removeprefix("raised ").partition(": ")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,60}", name):
        name, text = "Exception", message
    return type(name, (Exception,), {})(text)


@dataclass
class Outcome:
    """One call of the learner's function in the kernel: ``"ok"`` with its output, or
    why not."""

    status: str
    output: Any = None
    extra: dict = field(default_factory=dict)


def grade_function(ex: Exercise, public: list[Outcome], secret_cases: list,
                   secret: list[Outcome]) -> Feedback:
    """Grade a function answer from its outputs in the kernel.

    The book's checker runs on the outputs for its own inputs (replayed in its call
    order), for the feedback it gives; the answer passes only if, in addition, every
    output on the grader's secret inputs is right.
    """
    spec = ex.function
    calls = iter(public)

    def replay(*args, **kwargs):
        outcome = next(calls, None)
        if outcome is None:
            raise RuntimeError("the grader has no recorded output for this call")
        if outcome.status != "ok":
            raise _raised(outcome.status)
        return outcome.output

    verdict = grade_value(ex, replay)
    wrong = []
    for (case, expected), outcome in zip(secret_cases, secret):
        if outcome.status != "ok":
            wrong.append(f"on {spec.describe(case)} your function {outcome.status}")
        elif outcome.output is None:
            wrong.append(
                f"on {spec.describe(case)} your function returned None (did you forget "
                "`return`?)"
            )
        elif not spec.same(outcome.output, expected):
            wrong.append(f"on {spec.describe(case)} it returned a wrong result")
    if len(secret) < len(secret_cases):
        wrong.append(
            f"{len(secret_cases) - len(secret)} of the grader's cases did not run"
        )
    if not verdict.ok:
        return verdict
    if wrong:
        return Feedback(
            False,
            f"It passes the book's checker but not {len(wrong)} of the "
            f"grader's {len(secret_cases)} new cases; first: {wrong[0]}.",
        )
    return Feedback(
        True,
        verdict.message
        + f" (It also passed the grader's {len(secret_cases)} new cases.)",
    )
