"""What models provide to training and search.

Every model takes *named* inputs: a mapping of tensors (a task's `Batch`), e.g. `{"src", "tgt_in"}` for
seq2seq, `{"src", "ctx", "tgt_in"}` for a context-aware model; training calls `forward(batch)` through
the task's loss. A model that is not autoregressive (a tree decoder, a tagger) needs nothing more.

An autoregressive model adds the incremental protocol that search drives:
  encode(inputs) -> enc                                    input-only work, done once
  init_state(enc) -> state                                 decoder state before the first step
  step(prev_tokens, state) -> (log-probs (B, V), state)    one incremental step
States are nested dicts/lists/tuples of tensors whose first dimension is the batch, so one generic
`map_state` reorders them for beam search (no per-model reorder methods); an object with `map_rows(fn)` (a
self-attention `KVCache`) reorders itself, lazily. A model may list in `sentence_state` the top-level state keys
that are equal across the hypotheses of one sentence (encoder outputs, projected memories): beam search then
copies them only when sentences leave the batch, not at every step.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

State = dict[str, Any]
Inputs = Mapping[str, Tensor]


def map_state(state: Any, fn: Callable[[Tensor], Tensor], owned: bool = False) -> Any:
    """Apply `fn` (a selection of batch rows, e.g. `lambda t: t.index_select(0, idx)`) to every tensor in a nested
    state; an object with `map_rows` applies it itself. `owned`: the caller hands `state` over and never reads
    it again, so its buffers may be reused (beam search; see `KVCache`)."""
    if hasattr(state, "map_rows"):
        return state.map_rows(fn, owned)
    if isinstance(state, Tensor):
        return fn(state)
    if isinstance(state, dict):
        return {k: map_state(v, fn, owned) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(map_state(v, fn, owned) for v in state)
    return state


class Autoregressive(nn.Module, abc.ABC):
    """A model that emits a sequence one token at a time (teacher-forced in training, incremental in search)."""

    pad: int = 0
    width: int  # the model dimension (set by its builder; the Noam schedule scales by it)
    sentence_state: frozenset[str] = frozenset()  # state keys equal across a sentence's hypotheses (see above)

    @abc.abstractmethod
    def encode(self, inputs: Inputs) -> State:
        """Input-only computation, done once per batch."""

    @abc.abstractmethod
    def init_state(self, enc: State) -> State:
        """Decoder state before the first target token."""

    @abc.abstractmethod
    def step(self, prev: Tensor, state: State) -> tuple[Tensor, State]:
        """Log-probabilities (B, V) of the next token given the previous one (B,), and the new state."""

    @abc.abstractmethod
    def forward(self, batch: Inputs) -> Tensor:
        """Teacher-forced log-probabilities (B, T, V) of `batch["tgt_in"]`'s continuations."""

    @torch.no_grad()
    def incremental_log_probs(self, batch: Inputs) -> Tensor:
        """Teacher-forced log-probs computed step by step through `step` (for equivalence checks)."""
        state = self.init_state(self.encode(batch))
        tgt_in = batch["tgt_in"]
        out = []
        for t in range(tgt_in.shape[1]):
            lp, state = self.step(tgt_in[:, t], state)
            out.append(lp)
        return torch.stack(out, 1)

    def pretrained_state(self, state: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], list[str]]:
        """Another model's parameters as this model names them, for phase two of two-phase training
        (`train.init_from`), and the names that were filled from other names. By default unchanged: the
        loader then demands the same names and shapes."""
        return dict(state), []

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


