"""SwiGLU: the gated feed-forward block w2(dropout(silu(w1 x) * w3 x)) with a hidden width of 8/3 the
model width (Shazeer 2020), so that it has the parameters of a 4x ReLU feed-forward."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from structseq.nn.dropout import Dropout


class SwiGLU(nn.Module):
    def __init__(self, dim: int, dropout: float):
        super().__init__()
        hidden = int(8 * dim / 3)
        self.w1, self.w3, self.w2 = nn.Linear(dim, hidden), nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        self.drop = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(self.drop(F.silu(self.w1(x)) * self.w3(x)))
