"""Speed of the lab's training, as `make bench` reports it (not a test: timings vary).

    python tests/speed.py step      # TinyDecoder's training step against a plain decoder
    python tests/speed.py workers   # the lab's entry points on 1 and on 2 worker processes

The plain decoder is what a PyTorch user would write for the same shape: fused qkv,
``torch.nn.functional.scaled_dot_product_attention`` with ``is_causal=True``, a learned
position table, pre-norm blocks. Both are timed on one thread, on the same batches, with
alternating so that a busy machine slows both alike. Each side runs its own whole training
step: the companion's (``companion.train.training_step`` with its fused AdamW) against the
plain loop (``torch.optim.AdamW`` with its defaults).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from companion import lab
from companion.model import ModelConfig, TinyDecoder
from companion.train import make_optimizer, one_thread, training_step

SHAPE = {"dim": 64, "num_layers": 2, "num_heads": 4, "seq_len": 32, "batch_size": 32}


class PlainBlock(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, d // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.norm2(x))


class PlainDecoder(nn.Module):
    def __init__(self, vocab: int, dim: int, layers: int, heads: int, max_len: int):
        super().__init__()
        self.token, self.position = nn.Embedding(vocab, dim), nn.Embedding(max_len, dim)
        self.blocks = nn.ModuleList(PlainBlock(dim, heads) for _ in range(layers))
        self.norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.token(tokens) + self.position.weight[: tokens.shape[1]]
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def plain_step(model, optimizer, tokens):
    """The training step a PyTorch user writes: cross-entropy, backward, AdamW."""
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def _seconds_per_step(model, batches, steps, ours):
    if ours:  # exactly what companion.train.train runs
        optimizer, step_fn = make_optimizer(model, 1e-3), training_step
    else:
        optimizer, step_fn = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0), plain_step
    start = time.perf_counter()
    for step in range(steps):
        step_fn(model, optimizer, batches[step % len(batches)])
    return (time.perf_counter() - start) / steps


def step_ratio(position: str = "learned", rounds: int = 5, steps: int = 100) -> dict:
    """Training steps per second of TinyDecoder divided by the plain decoder's (>1: faster)."""
    torch.manual_seed(0)
    s, b, d = SHAPE["seq_len"], SHAPE["batch_size"], SHAPE["dim"]
    batches = torch.randint(0, 8, (8, b, s + 1))
    ours = TinyDecoder(ModelConfig(vocab_size=8, dim=d, num_layers=SHAPE["num_layers"],
                                   num_heads=SHAPE["num_heads"], position=position, max_len=s))
    plain = PlainDecoder(8, d, SHAPE["num_layers"], SHAPE["num_heads"], s + 1)
    times = {"ours": [], "plain": []}
    with one_thread():
        for model in (ours, plain):
            _seconds_per_step(model, batches, 20, model is ours)  # warm up
        for _ in range(rounds):
            times["ours"].append(_seconds_per_step(ours, batches, steps, True))
            times["plain"].append(_seconds_per_step(plain, batches, steps, False))
    ours_ms, plain_ms = 1e3 * min(times["ours"]), 1e3 * min(times["plain"])
    return {"position": position, "ours_ms": ours_ms, "plain_ms": plain_ms, "ratio": plain_ms / ours_ms}


def worker_speedup(seeds=(0, 1, 2), steps: int = 400) -> dict:
    """Wall-clock seconds of one lab experiment on 1 and on 2 workers, and their ratio."""
    times = {}
    results = {}
    for workers in (1, 2):
        start = time.perf_counter()
        results[workers] = lab.length_extrapolation(
            schemes=("learned", "rope", "alibi", "t5"), seeds=seeds, steps=steps, workers=workers
        )
        times[workers] = time.perf_counter() - start
    same = all(np.array_equal(results[1][key][s], results[2][key][s])
               for key in ("loss", "history", "excess_by_position") for s in results[1]["loss"])
    return {"one": times[1], "two": times[2], "speedup": times[1] / times[2], "identical": same}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["step", "workers"])
    args = parser.parse_args()
    if args.what == "step":
        for position in ("learned", "none", "rope", "alibi", "t5"):
            r = step_ratio(position)
            print(f"{r['position']:>8}: TinyDecoder {r['ours_ms']:.2f} ms/step, "
                  f"plain decoder {r['plain_ms']:.2f} ms/step, ratio {r['ratio']:.2f}x")
    else:
        r = worker_speedup()
        print(f"1 worker {r['one']:.1f} s, 2 workers {r['two']:.1f} s: {r['speedup']:.2f}x, "
              f"identical results: {r['identical']}")


if __name__ == "__main__":
    main()
