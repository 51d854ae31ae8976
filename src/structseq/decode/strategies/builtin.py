"""The built-in strategies: greedy, beam search (with n-best lists) and ancestral sampling, each over the one
search module (`structseq.decode.search`)."""

from __future__ import annotations

from structseq.decode.search import Sampling, beam_search, greedy, sample
from structseq.decode.strategies import Strategy
from structseq.registry import register_strategy


@register_strategy("greedy")
class Greedy(Strategy):
    """The most probable token at each step (beam search of width 1); the default for one output of beam 1."""

    @classmethod
    def default(cls, settings):
        return settings.sampling is None and settings.beam <= 1 and settings.nbest <= 1

    def search(self, model, inputs, max_len, ids):
        return greedy(model, inputs, max_len, **ids)


@register_strategy("beam")
class Beam(Strategy):
    """Beam search of width max(beam, nbest), finished hypotheses kept aside; n-best lists cut to `nbest`."""

    @classmethod
    def default(cls, settings):
        return settings.sampling is None and not Greedy.default(settings)

    def search(self, model, inputs, max_len, ids):
        s = self.settings
        nbest = s.nbest > 1
        hyp = beam_search(
            model, inputs, max(s.beam, s.nbest), max_len, s.len_penalty, nbest, early_stopping=s.early_stopping, **ids
        )
        if nbest:
            hyp.nbest = [entries[: s.nbest] for entries in hyp.nbest]
        return hyp


@register_strategy("sampling")
class Sample(Strategy):
    """`nbest` samples per sentence under `settings.sampling` (default settings when the config names it)."""

    @classmethod
    def default(cls, settings):
        return settings.sampling is not None

    def search(self, model, inputs, max_len, ids):
        s = self.settings
        return sample(
            model,
            inputs,
            max_len,
            s.sampling or Sampling(),
            n=s.nbest,
            len_penalty=s.len_penalty,
            generator=s.generator,
            **ids,
        )
