"""Decoding strategies: how one batch is searched, as objects named in `decode.strategy` (fairseq's `Search`
classes). `structseq.decode.run` is the one loop (batches, the task's inputs and outputs) for every task and
the CLI; a strategy turns one batch of model inputs into each sentence's outputs (`outputs`).

A strategy searches one model interface (`interface`), which a model declares as `search_interface`:
"sequence" (`encode` / `init_state` / `step`, `structseq.models.base.Autoregressive`), "tree" (a category
tree per word, the protocol of `structseq.decode.tree`) or "tags" (per-word label scores, `model.kbest`).
`decode.strategy` names one that searches the model's interface (else a one-line ConfigError naming the
key, from `check_fits` when training starts or `--set` changes it; a saved run's that does not fit is null with
a warning, `saved_strategy`); null picks the built-in default for the interface and the settings
(`Strategy.default`).

A new strategy is one file (here, or a plugin module from $STRUCTSEQ_PLUGINS). A sequence strategy gets the
model, its named inputs, each sentence's length limit and the model's special ids, and returns
`Hypotheses` (n-best lists when asked); `run` does the rest:

    @register_strategy("my-search")
    class MySearch(Strategy):
        def search(self, model, inputs, max_len, ids):
            ...  # model.encode / init_state / step, as structseq.decode.search does

A strategy over another interface overrides `outputs` too (`structseq.decode.strategies.tagging`).

Built in: `greedy`, `beam` (n-best lists too), `sampling` (sequence); `tree-greedy`, `tree-beam` (tree: the
k best trees of each word, k = decode.beam); `tag-kbest` (tags: the k best labels of each word).

Ensembles are models, not strategies (`structseq.decode.ensemble.Ensemble`, as fairseq's `EnsembleModel`
beside its `Search` classes): averaging members' next-token distributions is a model's `step`, so every
sequence strategy (greedy, beam, n-best, sampling, a plugin's) searches an ensemble unchanged, and an
ensemble strategy would have to re-implement each search.
"""

from __future__ import annotations

import abc
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor

from structseq.data.vocab import Vocab
from structseq.decode.search import Hypotheses, Sampling, max_lengths, normalized
from structseq.errors import ConfigError
from structseq.registry import STRATEGIES


class Candidate(NamedTuple):
    """One output of an n-best list or a sample: its tokens, its log-probability (</s> included), what beam
    search ranks by (`search.normalized`: the score over its length in model tokens + 1 ** decode.len_penalty)
    and the model's output ids (without </s>; a detokenised output may not give them back)."""

    tokens: list[str]
    score: float
    normalized: float
    ids: tuple[int, ...] = ()


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
    """One way to search a batch; `settings` as `Settings`. `interface`: the model interface it searches
    (`Model.search_interface`)."""

    name: str = ""
    interface: ClassVar[str] = "sequence"

    def __init__(self, settings: Settings):
        self.settings = settings

    @classmethod
    def default(cls, settings: Settings) -> bool:
        """Whether `decode.strategy: null` picks this one for its interface under `settings` (built-ins only)."""
        return False

    @abc.abstractmethod
    def search(self, model, inputs: Mapping[str, Tensor], max_len: Tensor, ids: Mapping) -> Hypotheses:
        """Hypotheses for the batch (`Hypotheses.nbest` when `settings.nbest` > 1); `ids`: the special ids
        (`eos`, `bos`, `pad`, `eos_at_limit`) where they are not `Vocab`'s."""

    def outputs(self, model, inputs: Mapping[str, Tensor], task, vocabs, decode_cfg) -> list[Any]:
        """Each sentence's outputs, what `run` returns: here its n-best list of `Candidate`s, best
        first, searched within the length limit of `decode_cfg.max_len_a`/`max_len_b`, with the task's
        special ids (`task.special_ids`) and words (`task.output_words`)."""
        d, specials, n = decode_cfg, task.special_ids(), self.settings.nbest
        max_len = max_lengths(inputs["src"], d.max_len_a, d.max_len_b, pad=specials.get("pad", Vocab.pad))
        hyp = self.search(model, inputs, max_len, specials)
        lists = hyp.nbest if hyp.nbest is not None else [[(t, s)] for t, s in zip(hyp.tokens, hyp.scores)]
        return [
            [
                Candidate(
                    task.output_words(toks, vocabs), score, normalized(score, len(toks), d.len_penalty), tuple(toks)
                )
                for toks, score in entries[:n]
            ]
            for entries in lists
        ]


def fitting(interface: str | None) -> list[str]:
    """The registered strategies that search `interface`."""
    return [name for name, cls in STRATEGIES.items() if cls.interface == interface]


def choose(name: str | None, settings: Settings, interface: str | None = "sequence", model: str = "") -> Strategy:
    """The strategy `name` (`decode.strategy`), which must search `interface` (that of `model`, named in the
    error); or, by default, the built-in one for the interface and settings (sequence: sampling when given,
    greedy for one output of beam 1, else beam search)."""
    of = f"model {model} " if model else "the model "
    if interface is None:
        raise ConfigError(f"'decode.strategy': {of}offers no search interface (it is not decoded)")
    if name is None:
        names = [n for n in fitting(interface) if STRATEGIES.get(n).default(settings)]
        if not names:
            raise ConfigError(f"'decode.strategy': no default strategy searches {interface} models; name one")
        name = names[0]
    cls = STRATEGIES.get(name)
    if cls.interface != interface:
        raise ConfigError(
            f"'decode.strategy': '{name}' searches {cls.interface} models, but {of}decodes as {interface}; "
            f"strategies for it: {', '.join(fitting(interface)) or 'none'}"
        )
    return cls(settings)


def check_fits(name: str | None, model, where: str = "") -> None:
    """`choose`'s ConfigError when `decode.strategy` names a strategy that does not search `model`: checked
    where a model is built for training and where a run's decode settings change, before any batch; `where`
    (the config file, or the `--set` item, the value came from) begins the message."""
    if name is not None:
        try:
            choose(name, Settings(), model.search_interface, type(model).__name__)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}" if where else str(e)) from None


def saved_strategy(name: str | None, model, checkpoint) -> str | None:
    """A saved run's `decode.strategy`, or None (the model's default) with one warning naming `checkpoint` where
    it searches another interface than `model`'s: before a supertagger's searches were strategies, a tagger
    ignored the key, so an old run trained with e.g. `greedy` must still load, and `--set` still change it."""
    if name is None or STRATEGIES.get(name).interface == model.search_interface:
        return name
    warnings.warn(
        f"{checkpoint}: the checkpoint's 'decode.strategy' {name!r} does not search model "
        f"{type(model).__name__} (which this version checks; older ones ignored it): decoding with the model's "
        "default (null); --set decode.strategy=NAME picks another",
        stacklevel=2,
    )
    return None


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
