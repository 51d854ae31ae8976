"""IBM Model 1 and Model 2 (fast_align's diagonal reparameterisation) lexicons, with vectorised EM.

Each direction is trained as in fast_align (Dyer et al. 2013): every target token y_i (1-based position
i of m) is generated from a source position a_i in 0..n, where 0 is a NULL word, with

- Model 1: p(a_i = j) = 1 / (n + 1) for every j including NULL;
- Model 2: p(a_i = 0) = p0 and p(a_i = j) = (1 - p0) exp(-lambda |i/m - j/n|) / Z_i for j >= 1
  (the paper's eq. 11); with `optimize_tension`, lambda gets fast_align's 8 gradient steps after every
  EM iteration but the first, clamped to [0.1, 14];

and p(y_i | x_{a_i}) = t(y_i | x_{a_i}). `iterations` counts passes over the data as fast_align does:
the first `iterations - 1` passes are E+M steps, the last only computes the Viterbi alignment
(ties go to NULL, then to the leftmost source position). The model is trained in both directions and
the two Viterbi alignments are symmetrised (intersection by default); the lexicon holds, for every
(source token, target token), the number of links between them.

Which one matches the paper: the authors' published IBMM2 numbers come from `fast_align -o` without
`-d`, which is Model 1 with a NULL word (the tension flag has no effect without the diagonal), and
intersection. That is `ibm1` here; `ibm2` is the model the paper describes.

The E-step runs over one flat array holding every (target token, candidate source position) cell of
the corpus, so each iteration is a handful of numpy gathers and `bincount`s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import torch

from structseq.errors import ConfigError
from structseq.lexicon.corpus import DENSE_LIMIT, Corpus, count_keys
from structseq.lexicon.lexicon import Lexicon, from_arrays

SYMMETRISATIONS = ("intersect", "union", "forward", "reverse")


@dataclass
class Alignment:
    """One direction's result: Viterbi links as flat indices into the corpus' source/target id arrays."""

    src_index: np.ndarray
    tgt_index: np.ndarray
    log_likelihoods: list[float] = field(default_factory=list)  # one per pass, before its M-step
    tension: float | None = None


def _digamma(x: np.ndarray) -> np.ndarray:
    return torch.special.digamma(torch.from_numpy(x)).numpy()


def _expected_feature(sizes: np.ndarray, counts: np.ndarray, tension: float) -> float:
    """Sum over target tokens of E_prior[-|i/m - j/n|] for the diagonal prior (fast_align's model feature)."""
    m, n = sizes[:, 0], sizes[:, 1]
    rows = np.repeat(np.arange(len(m)), m)  # one row per (size class, target position i)
    i = np.arange(len(rows)) - np.repeat(np.cumsum(m) - m, m) + 1
    cells = np.repeat(np.arange(len(rows)), n[rows])
    j = np.arange(len(cells)) - np.repeat(np.cumsum(n[rows]) - n[rows], n[rows]) + 1
    h = -np.abs(i[cells] / m[rows][cells] - j / n[rows][cells])
    w = np.exp(tension * h)
    z = np.bincount(cells, weights=w, minlength=len(rows))
    e = np.bincount(cells, weights=w * h, minlength=len(rows)) / z
    return float((e * counts[rows]).sum())


def align(corpus: Corpus, *, iterations: int = 5, diagonal: bool = False, tension: float = 4.0,
          optimize_tension: bool = False, null_prob: float = 0.08, variational_bayes: bool = False,
          vb_alpha: float = 0.01) -> Alignment:
    """Train one direction (target given source) and return its Viterbi alignment."""
    if iterations < 1:
        raise ConfigError(f"iterations must be >= 1, not {iterations}")
    if not 0.0 < null_prob < 1.0:
        raise ConfigError(f"null_prob must be in (0, 1), not {null_prob}")
    src_off, tgt_off = corpus.src_off, corpus.tgt_off
    n, m = np.diff(src_off), np.diff(tgt_off)
    num_tgt = len(corpus.tgt_ids)
    vs, vt = len(corpus.src_vocab), len(corpus.tgt_vocab)
    null_id = vs

    # One cell per (target token g, source position j in 0..n): contiguous groups of n + 1 cells.
    tok_pair = np.repeat(np.arange(len(n)), m)
    group = n[tok_pair] + 1
    start = np.cumsum(group) - group
    g = np.repeat(np.arange(num_tgt, dtype=np.int64), group)
    j = np.arange(len(g), dtype=np.int64) - start[g]
    pair = tok_pair[g]
    src_tok = np.where(j == 0, null_id, corpus.src_ids[np.minimum(src_off[pair] + j - 1, len(corpus.src_ids) - 1)])
    key = src_tok * vt + corpus.tgt_ids[g]
    space = (vs + 1) * vt
    if space <= DENSE_LIMIT:
        cell_key, _ = count_keys(key, space)
        lookup = np.zeros(space, dtype=np.int64)
        lookup[cell_key] = np.arange(len(cell_key))
        cell = lookup[key]
        del lookup
    else:
        cell_key, cell = np.unique(key, return_inverse=True)
    del key, src_tok
    cell_src = cell_key // vt
    num_cells = len(cell_key)

    nonnull = j > 0
    if diagonal:
        mm, nn = m[pair].astype(float), n[pair].astype(float)
        i_pos = (g - tgt_off[pair] + 1).astype(float)
        feat = np.where(nonnull, -np.abs(i_pos / mm - j / nn), 0.0)
        del mm, nn, i_pos
        sizes, size_counts = np.unique(np.stack([m, n], axis=1), axis=0, return_counts=True)
    del pair

    def prior(lam: float) -> np.ndarray:
        if not diagonal:
            return 1.0 / group[g]
        w = np.where(nonnull, np.exp(lam * feat), 0.0)
        z = np.bincount(g, weights=w, minlength=num_tgt)
        return np.where(nonnull, (1.0 - null_prob) * w / z[g], null_prob)

    t = np.full(num_cells, 1.0 / vt)
    a = prior(tension)
    lls: list[float] = []
    for it in range(iterations):
        p = t[cell] * a
        total = np.bincount(g, weights=p, minlength=num_tgt)
        lls.append(float(np.log(total).sum()))
        if it == iterations - 1:
            break
        post = p / total[g]
        del p
        counts = np.bincount(cell, weights=post, minlength=num_cells)
        if diagonal and optimize_tension and it > 0:
            emp = float((post * feat).sum()) / num_tgt
            for _ in range(8):
                mod = _expected_feature(sizes, size_counts, tension) / num_tgt
                tension = min(max(tension + (emp - mod) * 20.0, 0.1), 14.0)
            a = prior(tension)
        del post
        if variational_bayes:
            row = np.bincount(cell_src, weights=counts + vb_alpha, minlength=vs + 1)
            t = np.exp(_digamma(counts + vb_alpha) - _digamma(row)[cell_src])
        else:
            row = np.bincount(cell_src, weights=counts, minlength=vs + 1)
            t = counts / np.where(row > 0, row, 1.0)[cell_src]

    # Viterbi: the first cell reaching the group maximum (NULL is first, so it wins ties).
    best_val = np.maximum.reduceat(p, start)
    cand = np.where(p == best_val[g], np.arange(len(p)), len(p))
    best = np.minimum.reduceat(cand, start)
    best_j = j[best]
    linked = best_j > 0
    tgt_index = np.flatnonzero(linked)
    src_index = src_off[tok_pair[tgt_index]] + best_j[linked] - 1
    return Alignment(src_index, tgt_index, lls, tension if diagonal else None)


def symmetrise(corpus: Corpus, forward: Alignment, reverse: Alignment, how: str = "intersect") -> np.ndarray:
    """Combine the two directions; returns link keys src_index * num_tgt + tgt_index (sorted, unique)."""
    num_tgt = len(corpus.tgt_ids)
    fwd = forward.src_index * num_tgt + forward.tgt_index
    rev = reverse.tgt_index * num_tgt + reverse.src_index  # reverse ran on the swapped corpus
    if how == "intersect":
        return np.intersect1d(fwd, rev)
    if how == "union":
        return np.union1d(fwd, rev)
    if how == "forward":
        return np.unique(fwd)
    if how == "reverse":
        return np.unique(rev)
    raise ConfigError(f"symmetrisation must be one of {', '.join(SYMMETRISATIONS)}, not {how!r}")


def _ibm(data: Iterable, method: str, symmetrisation: str, **opts) -> Lexicon:
    if symmetrisation not in SYMMETRISATIONS:
        raise ConfigError(f"symmetrisation must be one of {', '.join(SYMMETRISATIONS)}, not {symmetrisation!r}")
    corpus = Corpus.from_data(data)
    forward = align(corpus, **opts)
    reverse = align(corpus.swapped(), **opts)
    links = symmetrise(corpus, forward, reverse, symmetrisation)
    num_tgt = len(corpus.tgt_ids)
    x = corpus.src_ids[links // num_tgt]
    y = corpus.tgt_ids[links % num_tgt]
    ny = len(corpus.tgt_vocab)
    keys, counts = count_keys(x * ny + y, len(corpus.src_vocab) * ny)
    settings = {k: v for k, v in opts.items() if k != "diagonal"}
    settings["symmetrisation"] = symmetrisation
    if opts.get("diagonal"):
        settings["final_tension"] = {"forward": forward.tension, "reverse": reverse.tension}
    return from_arrays(corpus.src_vocab, corpus.tgt_vocab, keys // ny, keys % ny, counts.astype(float),
                       method, settings)


def ibm1(data: Iterable, iterations: int = 5, symmetrisation: str = "intersect",
         variational_bayes: bool = False, vb_alpha: float = 0.01) -> Lexicon:
    """IBM Model 1 with a NULL word (= `fast_align` without `-d`, the setting behind the paper's numbers)."""
    return _ibm(data, "ibm1", symmetrisation, iterations=iterations, diagonal=False,
                variational_bayes=variational_bayes, vb_alpha=vb_alpha)


def ibm2(data: Iterable, iterations: int = 5, symmetrisation: str = "intersect", tension: float = 4.0,
         optimize_tension: bool = True, null_prob: float = 0.08, variational_bayes: bool = False,
         vb_alpha: float = 0.01) -> Lexicon:
    """IBM Model 2 with fast_align's diagonal prior (`fast_align -d [-o]`), both directions symmetrised."""
    return _ibm(data, "ibm2", symmetrisation, iterations=iterations, diagonal=True, tension=tension,
                optimize_tension=optimize_tension, null_prob=null_prob,
                variational_bayes=variational_bayes, vb_alpha=vb_alpha)
