"""The lab's trained runs: every model the lab chapters read, how it was trained, and \
its record.

Training the lab's models to convergence takes longer than a chapter may (about 40 s of
one core per model, 452 models), so the chapters read what these runs recorded in
``book/data/lab_runs/`` (one JSON file per source, configuration and training length,
every seed in it) and load the weights of seed 0 where they look inside a model. One
command retrains everything, deterministically (each run on one thread, seeded, its
batches drawn from its seed and step): ``make lab-train``. ``make lab-check`` retrains
seed 0 of every configuration on every source's first instance, at its own budget, and
checks that it reproduces the record (CI runs it).

Every run trains the lab's decoder (``MODEL``: width 32, 2 layers, 4 heads) at
``train_len`` tokens for ``STEPS`` steps (some configurations longer: :func:`budget`),
with a cosine-decayed rate (:class:`~companion.train.TrainConfig`), and records, all in
nats per predicted token:

- ``"loss"``, ``"excess"``: the mean loss at ``L, 2L, 4L, 8L`` on non-overlapping
  chunks, and the same minus the source's own exact loss on the same tokens (0 is the
  best possible);
- ``"curve"``: the excess at ``L``, ``2L`` and ``8L`` at ten checkpoints along training
  (and ``"converged"``: whether the excess at ``L`` improved by less than
  ``CONVERGED_TOL`` = 0.01 nats over the last fifth, :func:`companion.train.converged`);
- ``"by_position"``: the excess at each position of ``8L``-token windows (256 windows);
- ``"strided"`` (sources that are one long stream): the excess with a sliding window of
  ``L, 2L, 6L`` tokens moved by ``L / 2``, each scored prediction having at least
  ``n - L / 2`` tokens of context (the first window is not scored);
- ``"attention"``: per layer and head, where the queries look
  (:func:`attention_shares`);
- ``"history"``: the training loss, averaged over windows of 20 steps;
- for the configurations in ``WINDOWED`` at ``L = 32``: ``"windowed"``, the excess at
  ``L .. 8L`` with the RoPE layers limited to the last ``L`` keys;
- for the configurations in ``EVERY_SEED_WEIGHTS`` (RoPE, chapter 14), the model
  stretched to longer inputs zero-shot and fine-tuned (:func:`stretch_record`).

Those configurations keep every seed's weights; the others keep seed 0's (of the first
instance of each source).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import fnmatch
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from companion import _checks
from companion.data import HiddenStateChain, MarkovChain, RepeatedSegment
from companion.lab import (
    attention_by_offset,
    available_cores,
    rope_scalings,
    run_parallel,
    with_rope_scaling,
    with_rope_speeds,
)
from companion.model import SCHEMES, ModelConfig, TinyDecoder
from companion.rope import rope_frequencies, yarn_attention_scale
from companion.train import TrainConfig, converged, evaluate, loss_by_position, train

RECORD = Path(__file__).resolve().parents[1] / "book" / "data" / "lab_runs"
STEPS = 1600
# every evaluation sample is drawn from this seed, never a training batch's
EVAL_SEED = 10_000
EVAL_TOKENS = 16_384
# A run has converged when its excess at L improved by less than this over the last
# fifth of training (companion.train.converged).
CONVERGED_TOL = 0.01
MULTIPLES = (1, 2, 4, 8)  # evaluation lengths, as multiples of the training length

#: Each source's name, mapped to its class and that class's keyword arguments. A name
#: ending in "-b" is a second instance of the same kind (another random table), on which
#: the chapters check that their claims do not depend on one table.
SOURCES = {
    "markov": (MarkovChain, {"vocab_size": 8, "order": 2, "seed": 0}),
    "hidden": (HiddenStateChain, {"vocab_size": 8, "seed": 0}),
    "repeat": (RepeatedSegment, {"vocab_size": 8, "seed": 0}),
    "markov-b": (MarkovChain, {"vocab_size": 8, "order": 2, "seed": 1}),
    "hidden-b": (HiddenStateChain, {"vocab_size": 8, "seed": 1}),
    "repeat-b": (RepeatedSegment, {"vocab_size": 8, "seed": 1}),
}
# Configurations that need more steps to meet the convergence criterion, as a multiple
# of the budget: on the chain, the model without positions learns to count positions
# slowly. On the retrieval source every scheme needs three times the budget (its excess
# at L is still falling by more than 0.01 nats over the last fifth at 1600 steps), T5
# four times and ALiBi ten (at 4800 and at 6400 steps some seeds' excess at L still fell
# by more than 0.01 nats).
SLOWER = {
    ("markov", "none"): 4,
    ("markov-b", "none"): 4,
    **{(source, scheme): 3 for source in ("repeat", "repeat-b") for scheme in SCHEMES},
    **{(source, "t5"): 4 for source in ("repeat", "repeat-b")},
    **{(source, "alibi"): 10 for source in ("repeat", "repeat-b")},
    **{(source, "rope-nope"): 3 for source in ("repeat", "repeat-b")},
}


def budget(source_name: str, config: str, steps: int = STEPS) -> int:
    """The steps a run of ``config`` on ``source_name`` trains for, in a group of
    ``steps``."""
    return steps * SLOWER.get((source_name, config), 1)
# The configurations: ModelConfig fields on top of lab.MODEL. "learned-gpt2" starts its
# table at the tokens' own scale with no sqrt(d) factor (GPT-2's and BERT's recipe: both
# tables drawn at one standard deviation); "learned" is the lab's default (rows of std
# 0.02 beside sqrt(d)-scaled tokens of RMS 1). "rope-2x16" has 2 heads of 16 features (8
# rotary pairs per head) instead of 4 of 8.
MODEL = {"dim": 32, "num_heads": 4, "num_layers": 2}
CONFIGS = {
    **{scheme: {"position": scheme} for scheme in SCHEMES},
    "learned-gpt2": {
        "position": "learned",
        "scale_embedding": False,
        "learned_init_std": MODEL["dim"] ** -0.5,
    },
    "rope-2x16": {"position": "rope", "num_heads": 2},
    # Chapter 13's: positions concatenated (16 token features, 16 position features,
    # same width), sinusoidal positions added without the sqrt(d) scale on the tokens,
    # and the learned table drawn 50 times larger (std 1.0 beside tokens of RMS 1).
    "sinusoidal-concat": {
        "position": "sinusoidal",
        "combine": "concat",
        "position_dim": 16,
    },
    "learned-concat": {"position": "learned", "combine": "concat", "position_dim": 16},
    "sinusoidal-noscale": {"position": "sinusoidal", "scale_embedding": False},
    "learned-x50": {"position": "learned", "learned_init_std": 1.0},
    # Chapter 11's: RoPE in layer 0 and no positions in layer 1, as Llama 4 and SmolLM3
    # leave the last layer of every group of four without RoPE.
    "rope-nope": {"position": "rope", "nope_layers": (1,)},
}
# Configurations whose weights are kept for every seed, not only seed 0, and whose
# record also holds each seed's model stretched to longer inputs (chapter 14:
# :func:`stretch_record`).
EVERY_SEED_WEIGHTS = ("rope-2x16",)
# Configurations whose record also holds the excess of the trained model run with its
# RoPE layers limited to the last L keys (ModelConfig.rope_window = L; chapter 11), for
# runs at L = 32 and the configuration's budget. Training at L is the same with or
# without that window: no offset of a training chunk reaches L.
WINDOWED = ("rope-nope",)
STRETCH_FACTORS = (2, 4, 8)
# Fine-tuning a stretched model: steps of batch_size sequences of factor * L tokens, at
# a constant rate after one warm-up step: the rate training ended at (train_config's
# cosine ends at 0.1 of 4e-3), so that fine-tuning does not also change the step size.
FINETUNE = {"factor": 4, "steps": 40, "batch_size": 8, "lr": 4e-4}
FINETUNED = ("none", "linear", "ntk", "yarn")
WITH_POSITIONS = tuple(s for s in SCHEMES if s != "none")
COMBINE = (
    "sinusoidal-concat",
    "learned-concat",
    "sinusoidal-noscale",
    "learned-x50",
    "learned-gpt2",
)


@dataclasses.dataclass(frozen=True)
class Group:
    """Runs of every configuration on every source, at every training length, for every
    seed."""

    name: str
    sources: tuple
    configs: tuple
    seeds: tuple
    train_lens: tuple = (32,)
    steps: int = STEPS


GROUPS = (
    Group("main", ("hidden", "markov"), SCHEMES, tuple(range(10))),
    Group("controls", ("hidden",), ("rope-2x16", "learned-gpt2"), tuple(range(10))),
    Group("length", ("markov",), ("rope",), tuple(range(10)), train_lens=(24, 48)),
    Group("second", ("hidden-b", "markov-b"), SCHEMES, tuple(range(5))),
    Group("combine", ("markov",), COMBINE, tuple(range(10))),
    Group("combine-b", ("markov-b",), COMBINE, tuple(range(5))),
    Group("stretch", ("markov",), ("rope-2x16",), tuple(range(10))),
    Group("controls-b", ("hidden-b", "markov-b"), ("rope-2x16",), tuple(range(5))),
    Group("retrieval", ("repeat",), WITH_POSITIONS, tuple(range(10))),
    Group("retrieval-b", ("repeat-b",), WITH_POSITIONS, tuple(range(5))),
    Group("retrieval-none", ("repeat",), ("none",), tuple(range(5))),
    # Chapter 11: NoPE in one of two layers, against RoPE in both ("main" and "second").
    Group("nope", ("hidden", "markov", "repeat"), ("rope-nope",), tuple(range(10))),
    Group(
        "nope-b", ("hidden-b", "markov-b", "repeat-b"), ("rope-nope",), tuple(range(5))
    ),
    # Seed 0 of the main comparison at twice the budget: do the verdicts survive more
    # training?
    Group("longer", ("hidden", "markov"), SCHEMES, (0,), steps=2 * STEPS),
)
# Runs recorded although they do not meet the convergence criterion, with the reason,
# keyed by (source, config) for every seed or (source, config, seed) for one. Chapter 12
# names them and claims nothing about a converged state for them.
UNCONVERGED = {
    (
        "repeat",
        "none",
    ): "without positions the model learns to copy only partly in 4800 steps: "
    "its excess at L is near 0.5 nats (never copying costs 1.35) and, in "
    "four of its five seeds, still falling by more than 0.01",
    (
        "repeat",
        "alibi",
        8,
    ): "at 16000 steps its excess at L fell by 0.012 nats over the last "
    "fifth, 0.002 more than the criterion allows; the other 14 ALiBi "
    "runs on this source meet it",
    (
        "repeat",
        "rope-nope",
        4,
    ): "at 4800 steps its excess at L fell by 0.012 nats over the last "
    "fifth, 0.002 more than the criterion allows; the other 14 runs of "
    "this configuration on this source meet it",
}


def unconverged(run: "Run") -> str | None:
    """Why ``run`` is recorded without meeting the criterion, or ``None`` if it meets
    it."""
    return UNCONVERGED.get(
        (run.source, run.config), UNCONVERGED.get((run.source, run.config, run.seed))
    )


@dataclasses.dataclass(frozen=True)
class Run:
    """One trained model: a source, a configuration, a training length, a seed and a
    budget."""

    source: str
    config: str
    train_len: int
    seed: int
    steps: int | None = None  # default: budget(source, config)

    def __post_init__(self):
        if self.steps is None:
            object.__setattr__(self, "steps", budget(self.source, self.config))

    @property
    def key(self) -> str:
        steps = (
            "" if self.steps == budget(self.source, self.config) else f"--S{self.steps}"
        )
        return f"{self.source}--{self.config}--L{self.train_len}{steps}"


def runs(groups=GROUPS) -> list[Run]:
    """Every run of ``groups``: seeds 0-4 first, then seeds 5-9, the second instances,
    longer budgets."""
    every = [
        Run(s, c, n, seed, budget(s, c, g.steps))
        for g in groups
        for s in g.sources
        for c in g.configs
        for n in g.train_lens
        for seed in g.seeds
    ]
    longer = {r: r.steps != budget(r.source, r.config) for r in every}
    # stable
    return sorted(
        every, key=lambda r: (longer[r], r.source.endswith("-b"), r.seed >= 5)
    )


_SOURCE_CACHE: dict = {}


def source(name: str):
    """The named source (one instance per process: its floor by position is cached)."""
    _checks.choice("source", name, tuple(SOURCES))
    if name not in _SOURCE_CACHE:
        kind, kwargs = SOURCES[name]
        _SOURCE_CACHE[name] = kind(**kwargs)
    return _SOURCE_CACHE[name]


def model_config(config: str, train_len: int) -> ModelConfig:
    """The ModelConfig of a named configuration (a learned table gets ``8 * train_len``
    rows)."""
    _checks.choice("config", config, tuple(CONFIGS))
    return ModelConfig(
        vocab_size=8, max_len=max(MULTIPLES) * train_len, **{**MODEL, **CONFIGS[config]}
    )


def train_config(train_len: int, seed: int, steps: int = STEPS) -> TrainConfig:
    """How every run trains: batches of 32 chunks of ``train_len``, a cosine-decayed
    rate."""
    return TrainConfig(steps=steps, seq_len=train_len, seed=seed, decay="cosine")


def attention_shares(model: TinyDecoder, tokens: torch.Tensor, train_len: int) -> dict:
    """Where each head looks, in and past the training length, as shares of its
    attention.

    Returns ``{"unseen_far", "near_in", "near_far"}``, each a ``(layers, heads)`` list:
    the share of attention that queries at ``t >= 2L`` give to offsets of ``L`` or more
    (offsets training never showed), and the share on offsets 0-2 of queries at
    ``L/4 <= t < L`` (in length) and at ``t >= 2L`` (far out).
    """
    # (layers, heads, s, s): [.., t, offset]
    weights = attention_by_offset(model, tokens)
    L = train_len
    far, inside = weights[:, :, 2 * L :], weights[:, :, L // 4 : L]
    return {
        "unseen_far": far[..., L:].sum(-1).mean(-1).tolist(),
        "near_in": inside[..., :3].sum(-1).mean(-1).tolist(),
        "near_far": far[..., :3].sum(-1).mean(-1).tolist(),
    }


def sliding_excess(
    model: TinyDecoder, src, length: int, stride: int, num_tokens: int
) -> float:
    """Mean excess of the last ``stride`` predictions of windows of ``length`` every
    ``stride``.

    The first window is not scored: its early predictions have less context.
    """
    return evaluate(
        model,
        src,
        [length],
        num_tokens=num_tokens,
        seed=EVAL_SEED,
        stride=stride,
        excess=True,
        score_first=False,
    )[length]


def stretch_methods(factor: int, train_len: int, head_dim: int) -> dict:
    """How chapter 14 runs a RoPE model at ``factor`` times ``train_len``: name ->
    speeds, scale.

    Each entry is ``(ratios, attention_scale)``: pair ``i`` turns ``ratios[i]`` times as
    fast as in training (:func:`companion.lab.with_rope_speeds`). The four of
    :func:`companion.lab.rope_scalings` (YaRN with its temperature), YaRN without the
    temperature, YaRN as its paper writes the ramp (over turns), and two controls: only
    pair 0 slowed by ``1 / factor``, and every pair but pair 0 slowed by ``1 / factor``.
    """
    theta = rope_frequencies(head_dim)
    named = rope_scalings(factor, train_len)
    named["yarn-paper"] = {**named["yarn"], "ramp": "rotations"}
    methods = {
        m: (rope_frequencies(head_dim, scaling=sc) / theta, 1.0)
        for m, sc in named.items()
    }
    temperature = yarn_attention_scale(factor)
    methods["yarn-notemp"] = methods["yarn"]
    methods["yarn"] = (methods["yarn"][0], temperature)
    methods["yarn-paper"] = (methods["yarn-paper"][0], temperature)
    first = np.arange(head_dim // 2) == 0
    methods["pair0-slowed"] = (np.where(first, 1 / factor, 1.0), 1.0)
    methods["pair0-kept"] = (np.where(first, 1.0, 1 / factor), 1.0)
    return methods


def stretch_record(
    model: TinyDecoder, src, train_len: int, seed: int, device=None
) -> dict:
    """Chapter 14's measurements of one trained RoPE model (excess in nats per token).

    - ``"stretched"``:
      ``{method: [[excess at L, excess at s * L] for s in STRETCH_FACTORS]}``,
      zero-shot, for every method of :func:`stretch_methods`;
    - ``"finetuned"``: for each method of ``FINETUNED``, a copy stretched by
      ``FINETUNE["factor"]`` and trained on at that length (``FINETUNE``) with its
      scaling in place:
      ``{"excess": [at L, 4L, 8L], "curve": excess at 4L after 0, 10, .. steps}``;
    - ``"continued"``: the control, the unscaled model trained on at ``L`` for as many
      steps at the same rate and tokens per step, then its excess at ``L``.
    """
    L, head_dim = train_len, model.config.dim // model.config.num_heads

    def excess(m, lengths, num_tokens=EVAL_TOKENS):
        values = evaluate(
            m, src, lengths, num_tokens=num_tokens, seed=EVAL_SEED, excess=True
        )
        return [round(values[n], 5) for n in lengths]

    stretched = {}
    for factor in STRETCH_FACTORS:
        for name, (ratios, scale) in stretch_methods(factor, L, head_dim).items():
            copy = with_rope_speeds(model, ratios, attention_scale=scale)
            stretched.setdefault(name, []).append(excess(copy, [L, factor * L]))
    s, long_len = FINETUNE["factor"], FINETUNE["factor"] * L
    tune = TrainConfig(
        steps=FINETUNE["steps"],
        batch_size=FINETUNE["batch_size"],
        seq_len=long_len,
        seed=seed + 100,
        warmup=1,
        lr=FINETUNE["lr"],
    )
    finetuned = {}
    for name in FINETUNED:
        ratios, scale = stretch_methods(s, L, head_dim)[name]
        curve = []

        def checkpoint(step, m):
            if step % 10 == 0:
                curve.append(excess(m, [long_len], 4096)[0])

        start = with_rope_speeds(model, ratios, attention_scale=scale)
        curve.append(excess(start, [long_len], 4096)[0])
        tuned, _ = train(
            start.config, tune, src, model=start, callback=checkpoint, device=device
        )
        finetuned[name] = {"excess": excess(tuned, [L, 4 * L, 8 * L]), "curve": curve}
    more = TrainConfig(
        steps=FINETUNE["steps"],
        batch_size=FINETUNE["batch_size"] * s,
        seq_len=L,
        seed=seed + 100,
        warmup=1,
        lr=FINETUNE["lr"],
    )
    continued, _ = train(
        model.config,
        more,
        src,
        model=with_rope_speeds(model, np.ones(head_dim // 2)),
        device=device,
    )
    return {
        "stretched": stretched,
        "finetuned": finetuned,
        "continued": excess(continued, [L])[0],
    }


def windowed_excess(model: TinyDecoder, src, window: int, lens) -> dict:
    """The excess ``{n: nats}`` at each length of ``lens`` of ``model`` run with its
    RoPE layers limited to the last ``window`` keys (``ModelConfig.rope_window``; the
    same weights, copied, so no random draw), on the lab's evaluation sample."""
    windowed = copy.deepcopy(model)
    windowed.config = dataclasses.replace(
        model.config, rope_window=_checks.positive_int("window", window)
    )
    return evaluate(
        windowed, src, lens, num_tokens=EVAL_TOKENS, seed=EVAL_SEED, excess=True
    )


def _round(values, digits: int = 5):
    return np.round(np.asarray(values, dtype=np.float64), digits).tolist()


def train_run(run: Run, steps: int | None = None, device=None) -> tuple[dict, dict]:
    """Train one run; return its record (plain data) and its final weights (a state
    dict, on the CPU).

    ``device`` (e.g. ``"cuda"``) is where the model trains and is evaluated; results
    then differ from the CPU's record in the last bits, which training amplifies.
    ``steps`` (default: the run's own) shortens it, for tests.
    """
    steps = run.steps if steps is None else _checks.positive_int("steps", steps)
    _checks.default_float32()
    src, L = source(run.source), run.train_len
    lens = [m * L for m in MULTIPLES]
    curve_lens = [L, 2 * L, 8 * L]
    every = steps // 10
    curve = {"step": [], "excess": {str(n): [] for n in curve_lens}}

    def checkpoint(step, model):
        if step % every == 0:
            curve["step"].append(step)
            values = evaluate(
                model, src, curve_lens, num_tokens=4096, seed=EVAL_SEED, excess=True
            )
            for n in curve_lens:
                curve["excess"][str(n)].append(round(values[n], 5))

    model, history = train(
        model_config(run.config, L),
        train_config(L, run.seed, steps),
        src,
        callback=checkpoint,
        device=device,
    )
    loss = evaluate(model, src, lens, num_tokens=EVAL_TOKENS, seed=EVAL_SEED)
    excess = evaluate(
        model, src, lens, num_tokens=EVAL_TOKENS, seed=EVAL_SEED, excess=True
    )
    record = {
        "loss": _round([loss[n] for n in lens]),
        "excess": _round([excess[n] for n in lens]),
        "curve": curve,
        "converged": converged(curve["excess"][str(L)], tol=CONVERGED_TOL),
        "by_position": _round(
            loss_by_position(
                model, src, 8 * L, num_sequences=256, seed=EVAL_SEED, excess=True
            ),
            4,
        ),
        "attention": {
            k: _round(v, 4)
            for k, v in attention_shares(
                model, torch.from_numpy(src.sample(32, 8 * L, seed=EVAL_SEED)), L
            ).items()
        },
        "history": _round(
            np.asarray(history[: len(history) // 20 * 20]).reshape(-1, 20).mean(1), 4
        ),
    }
    if run.config in EVERY_SEED_WEIGHTS:
        record.update(stretch_record(model, src, L, run.seed, device))
    if getattr(src, "stream", True):
        record["strided"] = _round(
            [sliding_excess(model, src, m * L, L // 2, 4096) for m in (1, 2, 6)]
        )
    if run.config in WINDOWED and L == 32 and steps == budget(run.source, run.config):
        values = windowed_excess(model, src, L, lens)
        record["windowed"] = _round([values[n] for n in lens])
    return record, {k: v.cpu() for k, v in model.state_dict().items()}


def _path(key: str, root: Path) -> Path:
    return root / f"{key}.json"


def _weights_path(key: str, root: Path, seed: int = 0) -> Path:
    return root / "weights" / (f"{key}.pt" if seed == 0 else f"{key}--seed{seed}.pt")


def _read(key: str, root: Path) -> dict:
    path = _path(key, root)
    if not path.is_file():
        raise FileNotFoundError(
            f"no recorded lab run {key!r} in {root.name}/: run make lab-train, which "
            "writes it"
        )
    return json.loads(path.read_text(encoding="utf-8"))


def _write(run: Run, record: dict, state: dict, root: Path) -> None:
    steps = run.steps
    path = _path(run.key, root)
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    if data.get("steps", steps) != steps:
        data = {}  # another budget: start the file afresh
    data.update(
        {
            "source": run.source,
            "config": run.config,
            "train_len": run.train_len,
            "steps": steps,
            "model": dataclasses.asdict(model_config(run.config, run.train_len)),
            "torch": torch.__version__.split("+")[0],
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        }
    )
    data.setdefault("seeds", {})[str(run.seed)] = record
    data["seeds"] = dict(sorted(data["seeds"].items(), key=lambda kv: int(kv[0])))
    root.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, sort_keys=True) + "\n", encoding="utf-8")
    if run.steps == budget(run.source, run.config) and (
        run.config in EVERY_SEED_WEIGHTS
        or (run.seed == 0 and not run.source.endswith("-b"))
    ):
        _weights_path(run.key, root).parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, _weights_path(run.key, root, run.seed))


def load(
    source_name: str,
    config: str,
    train_len: int = 32,
    *,
    steps: int | None = None,
    seeds=None,
    root=None,
) -> dict:
    """A recorded configuration, every seed stacked:
    ``{"seeds", "steps", name: array (seeds, ...)}``.

    Every per-seed entry of the module's description becomes an array whose first axis
    is the seed (``"curve"`` gives ``"curve_step"`` and ``"curve"``:
    ``(seeds, 3, checkpoints)`` at ``L, 2L, 8L``; ``"attention"`` gives
    ``"attention_<share>"`` of ``(seeds, layers, heads)``; a configuration of
    ``EVERY_SEED_WEIGHTS`` also gives :func:`stretch_record`'s entries: ``"stretched"``
    ``{method: (seeds, factors, 2)}``, ``"finetuned"``
    ``{method: {"excess": (seeds, 3), "curve": (seeds, checkpoints)}}`` and
    ``"continued"`` ``(seeds,)``). ``seeds`` picks some of them (all recorded ones by
    default); ``steps`` picks the budget (default: the configuration's own,
    :func:`budget`).
    """
    root = RECORD if root is None else Path(root)
    steps = (
        budget(source_name, config)
        if steps is None
        else _checks.positive_int("steps", steps)
    )
    key = Run(
        source_name, config, _checks.positive_int("train_len", train_len), 0, steps
    ).key
    data = _read(key, root)
    recorded = [int(s) for s in data["seeds"]]
    seeds = recorded if seeds is None else [_checks.integer("seed", s) for s in seeds]
    missing = sorted(set(seeds) - set(recorded))
    if missing:
        raise ValueError(
            f"run {key!r} has no recorded seeds {missing} (it has {recorded}); run "
            "make lab-train"
        )
    entries = [data["seeds"][str(s)] for s in seeds]
    out = {"seeds": seeds, "steps": data["steps"], "train_len": data["train_len"]}
    for name in (
        "loss",
        "excess",
        "by_position",
        "history",
        "converged",
        "strided",
        "windowed",
    ):
        if name in entries[0]:
            out[name] = np.array([e[name] for e in entries])
    out["curve_step"] = np.array(entries[0]["curve"]["step"])
    out["curve"] = np.array(
        [
            [e["curve"]["excess"][n] for n in sorted(e["curve"]["excess"], key=int)]
            for e in entries
        ]
    )
    for share in entries[0]["attention"]:
        out[f"attention_{share}"] = np.array([e["attention"][share] for e in entries])
    # stretch_record's: (seeds, factors, 2), (seeds, 3), (seeds,)
    if "stretched" in entries[0]:
        out["stretched"] = {
            m: np.array([e["stretched"][m] for e in entries])
            for m in entries[0]["stretched"]
        }
        out["finetuned"] = {
            m: {
                k: np.array([e["finetuned"][m][k] for e in entries])
                for k in ("excess", "curve")
            }
            for m in entries[0]["finetuned"]
        }
        out["continued"] = np.array([e["continued"] for e in entries])
    return out


def trained_model(source_name: str, config: str, train_len: int = 32, *, seed: int = 0,
                  root=None) -> TinyDecoder:
    """A trained model of a recorded configuration (in eval mode): seed 0's, or
    ``seed``'s.

    Every seed's weights are kept for the configurations in ``EVERY_SEED_WEIGHTS``; for
    the others, seed 0's only (on the first instance of each source).
    """
    root = RECORD if root is None else Path(root)
    seed = _checks.integer("seed", seed)
    key = Run(
        source_name, config, _checks.positive_int("train_len", train_len), seed
    ).key
    path = _weights_path(key, root, seed)
    if not path.is_file():
        raise FileNotFoundError(
            f"no recorded weights for {key!r} seed {seed} (kept for seed 0, and for "
            f"every seed of {EVERY_SEED_WEIGHTS}); run make lab-train, which writes "
            "them"
        )
    model = TinyDecoder(model_config(config, train_len))
    model.load_state_dict(torch.load(path, weights_only=True))
    return model.eval()


# What make lab-check compares, and how closely: another CPU adds in another order, and
# training amplifies that; on the CPU kind that wrote the record, runs reproduce it
# exactly.
CHECKED = {"loss": 0.03, "excess": 0.03, "strided": 0.03, "windowed": 0.03}


def compare(recorded: dict, record: dict, tolerance: dict = CHECKED) -> list[str]:
    """Where a retrained run differs from its record by more than ``tolerance``
    (nats)."""
    differences = []
    for name, tol in tolerance.items():
        if name not in recorded:
            continue
        a, b = np.asarray(recorded[name]), np.asarray(record[name])
        if a.shape != b.shape or np.max(np.abs(a - b)) > tol:
            differences.append(f"{name}: recorded {a.tolist()}, retrained {b.tolist()}")
    return differences


def _train_task(run: Run, steps: int, device=None):
    start = time.perf_counter()
    record, state = train_run(run, steps, device)
    return record, state, time.perf_counter() - start


def _main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m companion.lab_runs", description=__doc__.split("\n")[0]
    )
    parser.add_argument("command", choices=("train", "check", "list"))
    parser.add_argument(
        "--only",
        default="*",
        help="runs whose key matches this pattern, e.g. 'repeat--rope*'",
    )
    parser.add_argument(
        "--seeds", default=None, help="comma-separated seeds (default: each group's)"
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="processes (default: every core)"
    )
    parser.add_argument(
        "--root",
        default=str(RECORD),
        help="where the records are (default: book/data/lab_runs)",
    )
    parser.add_argument(
        "--device", default=None, help="e.g. cuda (with --workers 1 on one GPU)"
    )
    parser.add_argument(
        "--missing", action="store_true", help="train only runs the record lacks"
    )
    args = parser.parse_args(argv)
    root = Path(args.root)
    todo = [r for r in runs() if fnmatch.fnmatch(r.key, args.only)]
    if args.seeds is not None:
        wanted = {int(s) for s in args.seeds.split(",")}
        todo = [r for r in todo if r.seed in wanted]
    if args.command == "check":  # seed 0 of every configuration, on the first instances
        todo = [r for r in todo if r.seed == 0 and not r.source.endswith("-b")
                and r.steps == budget(r.source, r.config)]
    if args.missing:
        todo = [
            r
            for r in todo
            if not _path(r.key, root).is_file()
            or str(r.seed)
            not in json.loads(_path(r.key, root).read_text(encoding="utf-8"))["seeds"]
        ]
    if args.command == "list":
        print("\n".join(f"{r.key} seed {r.seed}" for r in todo))
        return 0
    print(f"{len(todo)} runs, {sum(r.steps for r in todo)} steps in all", flush=True)
    failures = []
    workers = args.workers or available_cores()
    for start in range(0, len(todo), workers):
        chunk = todo[start : start + workers]
        for run, (record, state, seconds) in zip(
            chunk,
            run_parallel(
                _train_task, [(r, r.steps, args.device) for r in chunk], workers
            ),
        ):
            if args.command == "train":
                _write(run, record, state, root)
                print(
                    f"{run.key} seed {run.seed}: {seconds:.0f} s, excess at L "
                    f"{record['excess'][0]:.3f}",
                    flush=True,
                )
                continue
            recorded = _read(run.key, root)["seeds"].get(str(run.seed))
            differences = (
                ["not recorded"] if recorded is None else compare(recorded, record)
            )
            worst = (
                0.0
                if recorded is None
                else max(
                    float(
                        np.max(np.abs(np.asarray(recorded[n]) - np.asarray(record[n])))
                    )
                    for n in CHECKED
                    if n in record
                )
            )
            print(
                f"{run.key} seed {run.seed}: "
                f"{'matches' if not differences else 'DIFFERS'} (largest difference "
                f"{worst:.1e} nats)",
                flush=True,
            )
            failures += [f"{run.key} seed {run.seed}: {d}" for d in differences]
    if failures:
        print("\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main())
