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
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from structseq.data.vocab import Vocabs
from structseq.errors import ConfigError
from structseq.registry import ARCHS

State = dict[str, Any]
Inputs = Mapping[str, Tensor]


class Model(nn.Module):
    """The contract every model meets, with its defaults. A builder returns a `Model` (or an `nn.Module`
    that has what `check_model` asks for):

    - `width`: the model dimension the Noam schedule scales by (`with_width` sets it);
    - `autoregressive`: emits sequences through `encode` / `init_state` / `step` (`Autoregressive`);
    - `search_interface`: what decoding strategies may search it (`structseq.decode.strategies`): "sequence"
      (an `Autoregressive`), "tree" or "tags" (a tagger's), None (not decoded);
    - `param_groups()`: optimiser groups, each may carry an `lr_scale` (default: one group, every trainable
      parameter; a pretrained encoder gets a smaller factor);
    - `pretrained_state(state)`: another checkpoint's parameters as this model names them, for
      `train.init_from` (default: unchanged, so the loader demands the same names and shapes);
    - `static_shapes`: set by the trainer under `optim.static_shapes`; a model whose training pass has shapes
      that depend on the data (Dangle's live rows) then does fixed-shape work instead, so the step can be captured;
    - `variant`: the family's variant where tools depend on it (a context-transformer's decoder), else None.
    """

    width: int
    autoregressive: ClassVar[bool] = False
    search_interface: ClassVar[str | None] = None
    static_shapes: bool = False
    variant: str | None = None

    def param_groups(self) -> list[dict]:
        return [{"params": [p for p in self.parameters() if p.requires_grad]}]

    def pretrained_state(self, state: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], list[str]]:
        """Another model's parameters as this model names them, and the names that were filled from other
        names. By default unchanged: the loader then demands the same names and shapes."""
        return dict(state), []

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


class Autoregressive(Model, abc.ABC):
    """A model that emits a sequence one token at a time (teacher-forced in training, incremental in search)."""

    pad: int = 0
    autoregressive: ClassVar[bool] = True
    search_interface: ClassVar[str | None] = "sequence"
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


def sentence_state(model) -> frozenset[str]:
    """The state keys search may leave in place (`Autoregressive.sentence_state`); none for an object that only
    has the incremental protocol (a wrapper that suppresses </s>, a test's stub)."""
    return getattr(model, "sentence_state", frozenset())


def output_limit(model, inputs: Inputs) -> Tensor | None:
    """The most output tokens the model can produce for each input (`model.output_limit(inputs)`: a position
    table's size), or None for a model without such a limit or a bare protocol object."""
    limit_of = getattr(model, "output_limit", None)
    return limit_of(inputs) if callable(limit_of) else None


def first_token(model, bos: int) -> int:
    """The id the model's decoder reads at the first step when search feeds it `bos`: `model.first_input(prev, 0)`
    (a pretrained decoder's start token, e.g. </s> for BART, <pad> for T5) where the model has one, else `bos`.
    Processors see it first in each row's input_ids, as transformers' `generate` hands them."""
    first = getattr(model, "first_input", None)
    return int(first(torch.tensor([bos]), 0)[0]) if callable(first) else bos


def with_width(model: nn.Module, width: int) -> nn.Module:
    """Record the model dimension that the Noam schedule scales the learning rate by."""
    model.width = width
    return model


_DEFAULTS = ("param_groups", "pretrained_state")
_STEPS = ("encode", "init_state", "step")


def check_model(model: Any, arch: str) -> nn.Module:
    """`model` meets the contract of `Model` (see there), or a ConfigError naming the missing piece and the
    arch; a plain `nn.Module` gets the defaults of `Model` it lacks."""
    if not isinstance(model, nn.Module):
        raise ConfigError(f"'model.arch': the builder of '{arch}' returned {type(model).__name__}, not an nn.Module")
    width = getattr(model, "width", None)
    if not isinstance(width, int) or isinstance(width, bool) or width < 1:
        raise ConfigError(
            f"'model.arch': model '{arch}' has no positive integer `width` (its builder sets it with "
            "`with_width(model, d_model)`; the Noam schedule scales by it)"
        )
    if getattr(model, "autoregressive", False):
        missing = [m for m in _STEPS if not callable(getattr(model, m, None))]
        if missing:
            raise ConfigError(
                f"'model.arch': model '{arch}' says it is autoregressive but lacks "
                f"{', '.join(missing)} (see structseq.models.base.Autoregressive)"
            )
    for name in _DEFAULTS:
        if not callable(getattr(model, name, None)):
            setattr(model, name, getattr(Model, name).__get__(model))
    defaults = {"autoregressive": False, "variant": None, "search_interface": None}
    if getattr(model, "autoregressive", False):
        defaults.update(pad=0, sentence_state=frozenset(), search_interface="sequence")
    for name, value in defaults.items():
        if not hasattr(model, name):
            setattr(model, name, value)
    return model


def build_model(cfg, vocabs: Vocabs, train_examples: Sequence | None = None, task: str | None = None) -> nn.Module:
    """The model for `cfg` (a `model` section), checked against the contract. `train_examples`: needed when the
    model learns something from the data at build time (e.g. a lexical head's lexicon). `task`: checked by the
    rule the config loader applies (`Arch.check_serves`); a loaded config has passed it already."""
    arch = ARCHS.get(cfg.arch)
    if task is not None:
        arch.check_serves(task)
    return check_model(arch.build(cfg, vocabs, train_examples), cfg.arch)
