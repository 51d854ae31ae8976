"""Nested model states (dicts, lists, tuples of batch-first tensors) and the one function that reorders their
rows: beam search, batching and every model's state share it, so it lives below them all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch import Tensor


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
