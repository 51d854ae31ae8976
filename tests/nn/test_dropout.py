"""structseq's dropout: F.dropout's mathematics with the mask drawn by `rand >= p` (cheaper on CPU)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from structseq.nn.dropout import Dropout, dropout, keep_mask, torch_masks


def test_dropout_keeps_with_probability_one_minus_p_and_scales_the_kept():
    torch.manual_seed(0)
    x = torch.randn(400, 500)
    y = dropout(x, 0.3)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.7) < 0.005  # 200k draws: sd 0.001
    assert torch.equal(y[kept], x[kept] * (1 / 0.7))


def test_dropout_draws_the_mask_keep_mask_draws_and_its_gradient_is_the_same_mask():
    x = torch.randn(7, 9, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(3)
    keep = keep_mask(x.shape, 0.4)
    torch.manual_seed(3)
    y = dropout(x, 0.4)
    assert torch.equal(y, x * keep / 0.6)
    g = torch.randn_like(x)
    y.backward(g)
    assert torch.allclose(x.grad, g * keep / 0.6)
    torch.manual_seed(5)
    assert torch.autograd.gradcheck(
        lambda t: (torch.manual_seed(5), dropout(t, 0.5))[1], (x.detach().requires_grad_(),)
    )


def test_dropout_is_identity_off_training_or_at_zero_and_checks_p():
    x = torch.randn(3, 4)
    assert dropout(x, 0.5, training=False) is x and dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
    with pytest.raises(ValueError, match="between 0 and 1"):
        dropout(x, 1.5)
    m = Dropout(0.5)
    assert isinstance(m, nn.Dropout) and m.eval()(x) is x
    torch.manual_seed(1)
    a = m.train()(x)
    torch.manual_seed(1)
    assert torch.equal(a, dropout(x, 0.5))


def test_torch_masks_replays_f_dropouts_draws():
    """For bit-for-bit replays of runs made with F.dropout: the same output and the same mask as keep_mask."""
    x = torch.randn(50, 60)
    torch.manual_seed(2)
    want = F.dropout(x, 0.3, True)
    with torch_masks():
        torch.manual_seed(2)
        assert torch.equal(dropout(x, 0.3), want)
        torch.manual_seed(2)
        assert torch.equal(keep_mask(x.shape, 0.3), want != 0)
    torch.manual_seed(2)
    assert not torch.equal(dropout(x, 0.3), want)  # switched back on leaving the block
