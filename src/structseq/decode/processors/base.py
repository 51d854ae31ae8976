"""The processor protocol (`LogitsProcessor`, `ProcessorList`) and what a processor may know of a model's outputs
(`OutputSpace`): the package's docstring says how a search calls them."""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from torch import Tensor

from structseq.data.vocab import Vocab
from structseq.errors import ConfigError


class LogitsProcessor(abc.ABC):
    """One per-step rule: `__call__(input_ids (rows, t + 1), scores (rows, V)) -> scores (rows, V)` (the
    module's docstring). transformers' own processors are called the same way and may be listed beside these.
    One that sets `reads_remaining` is also given `remaining=` (rows,): each row's budget of output tokens it may
    still emit before it must end, this step's included (a length-aware grammar)."""

    reads_remaining: ClassVar[bool] = False

    @abc.abstractmethod
    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor: ...


class ProcessorList(list):
    """Processors applied in order; empty (falsy): the search skips them. A search hands it each row's
    `remaining` budget, which it passes on to the processors that read it."""

    reads_remaining: ClassVar[bool] = True

    def __call__(self, input_ids: Tensor, scores: Tensor, remaining: Tensor | None = None) -> Tensor:
        for processor in self:
            if remaining is not None and getattr(processor, "reads_remaining", False):
                scores = processor(input_ids, scores, remaining=remaining)
            else:
                scores = processor(input_ids, scores)
        return scores


@dataclass(frozen=True)
class OutputSpace:
    """What a processor may know of the model's outputs: each id's token as the model emits it (`tokens`), the
    special ids, and `detokenize` (ids without specials -> the output's words) where outputs are subwords (a
    pretrained tokenizer's pieces, a task's subword segmentation); None: each token is a word."""

    tokens: Sequence[str]
    eos: int = Vocab.eos
    bos: int = Vocab.bos
    pad: int = Vocab.pad
    detokenize: Callable[[Sequence[int]], list[str]] | None = None

    def id_of(self, token: str, key: str) -> int:
        """The id of output token `token`, or a ConfigError naming `key` (the setting that gave it)."""
        index = getattr(self, "_index", None)
        if index is None:
            index = {t: i for i, t in enumerate(self.tokens)}
            object.__setattr__(self, "_index", index)
        if token not in index:
            raise ConfigError(f"'{key}': {token!r} is not an output token of the model")
        return index[token]
