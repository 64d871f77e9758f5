"""Seeded, deterministic training and evaluation of :class:`~companion.model.TinyDecoder`.

Training data are fresh samples of a :class:`~companion.data.MarkovChain`; evaluation reports
the mean loss (nats per predicted token) by evaluation length, on non-overlapping chunks
as in Press et al. (2022), and the loss at each position of a window.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

from companion import _checks
from companion.data import MarkovChain
from companion.model import ModelConfig, TinyDecoder


@dataclass
class TrainConfig:
    steps: int = 400
    batch_size: int = 32
    seq_len: int = 32
    lr: float = 4e-3
    warmup: int = 30
    seed: int = 0

    def __post_init__(self):
        for name in ("steps", "batch_size", "seq_len"):
            _checks.positive_int(name, getattr(self, name))
        if self.seq_len < 2:
            raise ValueError(f"seq_len must be at least 2 (one token predicts the next), got {self.seq_len}")
        _checks.integer("warmup", self.warmup)
        _checks.integer("seed", self.seed)
        if _checks.real("lr", self.lr) <= 0:
            raise ValueError(f"lr must be positive, got {self.lr}")


@contextlib.contextmanager
def one_thread():
    """Run torch on one thread inside the block, then restore the previous setting.

    Sums computed on different numbers of threads differ in their last bits, and training
    amplifies such differences; on one thread the results do not depend on how many cores
    the machine has or on ``OMP_NUM_THREADS``.
    """
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def next_token_loss(model: TinyDecoder, tokens: torch.Tensor, *, reduction: str = "mean") -> torch.Tensor:
    """Cross-entropy of predicting ``tokens[:, 1:]`` from the prefixes, in nats.

    ``reduction="none"`` returns ``(b, s - 1)``.
    """
    logits = model(tokens[:, :-1])  # (b, s-1, V)
    loss = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:], reduction="none")  # (b, s-1)
    return loss.mean() if reduction == "mean" else loss


def _show_progress(progress: bool | None) -> bool:
    """``None`` means: only when stderr is a terminal (silent in notebooks and tests)."""
    return sys.stderr.isatty() if progress is None else bool(progress)


def train(
    model_config: ModelConfig,
    train_config: TrainConfig,
    source: MarkovChain,
    *,
    model: TinyDecoder | None = None,
    progress: bool | None = None,
) -> tuple[TinyDecoder, list[float]]:
    """Train a new model (or continue training ``model``) and return it with its loss per step.

    The seed is set before the model is built, so the same configs give the same model,
    bit for bit, on the same machine and thread count.
    """
    if not isinstance(source, MarkovChain):
        raise TypeError(f"source must be a MarkovChain, got {type(source).__name__}")
    if source.vocab_size != model_config.vocab_size:
        raise ValueError(f"the source has {source.vocab_size} tokens but the model's vocab_size is {model_config.vocab_size}")
    with one_thread():
        return _train(model_config, train_config, source, model, progress)


def _train(model_config, train_config, source, model, progress):
    torch.manual_seed(train_config.seed)
    if model is None:
        model = TinyDecoder(model_config)
    data = source.sample(train_config.steps * train_config.batch_size, train_config.seq_len, seed=train_config.seed + 1)
    batches = torch.from_numpy(data).view(train_config.steps, train_config.batch_size, train_config.seq_len)
    optimizer = torch.optim.AdamW(model.parameters(), lr=train_config.lr, weight_decay=0.0)
    warmup = max(train_config.warmup, 1)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / warmup))
    steps = range(train_config.steps)
    if _show_progress(progress):
        from tqdm import tqdm

        steps = tqdm(steps, desc=f"training ({model_config.position})")
    history = []
    model.train()
    for step in steps:
        loss = next_token_loss(model, batches[step])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        history.append(loss.item())
    model.eval()
    return model, history


@torch.no_grad()
def loss_by_position(model: TinyDecoder, source: MarkovChain, length: int, *, num_sequences: int = 256, seed: int = 10_000) -> np.ndarray:
    """Mean loss at each position of a window of ``length`` tokens.

    Returns:
        float64 ``(length - 1,)``: entry ``t - 1`` is the loss of predicting token ``t``.
    """
    length = _checks.positive_int("length", length)
    if length < 2:
        raise ValueError(f"length must be at least 2, got {length}")
    tokens = torch.from_numpy(source.sample(_checks.positive_int("num_sequences", num_sequences), length, seed=seed))
    model.eval()
    with one_thread():
        return next_token_loss(model, tokens, reduction="none").double().mean(dim=0).numpy()


@torch.no_grad()
def evaluate(model: TinyDecoder, source: MarkovChain, eval_lens, *, num_tokens: int = 16_384, seed: int = 10_000) -> dict[int, float]:
    """Mean loss per evaluation length, on non-overlapping chunks of one long sample.

    For each length ``L`` the same stream of ``num_tokens`` tokens is cut into chunks of
    ``L``; each chunk is a separate input, so its first tokens have little context.

    Returns:
        ``{L: mean loss in nats per predicted token}``.
    """
    stream = source.sample(1, _checks.positive_int("num_tokens", num_tokens), seed=seed)[0]
    result = {}
    for length in eval_lens:
        length = _checks.positive_int("eval length", length)
        if length < 2 or length > num_tokens:
            raise ValueError(f"eval length must be in [2, num_tokens={num_tokens}], got {length}")
        chunks = torch.from_numpy(stream[: (num_tokens // length) * length].reshape(-1, length))
        with one_thread():
            losses = [next_token_loss(model, batch, reduction="none") for batch in chunks.split(64)]
        result[length] = torch.cat(losses).double().mean().item()
    return result


def floor_by_length(source: MarkovChain, eval_lens) -> dict[int, float]:
    """The best achievable value of :func:`evaluate` for each length (same chunking)."""
    return {L: float(source.optimal_loss_by_position(L).mean()) for L in eval_lens}
