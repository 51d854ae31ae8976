"""The "Simple" rule-based lexicon learner of Akyürek & Andreas (2021, section 4.2).

Each side of a pair is a set of tokens; c(x, y) counts the pairs with x in the source and y in the target.
With suff(x, y) = "y is in the target of every pair whose source has x" and nec(x, y) = "x is in the
source of every pair whose target has y":

1. keep (x, y) only if suff(x, y) (and c(x, y) > 0);
2. drop every y kept for more than `epsilon` sources (function words; the paper's C3);
3. for a y kept for several sources, keep only the necessary ones (the paper's C1 "winner") when
   `rule="reference"`: exactly one necessary source exists (how the authors' code does it), or
   `rule="paper"`: at least one exists (eqs. 18-19, C2);
4. score = c(x, y), plus 1 when x and y are the same string (so copying wins ties).

On Colors this gives exactly dax->RED, lug->BLUE, wif->GREEN, zup->YELLOW.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from structseq.errors import ConfigError
from structseq.lexicon.corpus import Corpus
from structseq.lexicon.lexicon import Lexicon, from_arrays
from structseq.registry import register_learner

RULES = ("reference", "paper")


@register_learner("simple")
def simple(data: Iterable, epsilon: int = 3, rule: str = "reference") -> Lexicon:
    """High-precision lexicon: sufficient, frequency-capped, necessity-preferring token pairs."""
    if rule not in RULES:
        raise ConfigError(f"rule must be one of {', '.join(RULES)}, not {rule!r}")
    if epsilon < 1:
        raise ConfigError(f"epsilon must be >= 1, not {epsilon}")
    corpus = Corpus.from_data(data)
    co = corpus.cooccurrence()
    ny = len(corpus.tgt_vocab)
    suff = co.count == co.count_x[co.x]
    nec = co.count == co.count_y[co.y]

    n_suff = np.bincount(co.y[suff], minlength=ny)
    keep = suff & (n_suff[co.y] <= epsilon)

    n_win = np.bincount(co.y[keep & nec], minlength=ny)
    contested = (n_suff[co.y] > 1) & ((n_win[co.y] == 1) if rule == "reference" else (n_win[co.y] >= 1))
    keep &= ~contested | nec

    x, y, c = co.x[keep], co.y[keep], co.count[keep].astype(float)
    src = np.asarray(corpus.src_vocab, dtype=object)[x]
    tgt = np.asarray(corpus.tgt_vocab, dtype=object)[y]
    c += src == tgt
    return from_arrays(corpus.src_vocab, corpus.tgt_vocab, x, y, c, "simple", {"epsilon": int(epsilon), "rule": rule})
