"""The training loss every autoregressive task shares."""

from __future__ import annotations

import torch


def label_smoothed_nll(log_probs: torch.Tensor, target: torch.Tensor, epsilon: float, pad: int = 0):
    """Summed (loss, nll) over non-pad targets; loss = (1 - eps) nll + eps * mean_v(-log p_v)."""
    mask = target.ne(pad)
    nll = -log_probs.gather(-1, target[..., None])[..., 0]
    nll = nll.masked_fill(~mask, 0.0).sum()
    if epsilon == 0.0:
        return nll, nll
    smooth = -log_probs.mean(-1).masked_fill(~mask, 0.0).sum()
    return (1 - epsilon) * nll + epsilon * smooth, nll
