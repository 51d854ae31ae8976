"""Pointwise mutual information lexicon (Akyürek & Andreas 2021, eq. 13).

pmi(x, y) = log c(x, y) - log c(x) - log c(y) + log |D| over set counts (each side of a pair is a set).
Only co-occurring pairs are stored; absent pairs have pmi = -inf, which is what a row-wise
softmax(pmi / tau) gives them in the limit anyway.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from structseq.errors import ConfigError
from structseq.lexicon.corpus import Corpus
from structseq.lexicon.lexicon import Lexicon, from_arrays
from structseq.registry import register_learner


@register_learner("pmi")
def pmi(data: Iterable, top_k: int | None = None) -> Lexicon:
    """PMI of every co-occurring pair; `top_k` keeps only each source's k best targets (smaller files)."""
    if top_k is not None and top_k < 1:
        raise ConfigError(f"top_k must be >= 1 or None, not {top_k}")
    corpus = Corpus.from_data(data)
    co = corpus.cooccurrence()
    score = np.log(co.count) - np.log(co.count_x[co.x]) - np.log(co.count_y[co.y]) + np.log(co.pairs)
    x, y = co.x, co.y
    if top_k is not None:
        # Rank within each source row by decreasing score (ties by target id), keep the first k.
        order = np.lexsort((y, -score, x))
        x, y, score = x[order], y[order], score[order]
        starts = np.searchsorted(x, x, side="left")
        rank = np.arange(len(x)) - starts
        x, y, score = x[rank < top_k], y[rank < top_k], score[rank < top_k]
    return from_arrays(corpus.src_vocab, corpus.tgt_vocab, x, y, score, "pmi", {"top_k": top_k})
