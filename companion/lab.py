"""Entry points for the lab chapters: each trains small models and returns plain
numbers.

Every experiment is a set of independent runs, one per (setting, seed). They run in
``workers`` processes (default: the cores this process may use), each on one thread, so
the numbers are bit-identical for any ``workers`` and any core count; only the
wall-clock time changes. Defaults are the chapters' settings; every function takes the
knobs a learner may want to turn. Losses are in nats per predicted token.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Sequence

import numpy as np
import torch

from companion import _checks
from companion.data import MarkovChain
from companion.model import SCHEMES, ModelConfig, TinyDecoder
from companion.train import (
    TrainConfig,
    evaluate,
    floor_by_length,
    loss_by_position,
    one_thread,
    train,
)

SOURCE = {"vocab_size": 8, "order": 2, "seed": 0}
DEFAULT_SEEDS = (0, 1, 2, 3, 4)


def seeds_from_environment(value: str | None = None) -> tuple[int, ...]:
    """The lab's seeds: ``LAB_SEEDS`` from the environment, or the default five.

    Args:
        value: the text to read; by default the environment's ``LAB_SEEDS``. Unset or
            empty means the default seeds, ``(0, 1, 2, 3, 4)``.

    Returns:
        The seeds, in the order given.

    Raises:
        ValueError: the text is not comma-separated distinct integers 0 or more.
    """
    if value is None:
        value = os.environ.get("LAB_SEEDS", "")
    if not value.strip():
        return DEFAULT_SEEDS
    example = f"e.g. LAB_SEEDS=5,6,7,8,9; got {value!r}"
    parts = [part.strip() for part in value.split(",")]
    if not all(part.isascii() and part.isdigit() for part in parts):
        raise ValueError(
            f"LAB_SEEDS must be comma-separated integers 0 or more, {example}"
        )
    seeds = tuple(int(part) for part in parts)
    if len(set(seeds)) < len(seeds):
        raise ValueError(f"LAB_SEEDS must name each seed once, {example}")
    return seeds


# The five seeds every lab claim is checked on. LAB_SEEDS="5,6,7,8,9" in the environment
# replaces them, to rerun a chapter on seeds its claims were not written from (the
# chapters' asserts on the seed list then fail on purpose; every other assert is a
# claim). It is read once, when this module is first imported.
SEEDS = seeds_from_environment()
# The model of chapters 12 and 13: 2 layers of width 32 with 4 heads (so ALiBi has the
# same four slopes as at ModelConfig's default width 64), small enough to train 5 seeds
# of every scheme within the chapters' time budgets on two cores. Chapter 14 (RoPE only)
# uses 2 heads of 16 features, so that each head has 8 rotary pairs: ROPE_MODEL.
MODEL = {"dim": 32, "num_heads": 4}
ROPE_MODEL = {"dim": 32, "num_heads": 2}


def default_source() -> MarkovChain:
    """The lab's data: an order-2 Markov chain over 8 tokens (seed 0)."""
    return MarkovChain(**SOURCE)


def available_cores() -> int:
    """The number of cores this process may run on."""
    return (
        len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else (os.cpu_count() or 1)
    )


def run_parallel(
    function: Callable, tasks: Sequence[tuple], workers: int | None = None
) -> list:
    """``[function(*task) for task in tasks]``, on ``workers`` processes: this one and
    helpers.

    ``function`` must be importable (defined at the top level of a module). With one
    worker, or one task, everything runs in this process. Otherwise this process runs
    tasks too, next to ``workers - 1`` helper processes, which are fresh interpreters
    ("spawn"): a script file that calls this must do so under
    ``if __name__ == "__main__":``; notebooks and scripts read from standard input need
    nothing. Results come back in the order of ``tasks``. Every task runs on one thread
    and seeds itself, so the results do not depend on which process ran it.

    Starting a helper costs a few seconds (it imports PyTorch); this process works in
    the meantime, and the helpers stay alive for the next call. They stop when Python
    exits, or with :func:`stop_workers`.
    """
    workers = (
        available_cores()
        if workers is None
        else _checks.positive_int("workers", workers)
    )
    tasks = list(tasks)
    workers = min(workers, len(tasks))
    if workers <= 1:
        return [_run_one(function, task) for task in tasks]
    pool, helpers = _pool(workers - 1), workers - 1
    # in order: callers put long tasks first
    pending = collections.deque(range(len(tasks)))
    lock = threading.Lock()
    results, futures, failed = [None] * len(tasks), {}, []

    def take() -> int | None:
        with lock:
            return pending.popleft() if pending else None

    # in a thread: give each helper its next task as soon as it is free
    def feed() -> None:
        running = set()
        try:
            while True:
                while len(running) < helpers and (i := take()) is not None:
                    future = pool.submit(_run_one, function, tasks[i])
                    futures[future], running = i, running | {future}
                if not running:
                    return
                _, running = wait(running, return_when=FIRST_COMPLETED)
        except BaseException as error:  # e.g. the pool broke: the caller raises it
            failed.append(error)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        while (i := take()) is not None:  # this process takes tasks from the same queue
            results[i] = _run_one(function, tasks[i])
        feeder.join()
        if failed:
            raise failed[0]
        for future, i in futures.items():
            results[i] = future.result()
    except BaseException as error:
        with lock:
            pending.clear()  # the helpers finish the task in hand and take no more
        if isinstance(error, BrokenProcessPool):
            # a helper died (out of memory, killed): start afresh next time
            stop_workers()
        raise
    return results


def _run_one(function: Callable, task: tuple):
    # the helpers have PyTorch's defaults; this process must too
    _checks.default_float32()
    with one_thread():
        return function(*task)


def _start_helper(parent: int) -> None:
    """Runs first in every helper: Ctrl-C is for the parent; exit when the parent is
    gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, daemon=True).start()


# at most one pool: {number of helpers: pool}
_POOL: dict[int, ProcessPoolExecutor] = {}


class _SpawnProcess(multiprocessing.context.SpawnProcess):
    """A spawned helper that does not re-run a main script that is no file.

    A spawned interpreter first re-imports the parent's ``__main__`` from its file. A
    script read from standard input (``python - <<EOF``) names the file ``<stdin>``,
    which does not exist, so every helper would die at start-up (``BrokenProcessPool``).
    The helpers need nothing from ``__main__`` (tasks call importable functions), so in
    that case they are started as if from an interactive session, which re-imports
    nothing.
    """

    _lock = threading.Lock()

    @staticmethod
    def _Popen(process_obj):
        main = sys.modules["__main__"]
        path = getattr(main, "__file__", None)
        if (
            getattr(main, "__spec__", None) is not None
            or path is None
            or os.path.isfile(path)
        ):
            return multiprocessing.context.SpawnProcess._Popen(process_obj)
        with _SpawnProcess._lock:  # hide the name only while this helper is started
            del main.__file__
            try:
                return multiprocessing.context.SpawnProcess._Popen(process_obj)
            finally:
                main.__file__ = path


class _SpawnContext(multiprocessing.context.SpawnContext):
    Process = _SpawnProcess


def _pool(helpers: int) -> ProcessPoolExecutor:
    if helpers not in _POOL:
        stop_workers()
        # "spawn" starts clean interpreters on every platform (fork is unsafe with
        # threads).
        _POOL[helpers] = ProcessPoolExecutor(
            max_workers=helpers, mp_context=_SpawnContext(), initializer=_start_helper,
            initargs=(os.getpid(),),
        )
    return _POOL[helpers]


def stop_workers() -> None:
    """Stop the helper processes that :func:`run_parallel` keeps between calls."""
    for pool in _POOL.values():
        pool.shutdown(wait=True, cancel_futures=True)
    _POOL.clear()


def _seeds(seeds: Sequence[int]) -> list[int]:
    seeds = [_checks.integer("seed", s) for s in seeds]
    if not seeds:
        raise ValueError("seeds must name at least one seed, e.g. (0, 1, 2, 3, 4)")
    return seeds


def _eval_lens(train_len: int, eval_lens: Sequence[int] | None) -> list[int]:
    lens = (
        [train_len * m for m in (1, 2, 4, 8)] if eval_lens is None else list(eval_lens)
    )
    return [_checks.positive_int("eval length", L) for L in lens]


def _model_config(source: MarkovChain, options: dict | None, **settings) -> ModelConfig:
    """A ModelConfig: ``lab.MODEL``, the experiment's settings, then the learner's
    ``model_options``."""
    options = dict(options or {})
    known = {f.name for f in dataclasses.fields(ModelConfig)} - {"vocab_size"}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(
            f"model_options has unknown keys {unknown}; use ModelConfig fields: "
            f"{sorted(known)}"
        )
    return ModelConfig(vocab_size=source.vocab_size, **{**MODEL, **settings, **options})


@dataclasses.dataclass(frozen=True)
class _ExtrapolationTask:
    """One (scheme, seed) run of :func:`length_extrapolation`, as sent to a worker."""

    config: ModelConfig
    train_config: TrainConfig
    source: object
    lens: list
    num_tokens: int
    position_sequences: int
    stride: int | None
    strided_lens: list
    strided_tokens: int
    extra_steps: int
    device: object


def _extrapolation_run(task: _ExtrapolationTask) -> dict:
    """One (scheme, seed) run of :func:`length_extrapolation`; plain data only."""
    config, train_config, source, lens = (
        task.config,
        task.train_config,
        task.source,
        task.lens,
    )
    num_tokens, stride, strided_lens, extra_steps = (
        task.num_tokens,
        task.stride,
        task.strided_lens,
        task.extra_steps,
    )
    position_sequences, strided_tokens, device = (
        task.position_sequences,
        task.strided_tokens,
        task.device,
    )
    out = {}

    def measure(step, model):
        if step != train_config.steps:
            return
        out["loss"] = [
            evaluate(model, source, lens, num_tokens=num_tokens)[n] for n in lens
        ]
        out["excess_by_position"] = loss_by_position(
            model, source, max(lens), num_sequences=position_sequences, excess=True
        )
        if stride is not None:
            strided = evaluate(
                model,
                source,
                strided_lens,
                num_tokens=strided_tokens,
                stride=stride,
                excess=True,
            )
            out["strided"] = [strided[n] for n in strided_lens]

    longer = dataclasses.replace(train_config, steps=train_config.steps + extra_steps)
    model, history = train(config, longer, source, callback=measure, device=device)
    out["history"] = history[: train_config.steps]
    if extra_steps:
        out["long_loss"] = [
            evaluate(model, source, lens, num_tokens=num_tokens)[n] for n in lens
        ]
        out["long_history"] = history
    return out


def length_extrapolation(
    schemes: Sequence[str] = SCHEMES,
    train_len: int = 32,
    eval_lens: Sequence[int] | None = None,
    seeds: Sequence[int] = SEEDS,
    *,
    steps: int = 400,
    num_tokens: int = 8192,
    position_sequences: int = 64,
    stride: int | None = None,
    strided_lens: Sequence[int] | None = None,
    strided_tokens: int = 2048,
    strided_schemes: Sequence[str] | None = None,
    extra_steps: dict[str, int] | None = None,
    model_options: dict | None = None,
    source: MarkovChain | None = None,
    workers: int | None = None,
    device=None,
) -> dict:
    """Train one model per scheme and seed at ``train_len``; evaluate at each length.

    Evaluation is on non-overlapping chunks of each length (default L, 2L, 4L, 8L). With
    ``stride``, the models are also evaluated with a sliding window at ``strided_lens``
    (default L, 2L, 6L) on ``strided_tokens`` tokens, every scored prediction having at
    least ``length - stride`` tokens of context, and scored as the excess over the
    chain's own loss on the same tokens (0 is the best possible); ``strided_schemes``
    (default: all) limits this to some schemes. ``model_options`` are extra
    :class:`ModelConfig` fields for every model (e.g. ``{"rope_base": 100.0}``);
    ``source`` replaces the lab's chain. ``extra_steps`` (e.g. ``{"none": 1200}``)
    trains those schemes on past ``steps`` (every result above is still taken at
    ``steps``: the run passes through the same state) and adds their loss at the end as
    ``"long_loss"`` and ``"long_history"``. ``device`` (e.g. ``"cuda"``) is where every
    model trains; use ``workers=1`` with a single GPU. Every model is built with
    ``max_len = 8 * train_len`` (or the longest evaluation, if longer), so a seed trains
    the same learned table whatever lengths it is evaluated at.

    Returns:
        ``{"lens", "seeds", "steps", "model_options", "position_sequences", "floor",
        "floor_by_length", "loss": {scheme: (seeds, lens)}, "history": {scheme: (seeds,
        steps)}, "excess_by_position": {scheme: (seeds, max(lens) - 1)}}``: the loss at
        each position of a window minus the chain's own loss on the same tokens, mean
        over ``position_sequences`` windows. With ``stride`` also ``"strided_lens"`` and
        ``"strided": {scheme: (seeds, strided_lens)}`` (excess losses,
        ``strided_schemes`` only).
    """
    source = default_source() if source is None else source
    train_len = _checks.positive_int("train_len", train_len)
    lens = _eval_lens(train_len, eval_lens)
    seeds = _seeds(seeds)
    for scheme in schemes:
        _checks.choice("scheme", scheme, SCHEMES)
    strided_lens = (
        [train_len * m for m in (1, 2, 6)]
        if strided_lens is None
        else list(strided_lens)
    )
    strided_schemes = (
        tuple(schemes) if strided_schemes is None else tuple(strided_schemes)
    )
    for scheme in strided_schemes:
        _checks.choice("strided_schemes scheme", scheme, tuple(schemes))
    extra_steps = dict(extra_steps or {})
    for scheme, extra in extra_steps.items():
        _checks.choice("extra_steps scheme", scheme, tuple(schemes))
        _checks.positive_int(f"extra_steps[{scheme!r}]", extra)
    # A learned table gets 8 * train_len rows (more only if an evaluation needs them),
    # as in lab_runs: its rows are drawn before the blocks, so the number of rows
    # changes every later weight of a seed's model; with a fixed count, asking for other
    # evaluation lengths (up to 8L) trains the same model.
    max_len = max([8 * train_len] + lens + (strided_lens if stride is not None else []))
    tasks = [
        _ExtrapolationTask(
            config=_model_config(
                source, model_options, position=scheme, max_len=max_len
            ),
            train_config=TrainConfig(steps=steps, seq_len=train_len, seed=seed),
            source=source,
            lens=lens,
            num_tokens=num_tokens,
            position_sequences=position_sequences,
            stride=stride if scheme in strided_schemes else None,
            strided_lens=strided_lens,
            strided_tokens=strided_tokens,
            extra_steps=extra_steps.get(scheme, 0),
            device=device,
        )
        for scheme in schemes
        for seed in seeds
    ]
    # The longest runs first, so that the workers finish together; results come back in
    # place.
    order = sorted(range(len(tasks)), key=lambda i: -tasks[i].extra_steps)
    runs = [None] * len(tasks)
    for i, run in zip(
        order, run_parallel(_extrapolation_run, [(tasks[i],) for i in order], workers)
    ):
        runs[i] = run
    per_scheme = {
        scheme: runs[k * len(seeds) : (k + 1) * len(seeds)]
        for k, scheme in enumerate(schemes)
    }
    result = {
        "lens": lens,
        "seeds": seeds,
        "steps": steps,
        "model_options": dict(model_options or {}),
        "position_sequences": position_sequences,
        "floor": source.entropy_rate(),
        "floor_by_length": floor_by_length(source, lens),
    }
    for key in ("loss", "history", "excess_by_position"):
        result[key] = {
            s: np.array([run[key] for run in runs_]) for s, runs_ in per_scheme.items()
        }
    if stride is not None:
        result["strided_lens"] = strided_lens
        result["strided"] = {
            s: np.array([run["strided"] for run in per_scheme[s]])
            for s in strided_schemes
        }
    for scheme in extra_steps:
        result.setdefault("long_loss", {})[scheme] = np.array(
            [run["long_loss"] for run in per_scheme[scheme]]
        )
        result.setdefault("long_history", {})[scheme] = np.array(
            [run["long_history"] for run in per_scheme[scheme]]
        )
    result["long_steps"] = {
        scheme: steps + extra for scheme, extra in extra_steps.items()
    }
    return result


# (position, combine, scale_embedding): both combinations for both tables with the
# paper's sqrt(d) scale, and the additive ones without it.
ADD_VS_CONCAT = (
    ("sinusoidal", "add", True),
    ("sinusoidal", "concat", True),
    ("sinusoidal", "add", False),
    ("learned", "add", True),
    ("learned", "concat", True),
    ("learned", "add", False),
)


def _add_vs_concat_run(config, train_config, source, num_tokens, device=None):
    model, history = train(config, train_config, source, device=device)
    length = train_config.seq_len
    return {"loss": evaluate(model, source, [length], num_tokens=num_tokens)[length],
            "parameters": model.num_parameters(), "history": history}


def add_vs_concat(
    configs: Sequence[tuple[str, str, bool]] = ADD_VS_CONCAT,
    seeds: Sequence[int] = SEEDS,
    *,
    train_len: int = 32,
    steps: int = 400,
    position_dim: int = 16,
    num_tokens: int = 8192,
    source: MarkovChain | None = None,
    workers: int | None = None,
    device=None,
) -> list[dict]:
    """In-length loss of absolute positions added to or concatenated with the tokens.

    ``concat`` keeps the model width: tokens get ``dim - position_dim`` features,
    positions ``position_dim``, so every layer after the embedding is the same size. A
    config may carry a fourth element, a dict of other :class:`ModelConfig` fields (e.g.
    ``{"learned_init_std": 1.0}``). Returns one row per configuration and seed:
    ``{"position", "combine", "scale", "options", "seed", "loss", "parameters",
    "history"}`` (``history``: the training loss at each step). ``device`` (e.g.
    ``"cuda"``, with ``workers=1`` on one GPU) is where every model trains and is
    evaluated.
    """
    source = default_source() if source is None else source
    seeds = _seeds(seeds)
    tasks, rows = [], []
    for entry in configs:
        if not isinstance(entry, tuple) or len(entry) not in (3, 4):
            raise TypeError(
                "each config must be (position, combine, scale) or (..., options "
                f"dict), got {entry!r}"
            )
        position, combine, scale, options = entry if len(entry) == 4 else (*entry, None)
        config = _model_config(
            source,
            options,
            position=position,
            combine=combine,
            position_dim=position_dim,
            scale_embedding=scale,
            max_len=train_len,
        )
        for seed in seeds:
            tasks.append(
                (
                    config,
                    TrainConfig(steps=steps, seq_len=train_len, seed=seed),
                    source,
                    num_tokens,
                    device,
                )
            )
            rows.append(
                {
                    "position": position,
                    "combine": combine,
                    "scale": scale,
                    "options": options or {},
                    "seed": seed,
                }
            )
    for row, run in zip(rows, run_parallel(_add_vs_concat_run, tasks, workers)):
        row.update(run)
    return rows


def approx_flops_per_token(config: ModelConfig, seq_len: int) -> int:
    """Forward FLOPs per token: 2 per weight of every matrix product, plus attention
    scores.

    Counts the layers' and the output head's weight matrices (``2 * weights``) and the
    ``q k^T`` and weighted-sum products (``2 * 2 * seq_len * dim`` per layer, at full
    length); embedding lookups, norms and softmax are left out (they are small).
    """
    seq_len = _checks.positive_int("seq_len", seq_len)
    d, layers = config.dim, config.num_layers
    per_layer = 4 * d * d + 2 * config.mlp_ratio * d * d  # qkv + out, mlp in + out
    matmul_weights = layers * per_layer + d * config.vocab_size
    return 2 * matmul_weights + layers * 4 * seq_len * d


def rope_scalings(factor: float, train_len: int) -> dict[str, dict | None]:
    """The four ways the lab runs a RoPE model at ``factor`` times its training
    length."""
    return {
        "none": None,
        "linear": {"type": "linear", "factor": factor},
        "ntk": {"type": "ntk", "factor": factor},
        "yarn": {"type": "yarn", "factor": factor, "original_max_len": train_len},
    }


def with_rope_scaling(
    model: TinyDecoder, scaling: dict | None, *, attention_scale: float = 1.0
) -> TinyDecoder:
    """A copy of a trained RoPE ``model`` that runs with ``scaling``; the original is
    untouched."""
    if not isinstance(model, TinyDecoder):
        raise TypeError(f"model must be a TinyDecoder, got {type(model).__name__}")
    stretched = copy.deepcopy(model)
    stretched.set_rope_scaling(scaling, attention_scale=attention_scale)
    return stretched


def with_rope_speeds(
    model: TinyDecoder, ratios, *, attention_scale: float = 1.0
) -> TinyDecoder:
    """A copy of a trained RoPE ``model`` whose pair ``i`` turns ``ratios[i]`` times as
    fast.

    For controls that no named scaling expresses, e.g. slowing only pair 0 by ``1 / s``
    (``ratios = [1 / s, 1, 1, ...]``). ``ratios`` is ``(d/2,)``, one positive number per
    rotary pair of a head; ``rope_frequencies(d, scaling=sc) / rope_frequencies(d)``
    turns a named scaling ``sc`` into its ratios. The original model is untouched.
    """
    if not isinstance(model, TinyDecoder):
        raise TypeError(f"model must be a TinyDecoder, got {type(model).__name__}")
    if model.config.position != "rope":
        raise ValueError(
            "with_rope_speeds needs a rope model, this one uses "
            f"{model.config.position!r}"
        )
    pairs = model.config.dim // model.config.num_heads // 2
    ratios = np.asarray(ratios, dtype=np.float64)
    if ratios.shape != (pairs,) or not np.all(np.isfinite(ratios) & (ratios > 0)):
        raise ValueError(
            f"ratios must be {pairs} positive numbers, one per rotary pair of a head; "
            f"got {ratios.tolist()}"
        )
    stretched = with_rope_scaling(model, None, attention_scale=attention_scale)
    for block in stretched.blocks:
        rotary = block.attn.qk_transform
        if rotary is None:  # a NoPE layer (config.nope_layers)
            continue
        rotary._theta64 = rotary._theta64 * ratios
        rotary.theta = torch.from_numpy(rotary._theta64.copy()).to(rotary.theta.device)
        rotary._build_cache(rotary.cached_len)
    return stretched


def _apply(function: Callable, args: tuple):
    """``function(*args)``: lets one :func:`run_parallel` call run tasks of several
    kinds."""
    return function(*args)


def _trained_rope_model(config: ModelConfig, state: dict, device=None) -> TinyDecoder:
    model = TinyDecoder(config)
    model.load_state_dict(state)
    return model if device is None else model.to(device)


def _rope_train_run(config, train_config, source, num_tokens, device=None):
    """One seed of :func:`rope_extension`, first part: train at L; plain data only."""
    model, history = train(config, train_config, source, device=device)
    length = train_config.seq_len
    return {
        "trained": evaluate(model, source, [length], num_tokens=num_tokens)[length],
        "history": history,
        "state": {k: v.cpu() for k, v in model.state_dict().items()},
    }


def _rope_method_run(
    config,
    state,
    train_config,
    source,
    method,
    factors,
    finetune_factor,
    finetune_steps,
    finetune_batch_size,
    num_tokens,
    device=None,
):
    """One (seed, method) of :func:`rope_extension`: stretch zero-shot to each factor,
    then fine-tune."""
    from companion.rope import yarn_attention_scale

    base_model, train_len = (
        _trained_rope_model(config, state, device),
        train_config.seq_len,
    )

    def stretched(factor: int) -> TinyDecoder:
        scale = yarn_attention_scale(factor) if method == "yarn" else 1.0
        return with_rope_scaling(
            base_model, rope_scalings(factor, train_len)[method], attention_scale=scale
        )

    out = {
        "zero_shot": {
            f: evaluate(stretched(f), source, [f * train_len], num_tokens=num_tokens)[
                f * train_len
            ]
            for f in factors
        }
    }
    if finetune_steps:
        long_len = finetune_factor * train_len
        tune = TrainConfig(
            steps=finetune_steps,
            batch_size=finetune_batch_size,
            seq_len=long_len,
            seed=train_config.seed + 100,
            warmup=1,
            lr=1e-3,
        )
        tuned, _ = train(config, tune, source, model=stretched(finetune_factor))
        out["finetuned"] = evaluate(tuned, source, [long_len], num_tokens=num_tokens)[
            long_len
        ]
    return out


def _rope_continue_run(config, state, train_config, source, num_tokens, device=None):
    """One (seed, rate) of :func:`rope_extension`'s ``continued_lrs``: train on at L,
    evaluate at L."""
    more, _ = train(
        config, train_config, source, model=_trained_rope_model(config, state, device)
    )
    length = train_config.seq_len
    return evaluate(more, source, [length], num_tokens=num_tokens)[length]


def rope_extension(
    train_len: int = 32,
    factors: Sequence[int] = (2, 4, 8),
    seeds: Sequence[int] = SEEDS,
    *,
    steps: int = 400,
    finetune_factor: int = 4,
    finetune_steps: int = 40,
    finetune_batch_size: int = 8,
    continued_lrs: Sequence[float] = (),
    num_tokens: int = 8192,
    model_options: dict | None = None,
    source: MarkovChain | None = None,
    workers: int | None = None,
    device=None,
) -> dict:
    """Stretch a RoPE model trained at ``train_len`` to ``factor * train_len``, per
    seed.

    Zero-shot for every factor and method; then, at ``finetune_factor`` only, each
    method is fine-tuned for ``finetune_steps`` steps of ``finetune_batch_size``
    sequences at the longer length (a fresh copy each; ``finetune_steps=0`` skips this
    and leaves ``"finetuned"`` empty). The model is ``lab.ROPE_MODEL``: width 32 in 2
    heads of 16 features (8 rotary pairs per head).
    YaRN also gets its attention temperature. ``model_options`` are extra
    :class:`ModelConfig` fields (e.g. ``{"rope_base": 100.0}``).

    ``continued_lrs`` is a control: for each learning rate, a copy of each seed's
    trained model, unscaled, is trained on at ``train_len`` for ``finetune_steps`` steps
    with the same tokens per step as fine-tuning
    (``finetune_batch_size * finetune_factor`` sequences), then evaluated at
    ``train_len``.

    ``device`` (e.g. ``"cuda"``, with ``workers=1`` on one GPU) is where every model
    trains and is evaluated; the returned models are on the CPU.

    Returns:
        ``{"seeds", "factors", "floor_by_length": {...}, "trained": (seeds,),
        "history": (seeds, steps), "zero_shot": {method: (seeds, factors)},
        "finetuned": {method: (seeds,)}, "continued": {lr: (seeds,)}, "models"}``
        (arrays of losses; ``"models"``: each seed's trained model).
    """
    source = default_source() if source is None else source
    train_len = _checks.positive_int("train_len", train_len)
    factors = [_checks.positive_int("factor", f) for f in factors]
    finetune_factor = _checks.positive_int("finetune_factor", finetune_factor)
    if _checks.integer("finetune_steps", finetune_steps) < 0:
        raise ValueError(
            "finetune_steps must be 0 (no fine-tuning) or positive, got "
            f"{finetune_steps}"
        )
    seeds = _seeds(seeds)
    lens = [train_len] + [f * train_len for f in factors]
    finetune_batch_size = _checks.positive_int(
        "finetune_batch_size", finetune_batch_size
    )
    continued_lrs = [
        _checks.real("learning rate in continued_lrs", lr) for lr in continued_lrs
    ]
    if any(lr <= 0 for lr in continued_lrs) or (continued_lrs and not finetune_steps):
        raise ValueError(
            "continued_lrs must be positive rates, with finetune_steps > 0; got "
            f"{continued_lrs}"
        )
    config = _model_config(source, model_options, position="rope", **ROPE_MODEL)
    configs = [TrainConfig(steps=steps, seq_len=train_len, seed=seed) for seed in seeds]
    runs = run_parallel(
        _rope_train_run,
        [(config, tc, source, num_tokens, device) for tc in configs],
        workers,
    )
    # Then every (seed, method) and every (seed, rate) on its own, so that the processes
    # finish together: far more tasks than processes.
    methods = list(rope_scalings(2, train_len))
    method_tasks = [
        (
            config,
            run["state"],
            tc,
            source,
            m,
            factors,
            finetune_factor,
            finetune_steps,
            finetune_batch_size,
            num_tokens,
            device,
        )
        for run, tc in zip(runs, configs)
        for m in methods
    ]
    continued = [
        dataclasses.replace(
            tc,
            steps=finetune_steps,
            batch_size=finetune_batch_size * finetune_factor,
            seed=tc.seed + 100,
            warmup=1,
            lr=lr,
        )
        for lr in continued_lrs
        for tc in configs
    ]
    continue_tasks = [(config, run["state"], tc, source, num_tokens, device)
                      for tc, run in zip(continued, runs * len(continued_lrs))]
    results = run_parallel(
        _apply,
        [(_rope_method_run, task) for task in method_tasks]
        + [(_rope_continue_run, task) for task in continue_tasks],
        workers,
    )
    per_method, per_rate = results[: len(method_tasks)], results[len(method_tasks) :]
    by_seed = [
        per_method[k * len(methods) : (k + 1) * len(methods)] for k in range(len(seeds))
    ]
    return {
        "seeds": seeds,
        "factors": factors,
        "steps": steps,
        "model_options": dict(model_options or {}),
        "floor_by_length": floor_by_length(
            source, sorted(set(lens + [finetune_factor * train_len]))
        ),
        "trained": np.array([r["trained"] for r in runs]),
        "history": np.array([r["history"] for r in runs]),
        "zero_shot": {
            m: np.array([[row[j]["zero_shot"][f] for f in factors] for row in by_seed])
            for j, m in enumerate(methods)
        },
        "finetuned": {
            m: np.array([row[j]["finetuned"] for row in by_seed])
            for j, m in enumerate(methods)
            if finetune_steps
        },
        "continued": {
            lr: np.array(per_rate[k * len(seeds) : (k + 1) * len(seeds)])
            for k, lr in enumerate(continued_lrs)
        },
        "models": [_trained_rope_model(config, run["state"]).eval() for run in runs],
    }


def attention_by_offset(model: TinyDecoder, tokens) -> np.ndarray:
    """Where each head looks: attention weight by query position and offset, per layer.

    Runs ``model`` (in eval mode, without gradients) on ``tokens`` and keeps every
    layer's attention weights, then reads them by offset: how far back each query looks.

    Args:
        model: a :class:`TinyDecoder` (its mode and attention settings are restored
            after).
        tokens: int64 ``(b, s)`` token ids.

    Returns:
        float64 ``(layers, heads, s, s)``: entry ``[l, h, t, o]`` is the weight that
        query ``t`` puts on key ``t - o``, averaged over the ``b`` rows; 0 where
        ``o > t``. Each ``[l, h, t, :]`` sums to 1. For example
        ``out[..., 64:, 32:].sum(-1).mean(-1)`` is the share of attention that queries
        from 64 on give to offsets of 32 or more.
    """
    if not isinstance(model, TinyDecoder):
        raise TypeError(f"model must be a TinyDecoder, got {type(model).__name__}")
    tokens = torch.as_tensor(tokens)
    if tokens.ndim != 2 or tokens.dtype != torch.int64:
        raise ValueError(
            "tokens must be int64 ids of shape (batch, seq), got "
            f"{tuple(tokens.shape)} {tokens.dtype}"
        )
    attentions = [block.attn for block in model.blocks]
    kept, was_training = [a.keep_weights for a in attentions], model.training
    try:
        for a in attentions:
            a.keep_weights = True
        with torch.no_grad(), one_thread():
            model.eval()(tokens.to(model.device))
        weights = (
            torch.stack([a.last_weights for a in attentions]).double().mean(dim=1).cpu()
        )
    finally:
        for a, keep in zip(attentions, kept):
            a.keep_weights, a.last_weights = keep, None
        model.train(was_training)
    s = tokens.shape[1]
    query, offset = torch.arange(s)[:, None], torch.arange(s)[None, :]
    key = (query - offset).clamp(min=0)  # (s, s): the key at offset o from query t
    by_offset = weights.gather(-1, key.expand(*weights.shape[:-2], s, s))
    return by_offset.masked_fill(offset > query, 0.0).numpy()


def robust(
    values: Sequence[float],
    *,
    above: float | None = None,
    below: float | None = None,
    factor: float = 2.0,
) -> bool:
    """Whether every value is beyond the threshold by at least ``factor`` times their
    spread.

    The lab's rule for a claim: it must hold for every seed, and the margin between the
    seeds' values and the threshold must be at least twice their spread (half their
    range, the "±" of :func:`mean_and_spread`), so that a new seed, or another CPU, is
    unlikely to cross it. Give exactly one of ``above`` and ``below``.
    """
    margin, spread, _ = _margin_and_spread(values, above, below)
    return margin > 0 and margin >= factor * spread


def _margin_and_spread(values, above, below) -> tuple[float, float, np.ndarray]:
    """The signed margin from the threshold to the nearest value, the values' spread
    (half their range), and the values as a flat float64 array."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if (above is None) == (below is None):
        raise ValueError("give exactly one of above= and below=")
    if values.size < 2:
        raise ValueError(f"a claim needs at least two seeds' values, got {values.size}")
    spread = float(values.max() - values.min()) / 2
    margin = (
        float(values.min() - above)
        if above is not None
        else float(below - values.max())
    )
    return margin, spread, values


def why_not_robust(
    values: Sequence[float],
    *,
    above: float | None = None,
    below: float | None = None,
    factor: float = 2.0,
) -> str:
    """The verdict of :func:`robust` on the same arguments, in words, for an assert's
    message.

    ``robust`` can be False although every value is beyond the threshold: the margin
    (from the threshold to the nearest value) must also be at least ``factor`` times
    the values' spread (half their range). This says which part decided, with the
    numbers, e.g. "the lowest of 5 seeds, 0.31, is above 0.3, but by 0.01, less than
    2x their spread 0.04 (the lab's margin rule)".

    Args:
        values: one number per seed, shape (seeds,) (any shape is flattened); at
            least two.
        above, below: the threshold, exactly one of them, as for ``robust``.
        factor: the margin's multiple of the spread, as for ``robust``.

    Returns:
        One sentence, without a full stop; it also says so when ``robust`` is True.

    Raises:
        ValueError: as ``robust``: neither or both thresholds, or fewer than two values.
    """
    signed, spread, values = _margin_and_spread(values, above, below)
    accepted = signed > 0 and signed >= factor * spread
    if above is not None:
        word, side, other, threshold = "lowest", "above", "below", above
        nearest, wrong = float(values.min()), int(np.sum(values <= above))
    else:
        word, side, other, threshold = "highest", "below", "above", below
        nearest, wrong = float(values.max()), int(np.sum(values >= below))
    margin = abs(signed)
    start = f"the {word} of {values.size} seeds, {nearest:.3g}, is"
    rule = (f"{factor * spread:.3g} = {factor:g}x their spread {spread:.3g} "
            "(the lab's margin rule)")
    if wrong:
        verb = "is" if wrong == 1 else "are"
        return (f"{start} not {side} {threshold:g}: {wrong} of {values.size} seeds "
                f"{verb} at or {other} it")
    if not accepted:
        return f"{start} {side} {threshold:g}, but by {margin:.3g}, less than {rule}"
    return f"{start} {side} {threshold:g} by {margin:.3g}, at least {rule}: it holds"


def approx(value: float, digits: int = 2) -> str:
    """A training-derived number as the book prints it, e.g. ``"≈1.62"``.

    The mark tells the reader the last digit may differ on another machine, and tells
    the notebook tests to mask it (``tests/nbval_sanitize.cfg``); asserts carry the
    claims.
    """
    text = f"{float(value):.{_checks.positive_int('digits', digits)}f}"
    return "≈" + (text.lstrip("-") if float(text) == 0 else text)  # no "≈-0.00"


def mean_and_spread(values: Sequence[float]) -> tuple[float, float]:
    """Mean and half the range (max - min) / 2 of a few seeds' results."""
    values = np.asarray(values, dtype=np.float64)
    return float(values.mean()), float((values.max() - values.min()) / 2)
