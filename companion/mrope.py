"""Multimodal RoPE, M-RoPE (Qwen2-VL, Wang et al. 2024): three position axes per token.

Every token carries three positions ``(t, h, w)``: time, row and column. A text token
has the same number on all three, so on text alone M-RoPE is RoPE. An image of
``H x W`` patches (the vision encoder merges ``m x m`` of them into one token) gets,
from the next free position ``p``: ``t = p`` for all its tokens, ``h = p + row`` and
``w = p + column``. The text after it continues one past the largest position so far,
``p + max(H, W) / m`` for an image, as Qwen's released code computes it. For a video
whose time positions pass that, ``transformers`` 5.3 to 5.24 still continues at
``p + max(H, W) / m``, earlier in time than the last frames: ``text_after="grid"``.

The rotary pairs are split among the axes by ``mrope_section = (a_t, a_h, a_w)``, which
sums to ``d/2``: pair ``i`` turns with the position of its axis.

* Qwen2-VL and Qwen2.5-VL use contiguous sections: pairs ``0 .. a_t - 1`` follow ``t``,
  the next ``a_h`` follow ``h``, the last ``a_w`` follow ``w`` (``interleaved=False``).
* Qwen3-VL interleaves them: pair ``i`` follows ``h`` if ``i % 3 == 1`` and
  ``i < 3 a_h``, ``w`` if ``i % 3 == 2`` and ``i < 3 a_w``, ``t`` otherwise
  (``interleaved=True``), so every axis gets fast and slow pairs.

All three models use the halves layout (``rotate_half``).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from companion import _checks
from companion.rope import rope_frequencies


def _segment(item: Any, index: int) -> int | tuple[int, int, int]:
    if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
        return _checks.positive_int(f"segments[{index}] (a text length)", item)
    if isinstance(item, (tuple, list)) and len(item) == 3:
        return tuple(
            _checks.positive_int(f"segments[{index}][{j}] ({axis})", n)
            for j, (axis, n) in enumerate(zip(("frames", "rows", "columns"), item))
        )
    raise TypeError(
        f"segments[{index}] must be a text length (int) or an image grid "
        f"(frames, rows, columns) of patches, got {item!r}"
    )


def mrope_position_ids(
    segments: Sequence[int | tuple[int, int, int]],
    *,
    spatial_merge_size: int = 1,
    time_interval: float = 1,
    text_after: str = "max",
) -> torch.Tensor:
    """Positions ``(t, h, w)`` of a sequence of text runs and image grids.

    Args:
        segments: in order, an ``int`` for a run of that many text tokens, or a
            ``(frames, rows, columns)`` grid of patches for an image (frames = 1) or a
            video.
        spatial_merge_size: ``m``, the vision encoder merges ``m x m`` patches into one
            token (2 in Qwen2-VL); rows and columns must be multiples of it.
        time_interval: the step between frames on the time axis: 1 in Qwen2-VL;
            Qwen2.5-VL's ``tokens_per_second * second_per_grid_t`` (frame ``f`` gets
            ``floor(f * time_interval)``, in float32 as ``transformers`` computes it).
        text_after: where what follows a grid starts. ``"max"``: one past the largest
            position so far, time included, as Qwen's released code computes it (and
            ``transformers`` up to 5.2, and vLLM); ``"grid"``: the grid's start plus
            ``max(rows, columns) / m``, as ``transformers`` 5.3 to 5.24 computes it, so
            that the text after a long video sits earlier in time than its last frames.
            The two agree for images and for videos whose time positions stay below
            ``max(rows, columns) / m``.

    Returns:
        int64 ``(3, s)``: rows ``t``, ``h``, ``w``; ``s`` counts text tokens plus
        ``frames * rows * columns / m**2`` tokens per grid.
    """
    m = _checks.positive_int("spatial_merge_size", spatial_merge_size)
    text_after = _checks.choice("text_after", text_after, ("max", "grid"))
    step = _checks.real("time_interval", time_interval)
    if not step > 0:
        raise ValueError(f"time_interval must be positive, got {time_interval!r}")
    if isinstance(segments, (str, bytes)) or not isinstance(segments, Sequence):
        raise TypeError(
            f"segments must be a list of ints and (t, h, w) grids, got {segments!r}"
        )
    if len(segments) == 0:
        raise ValueError("segments is empty: give at least one text run or image grid")
    pieces, start = [], 0
    for index, item in enumerate(segments):
        item = _segment(item, index)
        if isinstance(item, int):
            pieces.append(torch.arange(start, start + item).expand(3, -1))
            start += item
            continue
        frames, rows, cols = item
        if rows % m or cols % m:
            raise ValueError(
                f"segments[{index}] has {rows} x {cols} patches, not multiples of "
                f"spatial_merge_size={m}"
            )
        t, h, w = torch.meshgrid(
            # floor(frame * interval), in float32 as transformers computes it
            (torch.arange(frames) * step).long(),
            torch.arange(rows // m),
            torch.arange(cols // m),
            indexing="ij",
        )
        pieces.append(torch.stack([t, h, w]).reshape(3, -1) + start)
        if text_after == "max":
            start = int(pieces[-1].max()) + 1
        else:
            start += max(rows, cols) // m
    return torch.cat(pieces, dim=1)


def mrope_pair_axes(
    dim: int, sections: Sequence[int], *, interleaved: bool = False
) -> np.ndarray:
    """Which axis (0 = t, 1 = h, 2 = w) each of the ``d/2`` rotary pairs follows.

    Args:
        dim: features per head ``d`` (even).
        sections: ``(a_t, a_h, a_w)``, pairs per axis, summing to ``d/2``.
        interleaved: Qwen3-VL's round-robin assignment instead of contiguous sections.

    Returns:
        int ``(d/2,)``.
    """
    dim = _checks.even_int("dim", dim)
    if not isinstance(sections, Sequence) or len(sections) != 3:
        raise ValueError(
            f"sections must be three pair counts (t, h, w), got {sections!r}"
        )
    a = [_checks.positive_int(f"sections[{j}]", n) for j, n in enumerate(sections)]
    if sum(a) != dim // 2:
        raise ValueError(
            f"sections {tuple(a)} sum to {sum(a)}, but a {dim}-feature head has "
            f"{dim // 2} pairs"
        )
    if not isinstance(interleaved, bool):
        raise TypeError(f"interleaved must be True or False, got {interleaved!r}")
    if not interleaved:
        return np.repeat(np.arange(3), a)
    axes = np.zeros(dim // 2, dtype=np.int64)
    i = np.arange(dim // 2)
    axes[(i % 3 == 1) & (i < 3 * a[1])] = 1
    axes[(i % 3 == 2) & (i < 3 * a[2])] = 2
    return axes


def apply_mrope(
    x: torch.Tensor,
    position_ids: torch.Tensor,
    *,
    sections: Sequence[int],
    base: float = 10000.0,
    interleaved: bool = False,
) -> torch.Tensor:
    """Rotate the pairs of ``x`` (halves layout) by the positions of their axes.

    Args:
        x: ``(..., s, d)`` queries or keys.
        position_ids: integer ``(3, s)`` from :func:`mrope_position_ids`.
        sections, interleaved: as in :func:`mrope_pair_axes`.
        base: the RoPE base (``rope_theta``; 10^6 in Qwen2-VL).

    Returns:
        Tensor of the same shape and dtype as ``x``.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.ndim < 2:
        raise TypeError(
            "x must be a floating-point torch.Tensor of shape (..., seq, dim)"
        )
    dim = x.shape[-1]
    axes = torch.from_numpy(mrope_pair_axes(dim, sections, interleaved=interleaved))
    if (
        not isinstance(position_ids, torch.Tensor)
        or position_ids.is_floating_point()
        or position_ids.shape != (3, x.shape[-2])
    ):
        raise ValueError(
            f"position_ids must be integer (3, seq) = (3, {x.shape[-2]}), from "
            f"mrope_position_ids; got {getattr(position_ids, 'shape', position_ids)}"
        )
    theta = torch.from_numpy(rope_frequencies(dim, base=base))
    angles = (
        position_ids.to(torch.float64)[axes].T * theta
    )  # (s, d/2), pair i reads axis[i]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
