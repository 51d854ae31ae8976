"""Dropout whose keep mask is drawn as `torch.rand(shape) >= p`.

Same mathematics as `F.dropout` (keep each element with probability 1 - p, scale kept ones by 1 / (1 - p)), but
on CPU `F.dropout` draws its mask with `bernoulli_`, which costs about twice what `rand` does: it took 10% of the
fairseq-sized Transformer's training step (`benchmarks/profile_train_step.py`). On other devices `dropout` is
`F.dropout` (fused kernels there). The mask is kept as booleans for the backward pass (one byte per element, as
`F.dropout` keeps).

`torch_masks()` switches back to `F.dropout`'s draws, for bit-for-bit replays of seeded runs made before this
module existed (tests/models/test_core_fixture.py uses it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from structseq.nn.accelerator import on_accelerator

_TORCH_MASKS = False


@contextmanager
def torch_masks(enabled: bool = True) -> Iterator[None]:
    """Within the block, `dropout` and `keep_mask` draw as `F.dropout` does (`bernoulli_`)."""
    global _TORCH_MASKS
    before, _TORCH_MASKS = _TORCH_MASKS, enabled
    try:
        yield
    finally:
        _TORCH_MASKS = before


def keep_mask(shape: tuple[int, ...] | torch.Size, p: float, device: torch.device | str = "cpu") -> Tensor:
    """Booleans, True with probability 1 - p: the draws `dropout` makes on CPU for a tensor of this shape."""
    if _TORCH_MASKS:
        return torch.empty(shape, device=device).bernoulli_(1 - p).bool()
    return torch.rand(shape, device=device) >= p


def dropout_noise(like: Tensor, shape: tuple[int, ...], p: float) -> Tensor:
    """What `dropout(x, p)` multiplies an `x` of this shape by (the same draws, the same rounding): keep / (1 - p),
    in `like`'s dtype and device; 0 < p < 1. Off the CPU: `bernoulli_` draws, as before this module."""
    if _TORCH_MASKS or on_accelerator(like):
        return like.new_empty(shape).bernoulli_(1 - p).div_(1 - p)
    return keep_mask(shape, p, like.device).to(like.dtype).mul_(1.0 / (1.0 - p))


class _Dropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, p: float) -> Tensor:
        keep = keep_mask(x.shape, p, x.device)
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - p)
        return x.mul(keep.view(torch.uint8)).mul_(ctx.scale)  # uint8: the fast path of a mixed-type mul

    @staticmethod
    def backward(ctx, grad: Tensor):
        (keep,) = ctx.saved_tensors
        return grad.mul(keep.view(torch.uint8)).mul_(ctx.scale), None


def dropout(x: Tensor, p: float, training: bool = True) -> Tensor:
    """`F.dropout(x, p, training)` with the cheaper CPU mask (see the module docstring)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0 or on_accelerator(x) or _TORCH_MASKS:
        return F.dropout(x, p, True)
    return _Dropout.apply(x, p)


class Dropout(nn.Dropout):
    """`nn.Dropout` drawing its mask as `dropout` does."""

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p, self.training)
