"""Operations over segments of rows (graph message passing without a graph library): row e of a flat
tensor belongs to segment `segment[e]`, e.g. a tree node to the word whose state it updates."""

from __future__ import annotations

import torch
from torch import Tensor


def segment_softmax(scores: Tensor, segment: Tensor, n: int) -> Tensor:
    """Softmax of scores (E, H) over the rows of each segment, separately for each column (head): rows
    with the same id in segment (E,), ids in [0, n). An empty segment contributes nothing. Computed and
    returned in float32: CUDA's bf16 autocast runs `exp` in float32, which would meet bf16 sums otherwise."""
    scores = scores.float()
    idx = segment[:, None].expand_as(scores)
    top = torch.full((n, scores.shape[1]), float("-inf"), device=scores.device, dtype=scores.dtype)
    top = top.scatter_reduce(0, idx, scores, "amax", include_self=True)
    e = (scores - top[segment]).exp()
    total = torch.zeros_like(top).index_add_(0, segment, e)
    return e / total[segment]
