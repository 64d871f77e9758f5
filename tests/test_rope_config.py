"""companion.rope_config against transformers' ROPE_INIT_FUNCTIONS, over a grid."""

import itertools
import logging

import numpy as np
import pytest
import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from companion.rope import rope_frequencies
from companion.rope_config import ROPE_TYPES, from_rope_parameters

logging.getLogger("transformers").setLevel(logging.ERROR)


def library(params, head_dim, max_len, seq_len=None):
    config = LlamaConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        head_dim=head_dim,
        num_hidden_layers=1,
        vocab_size=8,
        intermediate_size=8,
        max_position_embeddings=max_len,
        rope_parameters=dict(params),
    )
    inv_freq, factor = ROPE_INIT_FUNCTIONS[params["rope_type"]](config, seq_len=seq_len)
    return inv_freq.double().numpy(), float(factor)


def check(params, head_dim=64, max_len=8192, seq_len=None):
    theirs, their_factor = library(params, head_dim, max_len, seq_len)
    ours, our_factor = from_rope_parameters(
        params, head_dim, max_position_embeddings=max_len, seq_len=seq_len
    )
    np.testing.assert_allclose(ours, theirs, rtol=2e-6, atol=0)
    assert our_factor == pytest.approx(their_factor, rel=1e-12)


HEADS = [16, 64, 128]
BASES = [1e4, 5e5, 1e6]
PARTIAL = [1.0, 0.5, 0.25]


@pytest.mark.parametrize(
    "head_dim, base, p", list(itertools.product(HEADS, BASES, PARTIAL))
)
@pytest.mark.parametrize("factor", [1.0, 4.0, 32.0])
def test_linear(head_dim, base, p, factor):
    check(
        {
            "rope_type": "linear",
            "rope_theta": base,
            "factor": factor,
            "partial_rotary_factor": p,
        },
        head_dim,
    )


@pytest.mark.parametrize(
    "head_dim, base, p", list(itertools.product(HEADS, BASES, PARTIAL))
)
@pytest.mark.parametrize("seq_len", [None, 100, 8192, 8193, 40000])
def test_dynamic(head_dim, base, p, seq_len):
    check(
        {
            "rope_type": "dynamic",
            "rope_theta": base,
            "factor": 4.0,
            "partial_rotary_factor": p,
        },
        head_dim,
        seq_len=seq_len,
    )


YARN = [
    {"factor": 4.0, "original_max_position_embeddings": 2048},
    {
        "factor": 8.0,
        "original_max_position_embeddings": 4096,
        "beta_fast": 16,
        "beta_slow": 2,
    },
    {"factor": 16.0, "original_max_position_embeddings": 4096, "truncate": False},
    {
        "factor": 40.0,
        "original_max_position_embeddings": 4096,
        "mscale": 1.0,
        "mscale_all_dim": 1.0,
    },
    {
        "factor": 40.0,
        "original_max_position_embeddings": 4096,
        "mscale": 0.707,
        "mscale_all_dim": 0.707,
    },
    {
        "factor": 40.0,
        "original_max_position_embeddings": 4096,
        "mscale": 1.0,
        "mscale_all_dim": 0.0,
    },
    {"factor": 4.0, "original_max_position_embeddings": 4096, "mscale": 1.0},
    {
        "factor": 32.0,
        "original_max_position_embeddings": 4096,
        "attention_factor": 1.25,
    },
    {"factor": 1.0, "original_max_position_embeddings": 4096},
]


@pytest.mark.parametrize(
    "head_dim, base, p", list(itertools.product(HEADS, BASES, PARTIAL))
)
@pytest.mark.parametrize(
    "extra", YARN, ids=lambda e: "-".join(f"{k[:6]}{v}" for k, v in e.items())
)
def test_yarn(head_dim, base, p, extra):
    check(
        {"rope_type": "yarn", "rope_theta": base, "partial_rotary_factor": p, **extra},
        head_dim,
        max_len=extra["original_max_position_embeddings"] * 8,
    )


def test_yarn_with_factor_none_reads_max_position_embeddings():
    params = {
        "rope_type": "yarn",
        "rope_theta": 1e4,
        "factor": None,
        "original_max_position_embeddings": 4096,
    }
    check(params, 64, max_len=4096 * 40)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        from_rope_parameters(params, 64)
    del params["factor"]  # transformers refuses a yarn dict without the key
    with pytest.raises(ValueError, match="needs the key"):
        from_rope_parameters(params, 64, max_position_embeddings=4096 * 40)


def test_longrope_without_factor_reads_max_position_embeddings():
    params = longrope_params(32, 0)
    check(params, 64, max_len=4096 * 32, seq_len=5000)


def longrope_params(pairs, seed, **extra):
    g = np.random.default_rng(seed)
    return {
        "rope_type": "longrope",
        "rope_theta": 1e4,
        "original_max_position_embeddings": 4096,
        "short_factor": (1 + g.random(pairs)).tolist(),
        "long_factor": (1 + 40 * g.random(pairs)).tolist(),
        **extra,
    }


@pytest.mark.parametrize("head_dim, p", list(itertools.product(HEADS, PARTIAL)))
@pytest.mark.parametrize("seq_len", [None, 4096, 4097, 131072])
@pytest.mark.parametrize(
    "extra", [{}, {"factor": 32.0}, {"attention_factor": 1.1}, {"factor": 1.0}]
)
def test_longrope(head_dim, p, seq_len, extra):
    params = longrope_params(
        int(head_dim * p) // 2, head_dim, partial_rotary_factor=p, **extra
    )
    check(params, head_dim, max_len=131072, seq_len=seq_len)


@pytest.mark.parametrize(
    "head_dim, base, p", list(itertools.product(HEADS, BASES, PARTIAL))
)
@pytest.mark.parametrize(
    "factor, low, high, original",
    [(8.0, 1.0, 4.0, 8192), (32.0, 2.0, 8.0, 4096), (16.0, 1.0, 4.0, 8192)],
)
def test_llama3(head_dim, base, p, factor, low, high, original):
    check(
        {
            "rope_type": "llama3",
            "rope_theta": base,
            "factor": factor,
            "low_freq_factor": low,
            "high_freq_factor": high,
            "original_max_position_embeddings": original,
            "partial_rotary_factor": p,
        },
        head_dim,
    )


@pytest.mark.parametrize(
    "head_dim, base, p", list(itertools.product([16, 64, 256], BASES, PARTIAL))
)
@pytest.mark.parametrize("factor", [1.0, 8.0])
def test_proportional(head_dim, base, p, factor):
    check(
        {
            "rope_type": "proportional",
            "rope_theta": base,
            "factor": factor,
            "partial_rotary_factor": p,
        },
        head_dim,
    )


@pytest.mark.parametrize(
    "head_dim, base, p", list(itertools.product(HEADS, BASES, PARTIAL))
)
def test_default_is_the_plain_speeds_of_gpt_neox(head_dim, base, p):
    # Llama's default ignores partial_rotary_factor; GPT-NeoX's reads it.
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding

    params = {"rope_type": "default", "rope_theta": base, "partial_rotary_factor": p}
    config = GPTNeoXConfig(
        hidden_size=2 * head_dim,
        num_attention_heads=2,
        num_hidden_layers=1,
        vocab_size=8,
        intermediate_size=8,
        rope_parameters=dict(params),
    )
    inv_freq, factor = GPTNeoXRotaryEmbedding.compute_default_rope_parameters(config)
    ours, our_factor = from_rope_parameters(params, head_dim)
    np.testing.assert_allclose(ours, inv_freq.double().numpy(), rtol=2e-6, atol=0)
    assert our_factor == factor == 1.0


def test_every_library_rope_type_is_covered():
    assert set(ROPE_INIT_FUNCTIONS) | {"default"} == set(ROPE_TYPES)


def test_rope_frequencies_takes_a_library_dict():
    params = {
        "rope_type": "llama3",
        "rope_theta": 5e5,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    ours = rope_frequencies(
        128,
        scaling={"type": "llama3", "factor": 8.0, "original_max_len": 8192},
        base=5e5,
    )
    np.testing.assert_allclose(rope_frequencies(128, scaling=params), ours, rtol=1e-12)
    np.testing.assert_allclose(library(params, 128, 131072)[0], ours, rtol=2e-6)
    with pytest.raises(ValueError, match="rope_theta"):
        rope_frequencies(128, base=1e4, scaling=params)


@pytest.mark.parametrize(
    "params, match",
    [
        ({"rope_type": "yarn", "factor": 4.0}, "original_max_position_embeddings"),
        (
            {
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 4096,
                "beta_fats": 32,
            },
            "misspelt",
        ),
        (
            {
                "rope_type": "linear",
                "factor": 4.0,
                "original_max_position_embeddings": 4096,
            },
            "does not read",
        ),
        ({"rope_type": "ntk", "factor": 4.0}, "rope_type"),
        ({"factor": 4.0}, "rope_type"),
        ({"rope_type": "linear"}, "factor"),
        ({"rope_type": "dynamic", "factor": 2.0}, "max_position_embeddings"),
        (
            {
                "rope_type": "llama3",
                "factor": 8.0,
                "original_max_position_embeddings": 8192,
            },
            "low_freq_factor",
        ),
        (
            {
                "rope_type": "longrope",
                "original_max_position_embeddings": 4096,
                "short_factor": [1.0] * 3,
                "long_factor": [1.0] * 32,
                "factor": 2.0,
            },
            "short_factor",
        ),
        (
            {"rope_type": "default", "partial_rotary_factor": 1.5},
            "partial_rotary_factor",
        ),
        ({"rope_type": "linear", "type": "yarn", "factor": 2.0}, "keep one"),
    ],
)
def test_bad_dicts_name_the_key(params, match):
    with pytest.raises(ValueError, match=match):
        from_rope_parameters(params, 64)


def test_apply_rope_refuses_a_library_dict():
    from companion.rope import RotaryEmbedding, apply_rope

    params = {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 64,
    }
    with pytest.raises(ValueError, match="from_rope_parameters"):
        apply_rope(torch.zeros(3, 8), scaling=params)
    with pytest.raises(ValueError, match="from_rope_parameters"):
        RotaryEmbedding(8, scaling=params)
    with pytest.raises(ValueError, match="short forms"):
        rope_frequencies(8, seq_len=10)


def test_keys_no_rope_type_reads_are_ignored_as_the_library_does():
    """Ministral 3's dict carries its query temperature and max_position_embeddings."""
    from transformers import Ministral3Config
    from transformers.models.ministral3.modeling_ministral3 import (
        Ministral3RotaryEmbedding,
    )

    config = Ministral3Config(
        hidden_size=64, num_attention_heads=2, head_dim=32, num_hidden_layers=1,
        num_key_value_heads=2, vocab_size=8, intermediate_size=8,
    )
    params = dict(config.rope_parameters)
    assert {"llama_4_scaling_beta", "max_position_embeddings"} <= set(params)
    rotary = Ministral3RotaryEmbedding(config)
    ours, factor = from_rope_parameters(
        params, 32, max_position_embeddings=config.max_position_embeddings
    )
    np.testing.assert_allclose(ours, rotary.inv_freq.double().numpy(), rtol=2e-6)
    assert factor == pytest.approx(rotary.attention_scaling, rel=1e-12)
    with pytest.raises(ValueError, match="does not read"):
        from_rope_parameters({**params, "llama4_scaling_beta": 0.1}, 32)
