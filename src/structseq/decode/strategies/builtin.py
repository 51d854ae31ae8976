"""The built-in strategies: greedy, beam search (with n-best lists) and ancestral sampling, each a step rule of
the one search loop (`structseq.decode.search.search`)."""

from __future__ import annotations

import torch

from structseq.data.vocab import Vocab
from structseq.decode.sampling import SampleStep, Sampling
from structseq.decode.search import BEAM, search
from structseq.decode.strategies import Strategy
from structseq.errors import ConfigError
from structseq.registry import register_strategy


@register_strategy("greedy")
class Greedy(Strategy):
    """The most probable token at each step (beam search of width 1); the default for one output of beam 1.
    It keeps one hypothesis: a beam or an n-best list above 1 is refused."""

    reads = ("max_len_a", "max_len_b")

    @classmethod
    def default(cls, settings):
        return settings.sampling is None and settings.beam <= 1 and settings.nbest <= 1

    def check(self):
        s = self.settings
        for key, value in (("beam", s.beam), ("nbest", s.nbest)):
            if value > 1:
                raise ConfigError(
                    f"'{key}' {value}: decode.strategy 'greedy' keeps one hypothesis (one output); use "
                    "decode.strategy=beam (or null), or leave it at 1"
                )

    def search(self, model, inputs, max_len, ids):  # greedy ranks by the score alone: no length penalty
        return search(model, inputs, max_len, BEAM, beam=1, len_penalty=0.0, processors=self.settings.processors, **ids)


@register_strategy("beam")
class Beam(Strategy):
    """Beam search of width max(beam, nbest), finished hypotheses kept aside; n-best lists cut to `nbest`."""

    @classmethod
    def default(cls, settings):
        return settings.sampling is None and not Greedy.default(settings)


@register_strategy("sampling", options=Sampling)
class Sample(Strategy):
    """`nbest` samples per sentence (each its own search of one hypothesis that draws its tokens), seeded by
    `decode.seed` (one generator for a whole decoding), ranked by the normalised score; the default where
    `sampling` settings are given."""

    reads = ("len_penalty", "max_len_a", "max_len_b")

    @classmethod
    def default(cls, settings):
        return settings.sampling is not None

    def __init__(self, settings):
        super().__init__(settings)
        o = settings.options
        self.sampling = settings.sampling or (Sampling(o.temperature, o.top_k, o.top_p, o.seed) if o else Sampling())
        self.generator = settings.generator

    def search(self, model, inputs, max_len, ids):
        if self.generator is None:  # one generator for every batch of a decoding
            self.generator = torch.Generator(device=max_len.device).manual_seed(self.sampling.seed)
        s = self.settings
        return search(
            model, inputs, max_len, SampleStep(self.sampling, self.generator, ids.get("eos", Vocab.eos)), beam=1,
            copies=s.nbest, len_penalty=s.len_penalty, nbest=True, processors=s.processors, **ids,
        )  # fmt: skip
