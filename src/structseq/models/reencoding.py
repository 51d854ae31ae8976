"""Re-encoding points and chunks: the loop over groups of points that every R-Dangle training path shares
(`structseq.models.dangle`'s from-scratch models and `structseq.models.rdangle_pretrained`), never a loop over
time steps."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint


def reencoding_points(length: int, interval: int) -> list[int]:
    """Re-encoding steps (0-based) for a target of `length` decoder inputs: 0, o, 2o, ... (interval 0: only 0)."""
    return list(range(0, length, interval)) if interval else [0]


def is_reencoding_point(step: int, interval: int) -> bool:
    return step % interval == 0 if interval else step == 0


def auto_chunk_points(interval: int, length: int, steps: int) -> int:
    """Points per chunk covering about `steps` target steps (interval 0: the one point)."""
    return -(-steps // (interval or length))


def run_chunks(chunk, args: tuple, lengths: Tensor, interval: int, size: int, recompute: bool) -> list[Tensor]:
    """`chunk(*args, group)` for consecutive groups of `size` re-encoding points of a batch whose sentences have
    `lengths` decoder inputs (a loop over groups of points, never over time steps); with `recompute`, each
    chunk's activations are recomputed in the backward pass instead of stored."""
    pts = torch.tensor(reencoding_points(int(lengths.max()), interval), device=lengths.device)
    outputs = []
    for first in range(0, len(pts), size):
        group = pts[first : first + size]
        if recompute and torch.is_grad_enabled():
            outputs.append(checkpoint(chunk, *args, group, use_reentrant=False))
        else:
            outputs.append(chunk(*args, group))
    return outputs


def live_rows(group: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
    """The rows of a chunk worth computing, point-major: (point index in `group`, sentence) for every point that
    lies within its sentence's `lengths` decoder inputs."""
    return (group[:, None] < lengths[None, :]).nonzero(as_tuple=True)


def step_owners(
    group: Tensor, point_of: Tensor, sent_of: Tensor, batch: int, n: int, interval: int
) -> tuple[Tensor, Tensor, Tensor]:
    """For the n steps of a chunk (from its first point on): the row that owns step t of sentence b, (n, B),
    the steps (n,) and a mask (B, n, 1) of the (b, t) that have a row (output (b, t) comes from the row of
    sentence b and of the point that owns step t)."""
    row_of = torch.full((len(group), batch), -1, dtype=torch.long, device=group.device)
    row_of[point_of, sent_of] = torch.arange(len(sent_of), device=group.device)
    steps = torch.arange(n, device=group.device)  # relative to the chunk's first point
    rows = row_of[torch.div(steps, interval, rounding_mode="floor")]  # (n, B)
    return rows.clamp_min(0), steps, rows.ge(0).T[..., None]


def gather_owned(x: Tensor, owners: tuple[Tensor, Tensor, Tensor]) -> Tensor:
    """Per-row outputs x (R, n, ...) of a chunk as (B, n, ...): each step from the row that owns it (zero where
    none does); `owners` from `step_owners`."""
    rows, steps, keep = owners
    return x[rows, steps[:, None]].transpose(0, 1) * keep
