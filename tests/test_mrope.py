"""companion.mrope against Qwen2-VL's and Qwen3-VL's code in transformers."""

import types

import numpy as np
import pytest
import torch
from transformers import Qwen2VLConfig
from transformers.models.qwen2_vl.modeling_qwen2_vl import (
    Qwen2VLModel,
    Qwen2VLRotaryEmbedding,
    apply_rotary_pos_emb,
)
from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig
from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextRotaryEmbedding

from companion.mrope import apply_mrope, mrope_pair_axes, mrope_position_ids

IMAGE, TEXT = 1, 0


def library_position_ids(segments, merge=2):
    """Qwen2VLModel.get_rope_index on a batch of one, for text runs and image grids."""
    types_, grids = [], []
    for item in segments:
        if isinstance(item, int):
            types_ += [TEXT] * item
        else:
            types_ += [IMAGE] * (item[0] * item[1] * item[2] // merge**2)
            grids.append(item)
    config = types.SimpleNamespace(
        vision_config=types.SimpleNamespace(spatial_merge_size=merge)
    )
    model = types.SimpleNamespace(config=config)
    model.get_vision_position_ids = lambda *a, **k: (
        Qwen2VLModel.get_vision_position_ids(model, *a, **k)
    )
    token_types = torch.tensor([types_])
    ids, _ = Qwen2VLModel.get_rope_index(
        model,
        torch.zeros_like(token_types),
        token_types,
        image_grid_thw=torch.tensor(grids),
    )
    return ids[:, 0]


@pytest.mark.parametrize(
    "segments",
    [
        [3, (1, 4, 6), 2],
        [1, (1, 2, 2), 4, (1, 6, 4), 1],
        [5, (1, 8, 8)],
        [(1, 4, 2), 3],
        [2, (3, 4, 4), 2],
    ],
)
def test_position_ids_match_qwen2_vl(segments):
    assert torch.equal(
        mrope_position_ids(segments, spatial_merge_size=2, text_after="grid"),
        library_position_ids(segments),
    )


def test_text_alone_is_rope():
    assert torch.equal(mrope_position_ids([7]), torch.arange(7).expand(3, -1))


def qwen2_vl_text_config(head_dim, sections, base=1e6):
    return Qwen2VLConfig(
        text_config=dict(
            hidden_size=2 * head_dim,
            num_attention_heads=2,
            num_key_value_heads=2,
            num_hidden_layers=1,
            vocab_size=8,
            intermediate_size=8,
            rope_parameters={
                "rope_type": "default",
                "rope_theta": base,
                "mrope_section": list(sections),
            },
        )
    ).text_config


@pytest.mark.parametrize(
    "head_dim, sections", [(16, (2, 3, 3)), (32, (4, 6, 6)), (128, (16, 24, 24))]
)
def test_rotation_matches_qwen2_vl(head_dim, sections):
    segments = [3, (1, 4, 6), 2]
    pos = mrope_position_ids(segments, spatial_merge_size=2)
    g = torch.Generator().manual_seed(head_dim)
    q = torch.randn(1, 2, pos.shape[1], head_dim, generator=g)
    rotary = Qwen2VLRotaryEmbedding(qwen2_vl_text_config(head_dim, sections))
    cos, sin = rotary(q, pos[:, None, :])
    theirs, _ = apply_rotary_pos_emb(q, q, cos, sin)
    ours = apply_mrope(q.double(), pos, sections=sections, base=1e6)
    torch.testing.assert_close(ours.float(), theirs, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "head_dim, sections", [(16, (4, 2, 2)), (64, (12, 10, 10)), (128, (24, 20, 20))]
)
def test_interleaved_rotation_matches_qwen3_vl(head_dim, sections):
    pos = mrope_position_ids([2, (1, 6, 4), 3], spatial_merge_size=2)
    g = torch.Generator().manual_seed(head_dim)
    q = torch.randn(1, 2, pos.shape[1], head_dim, generator=g)
    config = Qwen3VLTextConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        head_dim=head_dim,
        num_hidden_layers=1,
        vocab_size=8,
        intermediate_size=8,
        rope_parameters={
            "rope_type": "default",
            "rope_theta": 5e6,
            "mrope_section": list(sections),
            "mrope_interleaved": True,
        },
    )
    cos, sin = Qwen3VLTextRotaryEmbedding(config)(q, pos[:, None, :])
    theirs, _ = apply_rotary_pos_emb(q, q, cos, sin)
    ours = apply_mrope(q.double(), pos, sections=sections, base=5e6, interleaved=True)
    torch.testing.assert_close(ours.float(), theirs, rtol=1e-4, atol=1e-4)
    contiguous = apply_mrope(q.double(), pos, sections=sections, base=5e6)
    assert (contiguous.float() - theirs).abs().max() > 0.1


def test_pair_axes():
    assert mrope_pair_axes(16, (2, 3, 3)).tolist() == [0, 0, 1, 1, 1, 2, 2, 2]
    assert mrope_pair_axes(16, (4, 2, 2), interleaved=True).tolist() == [
        0,
        1,
        2,
        0,
        1,
        2,
        0,
        0,
    ]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: mrope_position_ids([3, (1, 3, 4)], spatial_merge_size=2), "multiples"),
        (lambda: mrope_position_ids([3, (4, 4)]), "segments\\[1\\]"),
        (lambda: mrope_position_ids([]), "empty"),
        (lambda: mrope_pair_axes(16, (2, 2, 2)), "sum to 6"),
        (
            lambda: apply_mrope(
                torch.zeros(5, 16), torch.zeros(5, dtype=torch.long), sections=(2, 3, 3)
            ),
            "position_ids",
        ),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


@pytest.mark.parametrize("per_second, seconds", [(2, 0.7), (25, 1.0), (3, 0.5)])
def test_a_video_with_a_fractional_interval_matches_qwen2_5_vl(per_second, seconds):
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel

    vision = types.SimpleNamespace(spatial_merge_size=2, tokens_per_second=per_second)
    model = types.SimpleNamespace(
        config=types.SimpleNamespace(
            vision_config=vision, image_token_id=1, video_token_id=2
        )
    )
    model.get_vision_position_ids = lambda *a, **k: (
        Qwen2_5_VLModel.get_vision_position_ids(model, *a, **k)
    )
    kinds = torch.tensor([[0] * 2 + [2] * 20 + [0] * 3])  # text, a 5 x 4 x 4 video, text
    theirs, _ = Qwen2_5_VLModel.get_rope_index(
        model,
        torch.zeros_like(kinds),
        kinds,
        video_grid_thw=torch.tensor([[5, 4, 4]]),
        second_per_grid_ts=torch.tensor([seconds]),
    )
    ours = mrope_position_ids(
        [2, (5, 4, 4), 3],
        spatial_merge_size=2,
        time_interval=per_second * seconds,
        text_after="grid",
    )
    assert torch.equal(ours, theirs[:, 0])


def test_a_bad_time_interval_is_refused():
    with pytest.raises(ValueError, match="time_interval must be positive"):
        mrope_position_ids([2, (2, 2, 2)], time_interval=0)
    with pytest.raises(TypeError, match="time_interval must be a real number"):
        mrope_position_ids([2, (2, 2, 2)], time_interval="1")


def qwen_released_position_ids(segments, merge=2, interval=1.0):
    """The rule of Qwen's released get_rope_index (transformers 4.x, up to 5.2): each
    text run starts one past the largest position before it, time included."""
    pieces = []
    for item in segments:
        start = int(pieces[-1].max()) + 1 if pieces else 0
        if isinstance(item, int):
            pieces.append(torch.arange(item).expand(3, -1) + start)
            continue
        t, h, w = item[0], item[1] // merge, item[2] // merge
        t_index = (torch.arange(t).view(-1, 1).expand(-1, h * w) * interval).long()
        h_index = torch.arange(h).view(1, -1, 1).expand(t, -1, w).flatten()
        w_index = torch.arange(w).view(1, 1, -1).expand(t, h, -1).flatten()
        pieces.append(torch.stack([t_index.flatten(), h_index, w_index]) + start)
    return torch.cat(pieces, dim=1)


@pytest.mark.parametrize(
    "segments, interval",
    [([2, (3, 4, 4), 2], 1.0), ([2, (5, 4, 4), 3], 1.4), ([1, (1, 4, 6), 2], 1.0),
     ([3, (1, 2, 2), (6, 2, 4), 2], 2.0)],
)
def test_text_after_max_is_the_released_rule_and_grid_differs_only_for_long_videos(
    segments, interval
):
    ours = mrope_position_ids(segments, spatial_merge_size=2, time_interval=interval)
    assert torch.equal(ours, qwen_released_position_ids(segments, 2, interval))
    grid = mrope_position_ids(
        segments, spatial_merge_size=2, time_interval=interval, text_after="grid"
    )
    videos = [g for g in segments if not isinstance(g, int) and g[0] > 1]
    long = any(int((g[0] - 1) * interval) >= max(g[1], g[2]) // 2 for g in videos)
    assert torch.equal(ours, grid) == (not long)
