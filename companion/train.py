"""Seeded, deterministic training and evaluation of
:class:`~companion.model.TinyDecoder`.

Training data are fresh samples of a source of :mod:`companion.data` (a
:class:`~companion.data.MarkovChain`, :class:`~companion.data.HiddenStateChain` or
:class:`~companion.data.RepeatedSegment`, whose best possible loss is known); evaluation
reports the mean loss (nats per predicted token) by evaluation length, on
non-overlapping chunks as in Press et al. (2022) or with a sliding window (their
Appendix B), and the loss at each position of a window, also as an excess over the
chain's own log-loss on the same tokens.

Everything runs on one CPU thread by default, so results do not depend on the number of
cores; pass ``device="cuda"`` to train and evaluate on a GPU (results then differ in the
last bits from the CPU's, as any two kinds of processor do).
"""

from __future__ import annotations

import contextlib
import math
import sys
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from companion import _checks
from companion.data import SOURCES, MarkovChain
from companion.model import ModelConfig, TinyDecoder


DECAYS = ("none", "cosine")


@dataclass
class TrainConfig:
    """How a model is trained: AdamW, a linear warm-up, then a constant or decaying
    rate.

    ``decay="none"`` keeps the rate at ``lr`` after the warm-up; ``decay="cosine"``
    lowers it along a half cosine from ``lr`` after the warm-up to
    ``final_lr_fraction * lr`` at the last step, the usual recipe for a model meant to
    be trained to convergence.
    """

    steps: int = 400
    batch_size: int = 32
    seq_len: int = 32
    lr: float = 4e-3
    warmup: int = 30
    seed: int = 0
    decay: str = "none"
    final_lr_fraction: float = 0.1

    def __post_init__(self):
        for name in ("steps", "batch_size", "seq_len"):
            _checks.positive_int(name, getattr(self, name))
        if self.seq_len < 2:
            raise ValueError(
                "seq_len must be at least 2 (one token predicts the next), got "
                f"{self.seq_len}"
            )
        _checks.integer("warmup", self.warmup)
        _checks.integer("seed", self.seed)
        if _checks.real("lr", self.lr) <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")
        _checks.choice("decay", self.decay, DECAYS)
        if not 0 <= _checks.real("final_lr_fraction", self.final_lr_fraction) <= 1:
            raise ValueError(
                f"final_lr_fraction must be in [0, 1], got {self.final_lr_fraction}"
            )

    def lr_factor(self, step: int) -> float:
        """The rate of step ``step`` (from 0) as a fraction of ``lr``."""
        warmup = max(self.warmup, 1)
        if step < warmup or self.decay == "none":
            return min(1.0, (step + 1) / warmup)
        # 1 at the last step
        progress = (step - warmup + 1) / max(self.steps - warmup, 1)
        cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
        return self.final_lr_fraction + (1 - self.final_lr_fraction) * cosine


def converged(values, *, tol: float = 0.005, fraction: float = 0.2) -> bool:
    """Whether a held-out loss curve has levelled off: the lab's convergence criterion.

    ``values`` are evaluations at evenly spaced checkpoints, in training order. The run
    has converged when the loss improved by less than ``tol`` nats over the last
    ``fraction`` of training: from the checkpoint where that part begins to the last
    one.
    """
    values = np.asarray(values, dtype=np.float64).ravel()
    if not 0 < _checks.real("fraction", fraction) < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    start = int(round(len(values) * (1 - fraction))) - 1
    if len(values) < 2 or start < 0 or start >= len(values) - 1:
        raise ValueError(
            f"values must hold enough checkpoints to span the last {fraction} of "
            f"training, got {len(values)}"
        )
    return bool(values[start] - values[-1] < _checks.real("tol", tol))


@contextlib.contextmanager
def one_thread():
    """Run torch on one thread inside the block, then restore the previous setting.

    Sums computed on different numbers of threads differ in their last bits, and
    training amplifies such differences; on one thread the results do not depend on how
    many cores the machine has or on ``OMP_NUM_THREADS``.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def next_token_loss(
    model: TinyDecoder, tokens: torch.Tensor, *, reduction: str = "mean"
) -> torch.Tensor:
    """Cross-entropy of predicting ``tokens[:, 1:]`` from the prefixes, in nats.

    ``reduction="none"`` returns ``(b, s - 1)``.
    """
    logits = model(tokens[:, :-1])  # (b, s-1, V)
    targets = tokens[:, 1:]
    loss = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction=reduction
    )
    return loss if reduction == "mean" else loss.view(targets.shape)


def training_step(
    model: TinyDecoder, optimizer: torch.optim.Optimizer, tokens: torch.Tensor
) -> float:
    """One step on a ``(b, s)`` batch: forward, backward, update. Returns the loss."""
    loss = next_token_loss(model, tokens)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss.item()


def make_optimizer(model: TinyDecoder, lr: float) -> torch.optim.Optimizer:
    """AdamW without weight decay, in its fused form (one kernel for all parameters)."""
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, fused=True)


def _device(device) -> torch.device:
    try:
        device = torch.device("cpu" if device is None else device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"device must be a torch device such as 'cpu' or 'cuda', got {device!r}"
        ) from exc
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(
            "device='cuda' was asked for, but this PyTorch sees no CUDA GPU; use "
            "device='cpu'"
        )
    return device


def _show_progress(progress: bool | None) -> bool:
    """``None`` means: only when stderr is a terminal (silent in notebooks and
    tests)."""
    return sys.stderr.isatty() if progress is None else bool(progress)


def train(
    model_config: ModelConfig,
    train_config: TrainConfig,
    source: MarkovChain,
    *,
    model: TinyDecoder | None = None,
    progress: bool | None = None,
    device=None,
    callback=None,
) -> tuple[TinyDecoder, list[float]]:
    """Train a new model (or continue training ``model``) and return it with its loss
    per step.

    The seed is set before the model is built, so the same configs give the same model,
    bit for bit, on the same machine and thread count. ``device`` (default: ``model``'s
    device, else the CPU) is where the model is built or moved and trained.
    ``callback(step, model)``, if given, is called after every step (``step`` counts
    from 1), for example to evaluate checkpoints; the model is back in training mode
    afterwards.
    """
    if not isinstance(source, SOURCES):
        names = ", ".join(cls.__name__ for cls in SOURCES)
        raise TypeError(
            f"source must be one of companion.data's {names}, got "
            f"{type(source).__name__}"
        )
    if source.vocab_size != model_config.vocab_size:
        raise ValueError(
            f"the source has {source.vocab_size} tokens but the model's vocab_size is "
            f"{model_config.vocab_size}"
        )
    if model is not None and not isinstance(model, TinyDecoder):
        raise TypeError(
            f"model must be a TinyDecoder or None, got {type(model).__name__}"
        )
    if device is None and model is not None:
        device = model.device
    with one_thread():
        return _train(
            model_config,
            train_config,
            source,
            model,
            progress,
            _device(device),
            callback,
        )


def batch_seed(seed: int, step: int) -> int:
    """The data seed of training batch ``step`` of a run seeded ``seed``."""
    return (seed + 1) * 1_000_003 + step


def _train(model_config, train_config, source, model, progress, device, callback):
    torch.manual_seed(train_config.seed)
    if model is None:
        model = TinyDecoder(model_config)
    model.to(device)
    optimizer = make_optimizer(model, train_config.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, train_config.lr_factor)
    steps = range(train_config.steps)
    if _show_progress(progress):
        from tqdm import tqdm

        steps = tqdm(steps, desc=f"training ({model_config.position})")
    history = []
    model.train()
    for step in steps:
        # Batch i is the same whatever the number of steps: with decay="none" a
        # 1600-step run passes through the 400-step run's exact state (the rate is
        # constant after warm-up).
        batch = source.sample(
            train_config.batch_size,
            train_config.seq_len,
            seed=batch_seed(train_config.seed, step),
        )
        history.append(
            training_step(model, optimizer, torch.from_numpy(batch).to(device))
        )
        schedule.step()
        if callback is not None:
            callback(step + 1, model)
            model.train()
    model.eval()
    return model, history


def _model_device(model) -> torch.device:
    if not isinstance(model, TinyDecoder):
        raise TypeError(f"model must be a TinyDecoder, got {type(model).__name__}")
    return model.device


@torch.no_grad()
def _losses(model: TinyDecoder, tokens: torch.Tensor, batch: int = 64) -> torch.Tensor:
    """Per-token losses ``(n, s - 1)`` of ``(n, s)`` windows, in eval mode, float64.

    The model is put back in the mode it was in (training or eval) afterwards.
    """
    was_training = model.training
    model.eval()
    device = model.device
    try:
        with one_thread():  # no graph (the decorator): the same numbers, less memory
            parts = [
                next_token_loss(model, part.to(device), reduction="none")
                for part in tokens.split(batch)
            ]
    finally:
        model.train(was_training)
    return torch.cat(parts).double().cpu()


def loss_by_position(
    model: TinyDecoder,
    source: MarkovChain,
    length: int,
    *,
    num_sequences: int = 256,
    seed: int = 10_000,
    excess: bool = False,
) -> np.ndarray:
    """Mean loss at each position of a window of ``length`` tokens.

    With ``excess=True``, the chain's own loss on the same tokens
    (:meth:`~companion.data.MarkovChain.log_loss`) is subtracted first: what remains is
    the model's excess over the best possible predictor, without the sampling noise of
    the windows (which tokens happened to be easy is the same for both).

    Returns:
        float64 ``(length - 1,)``: entry ``t - 1`` is the loss of predicting token
        ``t``.
    """
    _model_device(model)
    length = _checks.positive_int("length", length)
    if length < 2:
        raise ValueError(f"length must be at least 2, got {length}")
    sample = source.sample(
        _checks.positive_int("num_sequences", num_sequences), length, seed=seed
    )
    losses = _losses(model, torch.from_numpy(sample)).numpy()
    if excess:
        losses = losses - source.log_loss(sample)
    return losses.mean(axis=0)


def _chain(
    source: MarkovChain, windows: torch.Tensor, excess: bool
) -> torch.Tensor | float:
    return torch.from_numpy(source.log_loss(windows.numpy())) if excess else 0.0


def evaluate(
    model: TinyDecoder,
    source: MarkovChain,
    eval_lens,
    *,
    num_tokens: int = 16_384,
    seed: int = 10_000,
    stride: int | None = None,
    excess: bool = False,
    score_first: bool = True,
) -> dict[int, float]:
    """Mean loss per evaluation length, on chunks of one long sample (in eval mode).

    ``stride=None``: the stream of ``num_tokens`` tokens is cut into non-overlapping
    chunks of ``L``; each chunk is a separate input, so its first tokens have little
    context. ``stride=S`` (``1 <= S <= L``): windows of ``L`` tokens start every ``S``
    tokens and each scores only its last ``S`` predictions, which have at least
    ``L - S`` tokens of context (the first window scores all of its own, unless
    ``score_first=False``), as in Press et al.'s Appendix B.
    ``excess=True`` subtracts the chain's own loss on the same tokens (see
    :func:`loss_by_position`), so that 0 is the best possible and sampling noise
    cancels. A source that is no single long stream (``source.stream`` False: a
    :class:`~companion.data.RepeatedSegment`) gives each chunk a sequence of its own.

    Returns:
        ``{L: mean loss in nats per predicted token}``.
    """
    _model_device(model)
    num_tokens = _checks.positive_int("num_tokens", num_tokens)
    one_stream = getattr(source, "stream", True)
    if not one_stream and stride is not None:
        raise ValueError(
            f"a {type(source).__name__} has no long stream to slide a window over; use "
            "stride=None"
        )
    stream = (
        torch.from_numpy(source.sample(1, num_tokens, seed=seed)[0])
        if one_stream
        else None
    )
    result = {}
    for length in eval_lens:
        length = _checks.positive_int("eval length", length)
        if length < 2 or length > num_tokens:
            raise ValueError(
                f"eval length must be in [2, num_tokens={num_tokens}], got {length}"
            )
        if stride is None:
            if one_stream:
                chunks = stream[: (num_tokens // length) * length].reshape(-1, length)
            else:  # each chunk is a sequence of its own, from the source's start
                chunks = torch.from_numpy(
                    source.sample(num_tokens // length, length, seed=seed)
                )
            losses = _losses(model, chunks)
            result[length] = (losses - _chain(source, chunks, excess)).mean().item()
            continue
        step = _checks.positive_int("stride", stride)
        if step > length:
            raise ValueError(
                f"stride must be at most the evaluation length {length}, got {step}"
            )
        windows = stream.unfold(0, length, step)  # (n, L): window i starts at i * S
        losses = _losses(model, windows) - _chain(source, windows, excess)
        scored = losses[1:, -step:].reshape(-1)
        if score_first:
            scored = torch.cat([losses[0], scored])
        result[length] = scored.mean().item()
    return result


def floor_by_length(source: MarkovChain, eval_lens) -> dict[int, float]:
    """The best achievable value of :func:`evaluate` for each length (non-overlapping
    chunks)."""
    return {
        L: float(
            source.optimal_loss_by_position(
                _checks.positive_int("eval length", L)
            ).mean()
        )
        for L in eval_lens
    }
