"""Checkers for the exercises of chapter 1 (attention without positions)."""

from __future__ import annotations

from collections import Counter
from math import factorial

import numpy as np
import torch

from companion.attention import MultiHeadSelfAttention
from companion.exercises._answers import as_array, as_bool, as_number, returned_none
from companion.exercises._feedback import Feedback, checker, wrong
from companion.exercises._feedback import right_folded as right



__all__ = [
    "check_permuted_weights",
    "check_pooled_groups",
    "check_distinct_orderings",
    "check_equivariance_probe",
]

# Weights lie in [0, 1]; a float32 result of the right permutation is within ~1e-7.
_WEIGHT_ATOL = 1e-5

# Cases for check_permuted_weights: (seq, perm). No perm is its own inverse, so a
# solution that applies the inverse permutation is caught.
_PERM_CASES = ((5, (1, 2, 0, 4, 3)), (4, (3, 0, 1, 2)))

POOLED_SENTENCES = (
    "dog bites man",
    "man bites dog",
    "dog bites dog",
    "bites man dog",
    "dog dog bites",
    "bites dog bites",
)


def _as_array(value) -> np.ndarray | str:
    """A float64 array from a tensor, array or nested list, or a message saying why
    not."""
    if value is None:
        return returned_none()
    return as_array(value)


def _attention_case(seq: int, perm: tuple[int, ...]):
    """Weights for a seeded input and for its permutation, without touching the global
    RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(1234 + seq)
        attn = MultiHeadSelfAttention(8, 2).double()
        x = torch.randn(1, seq, 8, dtype=torch.float64)
    perm_t = torch.tensor(perm)
    with torch.no_grad():
        attn(x)
        weights = attn.last_weights.clone()
        attn(x[:, perm_t])
        expected = attn.last_weights.clone()
    return weights, perm_t, expected


@checker(none_is_an_answer=True)  # None: not a function
def check_permuted_weights(fn) -> Feedback:
    """``fn(weights, perm)`` must return the weights of the permuted input.

    ``weights`` is a float64 tensor ``(1, 2, s, s)``, ``perm`` a 1-D int64 tensor of
    length ``s``.
    """
    if not callable(fn):
        return wrong(f"Expected a function fn(weights, perm), got {type(fn).__name__}")
    for seq, perm in _PERM_CASES:
        weights, perm_t, expected = _attention_case(seq, perm)
        try:
            result = fn(weights.clone(), perm_t.clone())
        except Exception as err:  # the learner's code; report, never raise
            return wrong(f"Your function raised {type(err).__name__}: {err}")
        got = _as_array(result)
        if isinstance(got, str):
            if result is None or "complex" in got or "NaN" in got:
                return wrong(got)
            return wrong(
                f"Expected an array or tensor of shape {tuple(expected.shape)}, got "
                f"{type(result).__name__}"
            )
        if got.shape != tuple(expected.shape):
            return wrong(
                f"Expected an array of shape {tuple(expected.shape)} (batch, heads, "
                f"seq, seq), got {got.shape}"
            )
        exp, w = expected.numpy(), weights.numpy()

        def same(a, b):
            return np.allclose(a, b, rtol=0, atol=_WEIGHT_ATOL)

        if same(got, exp):
            continue
        inv = np.argsort(perm)
        p = list(perm)
        if same(got, w):
            return wrong(
                "These are the original weights: the tokens moved, so the matrix "
                "indexed by position moves too."
            )
        if same(got, w[:, :, p]):
            return wrong(
                "The queries (rows) are in the new order, but each row still lists "
                "the keys in the old order."
            )
        if same(got, w[:, :, :, p]):
            return wrong(
                "The keys (columns) are in the new order, but the queries (rows) are "
                "still in the old order."
            )
        if same(got, w[:, :, inv][:, :, :, inv]):
            return wrong(
                "This moves the tokens the opposite way: position i of the new input "
                "holds old token perm[i]."
            )
        off = np.abs(got - exp)
        b, h, i, j = np.unravel_index(int(np.argmax(off)), off.shape)
        return wrong(
            f"For seq={seq}, perm={p} your weights differ from those of attention run "
            f"on x[:, perm]: entry [{b}, {h}, {i}, {j}] (head {h}, query {i}, key {j}) "
            f"is off by {off[b, h, i, j]:.3g} (tolerance {_WEIGHT_ATOL:g}); which old "
            "token sits at each new position, as a query and as a key?"
        )
    return right(
        "The weight between two tokens follows the tokens: rows and columns are both "
        "permuted."
    )


def _partition(labels) -> set[frozenset[int]]:
    groups: dict = {}
    for i, label in enumerate(labels):
        groups.setdefault(label, set()).add(i)
    return {frozenset(g) for g in groups.values()}


@checker
def check_pooled_groups(labels) -> Feedback:
    """Six labels for :data:`POOLED_SENTENCES`, equal where the pooled outputs are
    equal."""
    n = len(POOLED_SENTENCES)
    if isinstance(labels, (torch.Tensor, np.ndarray)):
        labels = labels.tolist()
    if isinstance(labels, (str, bytes)) or not isinstance(labels, (list, tuple)):
        return wrong(
            f"Expected a list of {n} labels, one per sentence, got "
            f"{type(labels).__name__}"
        )
    if len(labels) != n:
        return wrong(
            f"Expected a list of {n} labels, one per sentence, got {len(labels)}"
        )
    try:
        got = _partition(labels)
    except TypeError:
        return wrong("Each label must be a plain value such as an int or a str")
    truth = _partition(
        [frozenset(Counter(s.split()).items()) for s in POOLED_SENTENCES]
    )
    if got == truth:
        return right(
            "Without positions the pooled output depends only on which words occur, "
            "and how often."
        )
    if len(got) == n:
        return wrong(
            "You gave every sentence its own label; without positions, can attention "
            "see the order of the words?"
        )
    if len(got) == 1:
        return wrong(
            "You gave all sentences one label; sentences with different words give "
            "different outputs."
        )
    as_sets = _partition([frozenset(s.split()) for s in POOLED_SENTENCES])
    if got == as_sets:
        return wrong(
            "Mean pooling averages over tokens: a word that occurs twice counts twice."
        )
    return wrong(
        "Some groups are off; which sentences are reorderings of one another, word for "
        "word?"
    )


@checker
def check_distinct_orderings(answer) -> Feedback:
    """``(without_positions, with_positions)`` for all orderings of "dog bites dog
    man"."""
    if isinstance(answer, (torch.Tensor, np.ndarray)):
        answer = answer.tolist()
    if (
        isinstance(answer, (str, bytes, dict))
        or not isinstance(answer, (list, tuple))
        or len(answer) != 2
    ):
        return wrong(
            f"Expected a pair (without positions, with positions), got {answer!r}"
        )
    a, b = (as_number(v) for v in answer)
    for problem in (a, b):
        if isinstance(problem, str):
            return wrong(f"Expected two numbers, (without, with positions): {problem}")
    words = "dog bites dog man".split()
    sequences = factorial(len(words))
    for count in Counter(words).values():
        sequences //= factorial(count)
    if (a, b) == (1, sequences):
        return right(
            "Without positions every ordering looks the same; with them, every "
            "distinct sequence differs."
        )
    if a != 1:
        return wrong(
            "Check (a): without positions, reordering the tokens only reorders the "
            "outputs, and the mean does not see that."
        )
    if b == factorial(len(words)):
        return wrong(
            "Check (b): swapping the two copies of 'dog' gives the same sentence, "
            "hence the same output."
        )
    return wrong(
        "Check (b): with positions, do two different word sequences ever give the same "
        "pooled output?"
    )


# ---- ch01-equivariance-probe ---------------------------------------------------------

class _PerToken(torch.nn.Module):
    """LayerNorm, then a two-layer MLP, applied to each token on its own."""

    def __init__(self, dim: int):
        super().__init__()
        self.norm = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 2 * dim), torch.nn.GELU(),
                                       torch.nn.Linear(2 * dim, dim))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class _Attention(torch.nn.Module):
    """Self-attention returning only its output; ``causal`` ties it to positions."""

    def __init__(self, dim: int, causal: bool):
        super().__init__()
        self.attn, self.causal = MultiHeadSelfAttention(dim, 2), causal

    def forward(self, x):
        return self.attn(x, causal=self.causal)


class _Cumsum(torch.nn.Module):
    def forward(self, x):
        return x.cumsum(dim=1)  # a running sum over the sequence: order matters


class _MeanMix(torch.nn.Module):
    def forward(self, x):
        # every token sees the same set: no order
        return x + x.mean(dim=1, keepdim=True)


class _Conv(torch.nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.conv = torch.nn.Conv1d(dim, dim, kernel_size=3, padding=1)

    def forward(self, x):
        # (b, s, D) -> (b, D, s) and back
        return self.conv(x.transpose(1, 2)).transpose(1, 2)


class _Rnn(torch.nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.rnn = torch.nn.RNN(dim, dim, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


class _LastPositionZero(torch.nn.Module):
    """Equivariant except at one position: catches probes that compare only a
    summary."""

    def forward(self, x):
        out = x.clone()
        out[:, -1] = 0.0
        return out


class _Reverse(torch.nn.Module):
    """Reorders its output without reading the order: fools a mean, a norm or a sort."""

    def forward(self, x):
        return x.flip(1)


class _SwapFirstTwo(torch.nn.Module):
    """Moves two tokens and keeps the rest: fools a summary of the output too."""

    def forward(self, x):
        order = torch.arange(x.shape[1])
        order[:2] = torch.tensor([1, 0])
        return x[:, order]


class _Roll(torch.nn.Module):
    """Shifts the sequence by one place: fools a probe that permutes only by a shift."""

    def forward(self, x):
        return x.roll(1, dims=1)


def _probe_cases():
    """``(name, layer, equivariant)``; float32 and float64 layers, fixed weights."""
    dim = 8
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(11)
        layers = [
            ("per-token MLP with LayerNorm", _PerToken(dim), True),
            ("bidirectional self-attention", _Attention(dim, causal=False), True),
            ("mean mixing", _MeanMix(), True),
            ("causal self-attention", _Attention(dim, causal=True), False),
            ("running sum", _Cumsum(), False),
            ("1-D convolution", _Conv(dim), False),
            ("RNN", _Rnn(dim), False),
            ("zeroing the last position", _LastPositionZero(), False),
            ("sequence reversal", _Reverse(), False),
            ("swap of the first two tokens", _SwapFirstTwo(), False),
            ("cyclic shift", _Roll(), False),
        ]
    cases = []
    for name, layer, truth in layers:
        layer.eval()
        cases.append((name + " (float32)", layer, truth))
        cases.append((name + " (float64)", _double_copy(layer), truth))
    return cases, dim


def _double_copy(layer):
    import copy

    return copy.deepcopy(layer).double()


@checker(none_is_an_answer=True)  # None: not a function
def check_equivariance_probe(fn) -> Feedback:
    """``fn(layer, dim)`` must return True exactly when ``layer`` is permutation
    equivariant.

    ``layer`` maps ``(batch, seq, dim)`` to ``(batch, seq, dim)`` and may hold float32
    or float64 weights (``next(layer.parameters(), None)`` tells, or try both); the
    checker tries twenty-two layers, some of which look equivariant on a careless test.
    """
    if not callable(fn):
        return wrong(
            f"Expected a function fn(layer, dim) -> bool, got {type(fn).__name__}"
        )
    cases, dim = _probe_cases()
    for name, layer, truth in cases:
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(0)
                verdict = fn(layer, dim)
        except Exception as err:  # the learner's code; report, never raise
            return wrong(f"Your probe raised {type(err).__name__} on the {name}: {err}")
        if verdict is None:
            return wrong(returned_none(f"Your probe, on the {name},"))
        if isinstance(verdict, torch.Tensor) and verdict.numel() == 1:
            verdict = bool(verdict.item())
        if as_bool(verdict) is None:
            return wrong(
                f"Expected True or False, got {type(verdict).__name__} for the {name}"
            )
        verdict = as_bool(verdict)
        if bool(verdict) != truth:
            if truth:
                return wrong(
                    f"The {name} is equivariant, but your probe says it is not: "
                    "compare with a tolerance suited to the layer's dtype (float32 "
                    "rounding is about 1e-7 relative), and compare layer(x[:, perm]) "
                    "with layer(x)[:, perm]."
                )
            return wrong(
                f"The {name} is not equivariant, but your probe says it is: does your "
                "test compare every output position (not a mean, a norm or the sorted "
                "values)? A layer that reorders tokens can commute with any one fixed "
                "permutation: test two that generate them all (a swap of two tokens "
                "and a cyclic shift of all of them), or a fresh random permutation."
            )
    return right(
        "Your probe separates the layers that only reorder their output from those "
        "that read the order."
    )
