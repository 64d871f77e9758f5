"""Tests of companion.learned."""

import pytest
import torch

from companion.learned import LearnedPositionalEmbedding


def test_adds_the_first_rows_of_a_trained_table():
    torch.manual_seed(0)
    pe = LearnedPositionalEmbedding(10, 4)
    assert pe.table.shape == (10, 4) and pe.table.requires_grad
    x = torch.randn(3, 7, 4)
    torch.testing.assert_close(pe(x), x + pe.table.detach()[:7].expand(3, 7, 4))
    pe(x).sum().backward()
    # Rows 0..6 were used (each by 3 sequences); rows 7..9 got no gradient.
    torch.testing.assert_close(pe.table.grad[:7], torch.full((7, 4), 3.0))
    torch.testing.assert_close(pe.table.grad[7:], torch.zeros(3, 4))


def test_init_std():
    torch.manual_seed(0)
    table = LearnedPositionalEmbedding(4000, 64).table.detach()
    assert table.std().item() == pytest.approx(0.02, rel=0.02)
    assert LearnedPositionalEmbedding(3, 2, init_std=0.0).table.abs().max() == 0


def test_cannot_run_past_its_length():
    with pytest.raises(ValueError, match=r"513 positions but the table has only max_len=512"):
        LearnedPositionalEmbedding(512, 8)(torch.zeros(1, 513, 8))


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda: LearnedPositionalEmbedding(0, 8), ValueError, "max_len must be a positive"),
        (lambda: LearnedPositionalEmbedding(8, -1), ValueError, "dim must be a positive"),
        (lambda: LearnedPositionalEmbedding(8, 2.5), TypeError, "dim must be an integer"),
        (lambda: LearnedPositionalEmbedding(8, 2, init_std=-1.0), ValueError, "init_std must be non-negative"),
    ],
)
def test_bad_arguments(make, error, words):
    with pytest.raises(error, match=words):
        make()
