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

import abc
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


class Seq2Seq(nn.Module, abc.ABC):
    """Base class: subclasses implement encode / init_state / step / forward."""

    pad: int = 0

    @abc.abstractmethod
    def encode(self, src: Tensor) -> State:
        """Source-only computation, done once per batch."""

    @abc.abstractmethod
    def init_state(self, enc: State) -> State:
        """Decoder state before the first target token."""

    @abc.abstractmethod
    def step(self, prev: Tensor, state: State) -> tuple[Tensor, State]:
        """Log-probabilities (B, V) of the next token given the previous one (B,), and the new state."""

    @abc.abstractmethod
    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """Teacher-forced log-probabilities (B, T, V)."""

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
