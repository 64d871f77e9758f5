"""Tests of companion.embedding."""

import math

import pytest
import torch

from companion.embedding import TokenEmbedding
from companion.sinusoidal import SinusoidalPositionalEncoding, sinusoidal_table


def test_eval_output_is_scaled_tokens_plus_positions():
    torch.manual_seed(0)
    emb = TokenEmbedding(11, 8, SinusoidalPositionalEncoding(16, 8)).eval()
    tokens = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]])
    table = torch.from_numpy(sinusoidal_table(5, 8)).float()
    expected = emb.token.weight.detach()[tokens] * math.sqrt(8) + table
    torch.testing.assert_close(emb(tokens), expected)


def test_no_scale_and_no_position():
    emb = TokenEmbedding(5, 4, scale=False).eval()
    tokens = torch.tensor([[0, 4]])
    torch.testing.assert_close(emb(tokens), emb.token.weight.detach()[tokens])


def test_default_init_gives_unit_std_after_scaling():
    torch.manual_seed(0)
    emb = TokenEmbedding(4000, 256, dropout=0.0)
    scaled = emb.token.weight.detach() * math.sqrt(256)
    assert scaled.std().item() == pytest.approx(1.0, rel=0.02)
    torch.manual_seed(0)
    pytorch_default = TokenEmbedding(4000, 256, init_std=1.0).token.weight.detach()
    assert pytorch_default.std().item() == pytest.approx(1.0, rel=0.02)


def test_dropout_is_applied_once_to_the_sum():
    torch.manual_seed(0)
    p = 0.5
    emb = TokenEmbedding(7, 16, SinusoidalPositionalEncoding(8, 16), dropout=p)
    tokens = torch.randint(0, 7, (4, 8))
    clean = emb.eval()(tokens)
    noisy = emb.train()(tokens)
    kept = noisy != 0
    # Every element is either dropped whole or the whole sum rescaled by 1/(1-p).
    torch.testing.assert_close(noisy[kept], clean[kept] / (1 - p))
    assert 0.3 < kept.float().mean().item() < 0.7


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda: TokenEmbedding(0, 8), ValueError, "vocab_size must be a positive"),
        (lambda: TokenEmbedding(5, 8, dropout=1.0), ValueError, r"dropout must be in \[0, 1\)"),
        (lambda: TokenEmbedding(5, 8, position="sinusoidal"), TypeError, "position must be an nn.Module"),
        (lambda: TokenEmbedding(5, 8, scale=1), TypeError, "scale must be True or False"),
        (lambda: TokenEmbedding(5, 8, init_std=-0.1), ValueError, "init_std must be non-negative"),
    ],
)
def test_bad_constructor_arguments(make, error, words):
    with pytest.raises(error, match=words):
        make()


@pytest.mark.parametrize(
    "tokens, error, words",
    [
        (torch.tensor([1, 2, 3]), ValueError, r"shape \(batch, seq\)"),
        (torch.tensor([[0.0, 1.0]]), TypeError, "integer ids"),
        (torch.tensor([[0, 5]]), ValueError, r"token ids must lie in \[0, 5\)"),
        (torch.tensor([[-1, 2]]), ValueError, "token ids must lie"),
        ([[0, 1]], TypeError, "torch.Tensor"),
    ],
)
def test_bad_tokens(tokens, error, words):
    with pytest.raises(error, match=words):
        TokenEmbedding(5, 4)(tokens)


def test_too_long_sequence_is_refused_through_the_embedding():
    emb = TokenEmbedding(5, 4, SinusoidalPositionalEncoding(3, 4))
    with pytest.raises(ValueError, match="max_len=3"):
        emb(torch.zeros(1, 4, dtype=torch.long))


def test_sinusoidal_module_rebuilds_its_table_after_to_empty():
    from companion.sinusoidal import SinusoidalPositionalEncoding, sinusoidal_table

    with torch.device("meta"):
        module = SinusoidalPositionalEncoding(16, 8)
    module = module.to_empty(device="cpu")
    module.reset_parameters()
    expected = torch.from_numpy(sinusoidal_table(16, 8))
    torch.testing.assert_close(module.table, expected, rtol=0, atol=0)


def test_a_meta_built_input_layer_materialises_like_fsdp_with_the_companion_init():
    from companion.embedding import TokenEmbedding
    from companion.sinusoidal import SinusoidalPositionalEncoding, sinusoidal_table

    with torch.device("meta"):
        layer = TokenEmbedding(1000, 64, SinusoidalPositionalEncoding(32, 64))
    assert layer.token.weight.is_meta and layer.position.table.is_meta
    layer = layer.to_empty(device="cpu")
    torch.manual_seed(0)
    for module in layer.modules():  # what FSDP does for modules holding meta tensors
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
    assert abs(layer.token.weight.std().item() - 64**-0.5) < 0.01
    expected = torch.from_numpy(sinusoidal_table(32, 64))
    torch.testing.assert_close(layer.position.table, expected, rtol=0, atol=0)
