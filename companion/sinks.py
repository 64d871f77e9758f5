"""Attention sinks: where attention goes when no token needs it.

Trained models put much of their attention on the first tokens, whatever they are
(Xiao et al. 2024, StreamingLLM). Two ways to live with that:

* **Keep the first tokens in a rolling cache** (StreamingLLM): a cache of the ``sinks``
  first tokens and the ``window`` latest ones, where RoPE positions count places in the
  cache, not in the text: :func:`streaming_cache`.
* **Give each head a learned sink logit** (gpt-oss): a column that takes part in the
  softmax and is then dropped, so a head's weights on real tokens may sum to less than
  1: :func:`sink_softmax`.
"""

from __future__ import annotations

from typing import Any

import torch

from companion import _checks


def sink_softmax(scores: torch.Tensor, sink_logits: torch.Tensor) -> torch.Tensor:
    """Softmax over the keys and one extra sink column per head, sink dropped.

    ``w[..., j] = exp(s_j) / (exp(b_h) + sum_k exp(s_k))``, as gpt-oss computes it
    (``transformers``' ``GptOssAttention``); masked keys carry ``-inf`` in ``scores``.

    Args:
        scores: ``(b, h, q, k)`` attention logits, mask already added.
        sink_logits: ``(h,)``, one learned logit ``b_h`` per head.

    Returns:
        ``(b, h, q, k)``; each row sums to ``1 - p_sink``, below 1.
    """
    scores = _checks.tensor(
        "scores", scores, ndim=4, shape="(batch, heads, queries, keys)"
    )
    if not isinstance(sink_logits, torch.Tensor) or sink_logits.shape != (
        scores.shape[1],
    ):
        raise ValueError(
            f"sink_logits must be a tensor of shape (heads,) = ({scores.shape[1]},), "
            f"got {getattr(sink_logits, 'shape', sink_logits)}"
        )
    sinks = (
        sink_logits.to(scores.dtype).reshape(1, -1, 1, 1).expand(*scores.shape[:3], 1)
    )
    logits = torch.cat([scores, sinks], dim=-1)
    return torch.softmax(logits, dim=-1)[..., :-1]


def streaming_cache(
    length: int, *, sinks: int = 4, window: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The tokens a StreamingLLM cache holds after ``length`` tokens; their positions.

    The cache keeps tokens ``0 .. sinks - 1`` and the latest ``window`` tokens; RoPE
    then rotates each kept key by its place in the cache, ``0 .. len(cache) - 1``, so
    the offsets the model sees never exceed ``sinks + window - 1``, however long the
    text.

    Args:
        length: tokens seen so far.
        sinks: first tokens kept (4 in the paper).
        window: latest tokens kept.

    Returns:
        ``(tokens, positions)``: int64 ``(c,)`` each, with
        ``c = min(length, sinks + window)``: the kept tokens' indices in the text, and
        the positions RoPE gives them.
    """
    length = _checks.positive_int("length", length)
    sinks = _checks.integer("sinks", sinks)
    if sinks < 0:
        raise ValueError(f"sinks must be 0 or more, got {sinks}")
    window = _checks.positive_int("window", window)
    if length <= sinks + window:
        tokens = torch.arange(length)
    else:
        tokens = torch.cat([torch.arange(sinks), torch.arange(length - window, length)])
    return tokens, torch.arange(len(tokens))
