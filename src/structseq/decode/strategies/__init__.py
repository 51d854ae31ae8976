"""Decoding strategies: how one batch is searched, as objects named in `decode.strategy` (fairseq's `Search`
classes). A strategy gets the model, its named inputs, each sentence's length limit and the model's special
ids, and returns `Hypotheses` (n-best lists when asked); `structseq.decode.run` does the rest (batches, the
task's inputs and words) for every task and the CLI.

A new strategy is one file (here, or a plugin module from $STRUCTSEQ_PLUGINS):

    @register_strategy("my-search")
    class MySearch(Strategy):
        def search(self, model, inputs, max_len, ids):
            ...  # model.encode / init_state / step, as structseq.decode.search does

Built in: `greedy`, `beam` (n-best lists too), `sampling`. Ensembles are models (`structseq.decode.ensemble`:
an ensemble decodes with any strategy); a supertagger's tree beam reads no step-by-step model and stays in
its task (`structseq.decode.tree`).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from structseq.data.vocab import Vocab
from structseq.decode.search import Hypotheses, Sampling
from structseq.registry import STRATEGIES


@dataclass(frozen=True)
class Settings:
    """What a strategy reads: the beam, the n-best size, the length penalty and stopping rule (`decode`
    section), sampling settings and the generator that draws them."""

    beam: int = 1
    nbest: int = 1
    len_penalty: float = 1.0
    early_stopping: bool | str = False
    sampling: Sampling | None = None
    generator: torch.Generator | None = None


class Strategy(abc.ABC):
    """One way to search a batch; `settings` as `Settings`."""

    name: str = ""

    def __init__(self, settings: Settings):
        self.settings = settings

    @abc.abstractmethod
    def search(self, model, inputs: Mapping[str, Tensor], max_len: Tensor, ids: Mapping) -> Hypotheses:
        """Hypotheses for the batch (`Hypotheses.nbest` when `settings.nbest` > 1); `ids`: the special ids
        (`eos`, `bos`, `pad`, `eos_at_limit`) where they are not `Vocab`'s."""


def choose(name: str | None, settings: Settings) -> Strategy:
    """The strategy `name` (`decode.strategy`), or by the settings: sampling when given, greedy for one
    output of beam 1, else beam search."""
    if name is None:
        if settings.sampling is not None:
            name = "sampling"
        else:
            name = "greedy" if settings.beam <= 1 and settings.nbest <= 1 else "beam"
    return STRATEGIES.get(name)(settings)


def decode(
    model,
    inputs: Mapping[str, Tensor],
    max_len: Tensor,
    *,
    beam: int = 1,
    len_penalty: float = 1.0,
    nbest: int = 1,
    sampling: Sampling | None = None,
    generator: torch.Generator | None = None,
    early_stopping: bool | str = False,
    eos: int = Vocab.eos,
    bos: int = Vocab.bos,
    pad: int = Vocab.pad,
    eos_at_limit: bool = True,
    strategy: str | None = None,
) -> Hypotheses:
    """Greedy (beam 1) or beam search with a per-sentence length limit (e.g. `max_lengths(src, a, b)`).

    `nbest` > 1: `Hypotheses.nbest` holds the `nbest` best entries of each sentence (beam search with a beam of
    at least `nbest`, ranked by `normalized`); `sampling`: `nbest` samples each instead of search;
    `early_stopping`: when a beam stops (`beam_search`). `eos`, `bos`, `pad`: the model's special ids (a
    pretrained tokenizer's own); `eos_at_limit`: whether the last position the length limit allows must be
    </s> (the module's docstring); `strategy`: a registered strategy's name (`structseq.decode.strategies`),
    else chosen from the settings."""
    settings = Settings(beam, nbest, len_penalty, early_stopping, sampling, generator)
    ids = {"eos": eos, "bos": bos, "pad": pad, "eos_at_limit": eos_at_limit}
    return choose(strategy, settings).search(model, inputs, max_len, ids)
