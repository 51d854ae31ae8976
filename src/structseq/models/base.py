"""The decoder-state protocol every autoregressive model provides to training and search.

A model exposes
  forward(src, tgt_in) -> log-probs (B, T, V)          teacher forcing, for training
  encode(src) -> enc                                    source-only work, done once
  init_state(enc) -> state                              decoder state before the first step
  step(prev_tokens, state) -> (log-probs (B, V), state) one incremental step
States are nested dicts/lists/tuples of tensors whose first dimension is the batch, so one generic
`map_state` reorders them for beam search (no per-model reorder methods).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

State = dict[str, Any]


def map_state(state: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    """Apply `fn` to every tensor in a nested state (e.g. `lambda t: t.index_select(0, idx)`)."""
    if isinstance(state, Tensor):
        return fn(state)
    if isinstance(state, dict):
        return {k: map_state(v, fn) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(map_state(v, fn) for v in state)
    return state


class Seq2Seq(nn.Module):
    """Base class: subclasses implement encode / init_state / step / forward."""

    pad: int = 0

    def encode(self, src: Tensor) -> State:
        raise NotImplementedError

    def init_state(self, enc: State) -> State:
        raise NotImplementedError

    def step(self, prev: Tensor, state: State) -> tuple[Tensor, State]:
        raise NotImplementedError

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        raise NotImplementedError

    @torch.no_grad()
    def incremental_log_probs(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced log-probs computed step by step through `step` (for equivalence checks)."""
        state = self.init_state(self.encode(src))
        out = []
        for t in range(tgt_in.shape[1]):
            lp, state = self.step(tgt_in[:, t], state)
            out.append(lp)
        return torch.stack(out, 1)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
