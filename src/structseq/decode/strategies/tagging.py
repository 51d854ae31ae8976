"""Strategies over a tagger: one output per word, each word's k best (k = decode.beam), searched over a
category tree per word (interface "tree": `tree-greedy`, `tree-beam`, the searches of
`structseq.decode.tree` over the model's `encoder(inputs)` word states) or over per-word label scores
(interface "tags": `tag-kbest`, the model's `kbest(inputs, k)`, words counted by `inputs["word_mask"]`).

A tagger strategy's `search(model, inputs)` gives per sentence its words' (hypothesis, score) lists, best
first, and whether each word's choice was repaired (ill-formed unconstrained); `outputs` reads each
hypothesis as the task's tag (`Task.output_tag`: a label id, or a tree's {position: symbol id}) and drops
those that are not well formed.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from structseq.decode.strategies import Strategy
from structseq.decode.tree import greedy_trees, kbest_trees
from structseq.errors import ConfigError
from structseq.registry import register_strategy

#: per sentence: per word its (hypothesis, score) list, best first; per word whether it was repaired
Searched = list[tuple[list[list[tuple[Any, float]]], list[bool]]]


class Tagging(NamedTuple):
    """A sentence's outputs from a tagger strategy (what `structseq.decode.run` returns for it): per word
    its k best (tag, log-probability), best first, and whether the search repaired an ill-formed choice."""

    kbest: list[list[tuple[str, float]]]
    repaired: list[bool]


class TagStrategy(Strategy):
    """A search of one output per word: `search(model, inputs)` -> `Searched`; k = max(1, settings.beam)."""

    interface = "tree"
    reads = ("beam",)  # k: each word's k best

    @property
    def k(self) -> int:
        return max(1, self.settings.beam)

    def outputs(self, model, inputs, task, vocabs, decode_cfg) -> list[Tagging]:
        if self.settings.nbest > 1:
            raise ConfigError("'--nbest': a tagger's k-best lists are per word (decode.beam), not per sentence")
        out = []
        for words, repaired in self.search(model, inputs):
            tagged = ([(task.output_tag(h, vocabs), s) for h, s in hyps] for hyps in words)
            out.append(Tagging([[(t, s) for t, s in tags if t is not None] for tags in tagged], repaired))
        return out


@register_strategy("tree-greedy")
class TreeGreedy(TagStrategy):
    """The most probable well-formed symbol at every node (`tree.greedy_trees`), with the words whose
    unconstrained choice was ill-formed; the default for a tree at beam 1."""

    @classmethod
    def default(cls, settings):
        return settings.beam <= 1

    def search(self, model, inputs, max_len=None, ids=None) -> Searched:
        h, mask = model.encoder(inputs)
        W = mask.shape[1]
        r = {name: v.cpu().numpy() for name, v in greedy_trees(model, h, mask).items()}
        order = np.argsort(r["word"], kind="stable")
        per_word = {}
        for g in np.split(order, np.flatnonzero(np.diff(r["word"][order])) + 1):
            if len(g):
                tree = {int(p): int(s) for p, s in zip(r["pos"][g], r["sym"][g])}
                per_word[int(r["word"][g[0]])] = ((tree, float(r["score"][g].sum())), bool(r["repaired"][g].any()))
        return [
            ([[per_word[b * W + w][0]] for w in range(n)], [per_word[b * W + w][1] for w in range(n)])
            for b, n in enumerate(mask.sum(1).tolist())
        ]


@register_strategy("tree-beam")
class TreeBeam(TagStrategy):
    """The k best trees of each word (`tree.kbest_trees`: k lanes, each word's k best partial trees kept
    depth by depth); the default for a tree at beam > 1."""

    @classmethod
    def default(cls, settings):
        return settings.beam > 1

    def search(self, model, inputs, max_len=None, ids=None) -> Searched:
        h, mask = model.encoder(inputs)
        r = {name: v.cpu().numpy() for name, v in kbest_trees(model, h, mask, self.k).items()}
        out = []
        for b, n in enumerate(mask.sum(1).tolist()):
            words = []
            for w in range(n):
                hyps = []
                for j in range(self.k):
                    s = float(r["score"][b, w, j])
                    if math.isfinite(s):
                        pos, sym = r["pos"][b, w, j], r["sym"][b, w, j]
                        hyps.append(({int(p): int(x) for p, x in zip(pos, sym) if p > 0}, s))
                words.append(hyps)
            out.append((words, [False] * n))
        return out


@register_strategy("tag-kbest")
class TagKbest(TagStrategy):
    """The k most probable labels of each word, exact (a per-word top-k); the default for such a tagger."""

    interface = "tags"

    @classmethod
    def default(cls, settings):
        return True

    def search(self, model, inputs, max_len=None, ids=None) -> Searched:
        scores, labels = model.kbest(inputs, self.k)
        s, i = scores.cpu().tolist(), labels.cpu().tolist()
        return [
            ([list(zip(i[b][w], s[b][w])) for w in range(n)], [False] * n)
            for b, n in enumerate(inputs["word_mask"].sum(1).tolist())
        ]
