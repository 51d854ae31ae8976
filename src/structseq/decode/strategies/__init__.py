"""Decoding strategies: how one batch is searched, as objects named in `decode.strategy` (fairseq's `Search`
classes). `structseq.decode.run` is the one loop (batches, the task's inputs and outputs) for every task and
the CLI; a strategy turns one batch of model inputs into each sentence's outputs (`outputs`).

A strategy searches one model interface (`interface`), which a model declares as `search_interface`:
"sequence" (`encode` / `init_state` / `step`, `structseq.models.base.Autoregressive`), "tree" (a category
tree per word, the protocol of `structseq.decode.tree`) or "tags" (per-word label scores, `model.kbest`).
`decode.strategy` names one that searches the model's interface (else a one-line ConfigError naming the
key, from `check_fits` when training starts or `--set` changes it; a saved run's that does not fit is null with
a warning, `structseq.run.saved_config.saved_strategy`); null picks the built-in default for the interface and
the settings (`Strategy.default`).

A new strategy is one file (here, or a plugin module from $STRUCTSEQ_PLUGINS). A sequence strategy is a step
rule (`structseq.decode.search.Step`, fairseq's `Search.step`: how one step chooses among the continuations)
inside the one search loop (`structseq.decode.search.search`: length limit, stopping rules, length penalty,
finished hypotheses, n-best lists), with its own `decode` keys declared where it is registered
(`options=`: a dataclass of `structseq.fields.option`s, validated like every config key, listed by
`structseq config decode`, read from `self.settings.options`):

    @register_strategy("my-search", options=MyOptions)
    class MySearch(Strategy):
        def rule(self, ids):
            return MyStep(self.settings.options.strength)

(`structseq.decode.strategies.diverse` is a whole one.) A strategy may instead override `search` (the model,
its inputs, each sentence's length limit and the special ids -> `Hypotheses`); one over another interface
overrides `outputs` too (`structseq.decode.strategies.tagging`).

A strategy refuses, in one line, a setting it cannot honour (`check`: greedy a beam or n-best list above 1);
a key of another strategy's options is refused by the config (`structseq.config.check_config`).

Built in: `greedy`, `beam` (n-best lists too), `sampling`, `diverse-beam` (sequence); `tree-greedy`,
`tree-beam` (tree: the k best trees of each word, k = decode.beam); `tag-kbest` (tags: the k best labels of
each word).

Ensembles are models, not strategies (`structseq.decode.ensemble.Ensemble`, as fairseq's `EnsembleModel`
beside its `Search` classes): averaging members' next-token distributions is a model's `step`, so every
sequence strategy (greedy, beam, n-best, sampling, a plugin's) searches an ensemble unchanged, and an
ensemble strategy would have to re-implement each search.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor

from structseq.data.vocab import Vocab
from structseq.decode.sampling import Sampling
from structseq.decode.search import BEAM, Hypotheses, Step, max_lengths, normalized, search
from structseq.errors import ConfigError
from structseq.registry import STRATEGIES


class Candidate(NamedTuple):
    """One output of an n-best list or a sample: its tokens, its log-probability (</s> included), what beam
    search ranks by (`search.normalized`: the score over its length in model tokens ** decode.len_penalty, the
    length counting </s> where it ended in one, not for an output cut at the length limit) and the model's output ids (without </s>; a detokenised output may not give them back)."""

    tokens: list[str]
    score: float
    normalized: float
    ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Settings:
    """What a strategy reads: the beam, the n-best size, the length penalty and stopping rule (`decode`
    section), sampling settings and the generator that draws them (else from the options' seed), the `decode`
    section itself (`options`: a strategy's own keys) and the per-step processors (a `ProcessorList`)."""

    beam: int = 1
    nbest: int = 1
    len_penalty: float = 1.0
    early_stopping: bool | str = False
    sampling: Sampling | None = None
    generator: torch.Generator | None = None
    options: Any = None
    processors: Any = None


class Strategy:
    """One way to search a batch; `settings` as `Settings`. `interface`: the model interface it searches
    (`Model.search_interface`); `options`: the dataclass of its own `decode` keys (`register_strategy`);
    `reads`: the shared `decode` keys it honours (what an evaluation's settings line shows)."""

    name: str = ""
    interface: ClassVar[str] = "sequence"
    options: ClassVar[type | None] = None
    reads: ClassVar[tuple[str, ...]] = ("beam", "len_penalty", "early_stopping", "max_len_a", "max_len_b")

    def __init__(self, settings: Settings):
        self.settings = settings
        self.check()

    def check(self) -> None:
        """A one-line ConfigError for a setting this strategy cannot honour (none here)."""

    @classmethod
    def default(cls, settings: Settings) -> bool:
        """Whether `decode.strategy: null` picks this one for its interface under `settings` (built-ins only)."""
        return False

    @property
    def width(self) -> int:
        """The hypotheses kept per sentence: max(beam, nbest)."""
        return max(self.settings.beam, self.settings.nbest)

    def rule(self, ids: Mapping) -> Step:
        """How one step chooses (`structseq.decode.search.Step`): beam search's here."""
        return BEAM

    def search(self, model, inputs: Mapping[str, Tensor], max_len: Tensor, ids: Mapping) -> Hypotheses:
        """Hypotheses for the batch (`Hypotheses.nbest`, cut to `settings.nbest`, when it is > 1): the one
        loop with this strategy's `rule`; `ids`: the special ids (`eos`, `bos`, `pad`, `eos_at_limit`) where
        they are not `Vocab`'s."""
        s = self.settings
        hyp = search(
            model, inputs, max_len, self.rule(ids), beam=self.width, len_penalty=s.len_penalty, nbest=s.nbest > 1,
            early_stopping=s.early_stopping, processors=s.processors, **ids,
        )  # fmt: skip
        if s.nbest > 1:
            hyp.nbest, hyp.ended = [e[: s.nbest] for e in hyp.nbest], [e[: s.nbest] for e in hyp.ended]
        return hyp

    def outputs(self, model, inputs: Mapping[str, Tensor], task, vocabs, decode_cfg) -> list[Any]:
        """Each sentence's outputs, what `run` returns: here its n-best list of `Candidate`s, best
        first, searched within the length limit of `decode_cfg.max_len_a`/`max_len_b`, with the task's
        special ids (`task.special_ids`) and words (`task.output_words`), and `decode_cfg.processors` applied at
        every step (`structseq.decode.processors`, over `task.output_space`)."""
        d, specials, n = decode_cfg, task.special_ids(), self.settings.nbest
        if self.settings.processors is None and (d.processors or d.grammar):  # built once, used at every step
            from structseq.decode.processors import build_processors

            self.settings = replace(self.settings, processors=build_processors(d, task.output_space(vocabs)))
        max_len = max_lengths(inputs["src"], d.max_len_a, d.max_len_b, pad=specials.get("pad", Vocab.pad))
        hyp = self.search(model, inputs, max_len, specials)
        lists = hyp.nbest if hyp.nbest is not None else [[(t, s)] for t, s in zip(hyp.tokens, hyp.scores)]
        ended = hyp.ended or [[True] * len(e) for e in lists]  # a plugin's Hypotheses: outputs ended in </s>
        return [
            [
                Candidate(
                    task.output_words(toks, vocabs), score, normalized(score, len(toks), d.len_penalty, e), tuple(toks)
                )
                for (toks, score), e in zip(entries[:n], ends)
            ]
            for entries, ends in zip(lists, ended)
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


def strategy_of(model, decode_cfg, beam: int | None = None) -> str:
    """The name of the strategy that decodes `model` under `decode_cfg` (and an explicit `beam`)."""
    settings = Settings(decode_cfg.beam if beam is None else beam, options=decode_cfg)
    return choose(decode_cfg.strategy, settings, model.search_interface, type(model).__name__).name


def check_fits(name: str | None, model, where: str = "", decode_cfg=None) -> None:
    """`choose`'s ConfigError when `decode.strategy` names a strategy that does not search `model`, or (given
    `decode_cfg`) that refuses its settings (`Strategy.check`: greedy a beam above 1, diverse-beam groups that do
    not divide the beam): checked where a model is built for training and where a run's decode settings change,
    before any batch; `where` (the config file, or the `--set` item, the value came from) begins the message."""
    if name is not None:
        settings = Settings() if decode_cfg is None else Settings(decode_cfg.beam, options=decode_cfg)
        try:
            choose(name, settings, model.search_interface, type(model).__name__)
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}" if where else str(e)) from None


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
    processors=None,
) -> Hypotheses:
    """Greedy (beam 1) or beam search with a per-sentence length limit (e.g. `max_lengths(src, a, b)`).

    `nbest` > 1: `Hypotheses.nbest` holds the `nbest` best entries of each sentence (beam search with a beam of
    at least `nbest`, ranked by `normalized`); `sampling`: `nbest` samples each instead of search;
    `early_stopping`: when a beam stops (`beam_search`). `eos`, `bos`, `pad`: the model's special ids (a
    pretrained tokenizer's own); `eos_at_limit`: whether the last position the length limit allows must be
    </s> (the module's docstring); `strategy`: a registered strategy's name (`structseq.decode.strategies`),
    else chosen from the settings."""
    settings = Settings(beam, nbest, len_penalty, early_stopping, sampling, generator, processors=processors)
    ids = {"eos": eos, "bos": bos, "pad": pad, "eos_at_limit": eos_at_limit}
    return choose(strategy, settings).search(model, inputs, max_len, ids)
