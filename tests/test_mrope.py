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
        mrope_position_ids(segments, spatial_merge_size=2),
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
