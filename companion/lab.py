"""Entry points for the lab chapters: each trains small models and returns plain numbers.

Defaults are chosen to run in about a minute on a 2-core laptop CPU; every function takes
the knobs a learner may want to turn. Losses are in nats per predicted token.
"""

from __future__ import annotations

import copy
from typing import Sequence

import numpy as np

from companion import _checks
from companion.data import MarkovChain
from companion.model import ABSOLUTE, SCHEMES, ModelConfig, TinyDecoder
from companion.train import TrainConfig, evaluate, floor_by_length, loss_by_position, train

SOURCE = {"vocab_size": 8, "order": 2, "seed": 0}


def default_source() -> MarkovChain:
    """The lab's data: an order-2 Markov chain over 8 tokens (seed 0)."""
    return MarkovChain(**SOURCE)


def _eval_lens(train_len: int, eval_lens: Sequence[int] | None) -> list[int]:
    lens = [train_len * m for m in (1, 2, 4, 8)] if eval_lens is None else list(eval_lens)
    return [_checks.positive_int("eval length", L) for L in lens]


def length_extrapolation(
    schemes: Sequence[str] = SCHEMES,
    train_len: int = 32,
    eval_lens: Sequence[int] | None = None,
    seed: int = 0,
    *,
    steps: int = 400,
    num_tokens: int = 8192,
    source: MarkovChain | None = None,
) -> dict:
    """Train one model per scheme at ``train_len``; evaluate at each length (default L, 2L, 4L, 8L).

    Returns:
        ``{"floor": entropy rate, "floor_by_length": {L: floor}, "loss": {scheme: {L: loss}},
        "by_position": {scheme: (max(eval_lens) - 1,) loss at each position}}``.
    """
    source = default_source() if source is None else source
    lens = _eval_lens(_checks.positive_int("train_len", train_len), eval_lens)
    for scheme in schemes:
        _checks.choice("scheme", scheme, SCHEMES)
    result = {"floor": source.entropy_rate(), "floor_by_length": floor_by_length(source, lens), "loss": {}, "by_position": {}}
    for scheme in schemes:
        config = ModelConfig(vocab_size=source.vocab_size, position=scheme, max_len=max(lens))
        model, _ = train(config, TrainConfig(steps=steps, seq_len=train_len, seed=seed), source)
        result["loss"][scheme] = evaluate(model, source, lens, num_tokens=num_tokens)
        result["by_position"][scheme] = loss_by_position(model, source, max(lens))
    return result


# (position, combine, scale_embedding): both combinations for both tables with the paper's
# sqrt(d) scale, and the additive ones without it.
ADD_VS_CONCAT = (
    ("sinusoidal", "add", True), ("sinusoidal", "concat", True), ("sinusoidal", "add", False),
    ("learned", "add", True), ("learned", "concat", True), ("learned", "add", False),
)


def add_vs_concat(
    configs: Sequence[tuple[str, str, bool]] = ADD_VS_CONCAT,
    seeds: Sequence[int] = (0, 1, 2),
    *,
    train_len: int = 32,
    steps: int = 400,
    position_dim: int = 16,
    num_tokens: int = 8192,
    source: MarkovChain | None = None,
) -> list[dict]:
    """In-length loss of absolute positions added to or concatenated with the tokens.

    ``concat`` keeps the model width: tokens get ``dim - position_dim`` features, positions
    ``position_dim``, so every layer after the embedding is the same size. Returns one row
    per configuration and seed: ``{"position", "combine", "scale", "seed", "loss", "parameters"}``.
    """
    source = default_source() if source is None else source
    rows = []
    for position, combine, scale in configs:
        config = ModelConfig(vocab_size=source.vocab_size, position=position, combine=combine,
                             position_dim=position_dim, scale_embedding=scale, max_len=train_len)
        for seed in seeds:
            model, _ = train(config, TrainConfig(steps=steps, seq_len=train_len, seed=seed), source)
            loss = evaluate(model, source, [train_len], num_tokens=num_tokens)[train_len]
            rows.append({"position": position, "combine": combine, "scale": scale, "seed": seed,
                         "loss": loss, "parameters": model.num_parameters()})
    return rows


def approx_flops_per_token(config: ModelConfig, seq_len: int) -> int:
    """Forward FLOPs per token: 2 per weight of every matrix product, plus attention scores.

    Counts the layers' and the output head's weight matrices (``2 * weights``) and the
    ``q k^T`` and weighted-sum products (``2 * 2 * seq_len * dim`` per layer, at full length);
    embedding lookups, norms and softmax are left out (they are small).
    """
    seq_len = _checks.positive_int("seq_len", seq_len)
    d, layers = config.dim, config.num_layers
    per_layer = 4 * d * d + 2 * config.mlp_ratio * d * d  # qkv + out, mlp in + out
    matmul_weights = layers * per_layer + d * config.vocab_size
    return 2 * matmul_weights + layers * 4 * seq_len * d


def rope_scalings(factor: float, train_len: int) -> dict[str, dict | None]:
    """The four ways the lab runs a RoPE model at ``factor`` times its training length."""
    return {
        "none": None,
        "linear": {"type": "linear", "factor": factor},
        "ntk": {"type": "ntk", "factor": factor},
        "yarn": {"type": "yarn", "factor": factor, "original_max_len": train_len},
    }


def with_rope_scaling(model: TinyDecoder, scaling: dict | None, *, attention_scale: float = 1.0) -> TinyDecoder:
    """A copy of a trained RoPE ``model`` that runs with ``scaling``; the original is untouched."""
    if not isinstance(model, TinyDecoder):
        raise TypeError(f"model must be a TinyDecoder, got {type(model).__name__}")
    stretched = copy.deepcopy(model)
    stretched.set_rope_scaling(scaling, attention_scale=attention_scale)
    return stretched


def rope_extension(
    train_len: int = 32,
    factors: Sequence[int] = (2, 4, 8),
    seed: int = 0,
    *,
    steps: int = 400,
    finetune_factor: int = 4,
    finetune_steps: int = 40,
    num_tokens: int = 8192,
    source: MarkovChain | None = None,
) -> dict:
    """Stretch a RoPE model trained at ``train_len`` to ``factor * train_len``.

    Zero-shot for every factor and method; then, at ``finetune_factor`` only, each method
    is fine-tuned for ``finetune_steps`` steps at the longer length (a fresh copy each).
    YaRN also gets its attention temperature.

    Returns:
        ``{"trained": loss at train_len, "floor_by_length": {...},
        "zero_shot": {method: {factor: loss at factor * train_len}},
        "finetuned": {method: loss at finetune_factor * train_len}}``.
    """
    from companion.rope import yarn_attention_scale

    source = default_source() if source is None else source
    train_len = _checks.positive_int("train_len", train_len)
    factors = [_checks.positive_int("factor", f) for f in factors]
    lens = [train_len] + [f * train_len for f in factors]
    config = ModelConfig(vocab_size=source.vocab_size, position="rope")
    base_model, _ = train(config, TrainConfig(steps=steps, seq_len=train_len, seed=seed), source)

    def stretched(method: str, factor: int) -> TinyDecoder:
        scale = yarn_attention_scale(factor) if method == "yarn" else 1.0
        return with_rope_scaling(base_model, rope_scalings(factor, train_len)[method], attention_scale=scale)

    result = {
        "trained": evaluate(base_model, source, [train_len], num_tokens=num_tokens)[train_len],
        "floor_by_length": floor_by_length(source, lens),
        "zero_shot": {},
        "finetuned": {},
    }
    for method in rope_scalings(2, train_len):
        result["zero_shot"][method] = {
            f: evaluate(stretched(method, f), source, [f * train_len], num_tokens=num_tokens)[f * train_len] for f in factors
        }
        long_len = finetune_factor * train_len
        tuned, _ = train(config, TrainConfig(steps=finetune_steps, seq_len=long_len, seed=seed + 100, warmup=1, lr=1e-3),
                         source, model=stretched(method, finetune_factor))
        result["finetuned"][method] = evaluate(tuned, source, [long_len], num_tokens=num_tokens)[long_len]
    return result


def mean_and_spread(values: Sequence[float]) -> tuple[float, float]:
    """Mean and half the range (max - min) / 2 of a few seeds' results."""
    values = np.asarray(values, dtype=np.float64)
    return float(values.mean()), float((values.max() - values.min()) / 2)
