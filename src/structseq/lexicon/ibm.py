"""IBM Model 1 and Model 2 (fast_align's diagonal reparameterisation) lexicons, with vectorised EM.

Each direction is trained as in fast_align (Dyer et al. 2013): every target token y_i (1-based position
i of m) is generated from a source position a_i in 0..n, where 0 is a NULL word, with

- Model 1: p(a_i = j) = 1 / (n + 1) for every j including NULL;
- Model 2: p(a_i = 0) = p0 and p(a_i = j) = (1 - p0) exp(-lambda |i/m - j/n|) / Z_i for j >= 1
  (the paper's eq. 11); with `optimize_tension`, lambda gets fast_align's 8 gradient steps after every
  EM iteration but the first, clamped to [0.1, 14] (fast_align computes its posterior feature with a
  0-based target index and swaps m and n inside its closed-form expectation; we use the 1-based feature
  of eq. 11 in both, so optimised tensions differ slightly from fast_align's);

and p(y_i | x_{a_i}) = t(y_i | x_{a_i}). `iterations` counts passes over the data as fast_align does:
the first `iterations - 1` passes are E+M steps, the last only computes the Viterbi alignment
(ties go to NULL, then to the leftmost source position). The model is trained in both directions and
the two Viterbi alignments are symmetrised (intersection by default); the lexicon holds, for every
(source token, target token), the number of links between them.

Which one matches the paper: the authors' released lexicons (`intersect.align.o.json` in their code)
come from `fast_align -o` without `-d`, which is Model 1 with a NULL word (the tension flag has no effect
without the diagonal), intersected. That is `ibm1` here; `ibm2` is the model the paper describes.

The E-step runs over one flat array holding every (target token, candidate source position) cell of
the corpus, so each iteration is a handful of numpy gathers and `bincount`s.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from structseq.errors import ConfigError
from structseq.lexicon.corpus import DENSE_LIMIT, Corpus, count_keys
from structseq.lexicon.lexicon import Lexicon, from_arrays
from structseq.registry import register_learner

SYMMETRISATIONS = ("intersect", "union", "forward", "reverse")


@dataclass
class Alignment:
    """One direction's result: Viterbi links as flat indices into the corpus' source/target id arrays."""

    src_index: np.ndarray
    tgt_index: np.ndarray
    log_likelihoods: list[float] = field(default_factory=list)  # one per pass, before its M-step
    tension: float | None = None


def _digamma(x: np.ndarray) -> np.ndarray:
    import torch  # only the variational-Bayes update needs it

    return torch.special.digamma(torch.from_numpy(x)).numpy()


class DiagonalPrior:
    """fast_align's alignment prior tabulated once per (m, n) size class, so the E-step only gathers from it.

    Row (size class, target position i) holds n + 1 entries: NULL, then source positions j = 1..n.
    """

    def __init__(self, m: np.ndarray, n: np.ndarray, null_prob: float):
        sizes, self.size_of_pair, pairs = np.unique(
            np.stack([m, n], axis=1), axis=0, return_inverse=True, return_counts=True
        )
        self.size_of_pair = self.size_of_pair.reshape(-1)
        sm, sn = sizes[:, 0], sizes[:, 1]
        self.row_off = np.cumsum(sm) - sm  # first row of each size class
        row_cls = np.repeat(np.arange(len(sm)), sm)
        i = np.arange(len(row_cls)) - self.row_off[row_cls] + 1
        width = sn[row_cls] + 1
        self.row_start = np.cumsum(width) - width
        self.row_width = width
        cell_row = np.repeat(np.arange(len(row_cls)), width)
        j = np.arange(len(cell_row)) - self.row_start[cell_row]
        self.feat = -np.abs(i[cell_row] / sm[row_cls][cell_row] - j / np.maximum(sn[row_cls][cell_row], 1))
        self.feat[self.row_start] = 0.0
        self.row_pairs = pairs[row_cls].astype(float)  # corpus pairs of this size: weight of each row
        self.null_prob = null_prob

    def row_start_of(self, pair_of_token: np.ndarray, position: np.ndarray) -> np.ndarray:
        """First table entry of each target token's row (tokens given by pair and 0-based position)."""
        return self.row_start[self.row_off[self.size_of_pair[pair_of_token]] + position]

    def table(self, tension: float) -> np.ndarray:
        w = np.exp(tension * self.feat)
        w[self.row_start] = 0.0
        z = np.add.reduceat(w, self.row_start)
        w *= np.repeat((1.0 - self.null_prob) / np.where(z > 0, z, 1.0), self.row_width)
        w[self.row_start] = self.null_prob
        return w

    def expected_feature(self, tension: float) -> float:
        """Sum over the corpus' target tokens of E[feature] under the prior over j = 1..n (fast_align's
        model expectation in its tension gradient)."""
        w = np.exp(tension * self.feat)
        w[self.row_start] = 0.0
        z = np.add.reduceat(w, self.row_start)
        e = np.add.reduceat(w * self.feat, self.row_start) / np.where(z > 0, z, 1.0)
        return float(np.dot(e, self.row_pairs))


def align(
    corpus: Corpus,
    *,
    iterations: int = 5,
    diagonal: bool = False,
    tension: float = 4.0,
    optimize_tension: bool = False,
    null_prob: float = 0.08,
    variational_bayes: bool = False,
    vb_alpha: float = 0.01,
) -> Alignment:
    """Train one direction (target given source) and return its Viterbi alignment."""
    if iterations < 1:
        raise ConfigError(f"iterations must be >= 1, not {iterations}")
    if not 0.0 < null_prob < 1.0:
        raise ConfigError(f"null_prob must be in (0, 1), not {null_prob}")
    src_off, tgt_off = corpus.src_off, corpus.tgt_off
    n, m = np.diff(src_off), np.diff(tgt_off)
    num_pairs, num_tgt = len(n), len(corpus.tgt_ids)
    vs, vt = len(corpus.src_vocab), len(corpus.tgt_vocab)
    if num_tgt == 0:
        return Alignment(
            np.zeros(0, np.int64), np.zeros(0, np.int64), [0.0] * iterations, tension if diagonal else None
        )

    group, start, j, cell, cell_src = _cells(corpus)
    num, num_cells = len(j), len(cell_src)

    if diagonal:
        diag = DiagonalPrior(m, n, null_prob)
        tok_pair = np.repeat(np.arange(num_pairs), m)
        prior_index = np.repeat(diag.row_start_of(tok_pair, np.arange(num_tgt) - tgt_off[tok_pair]), group) + j
        del tok_pair
    del j

    t = np.full(num_cells, 1.0 / vt)
    a = np.take(diag.table(tension), prior_index) if diagonal else None
    log_uniform = float(np.log(group).sum())  # Model 1's alignment prior 1 / (n + 1), constant
    p = np.empty(num)
    lls: list[float] = []
    for it in range(iterations):
        np.take(t, cell, out=p)
        if diagonal:
            p *= a
        total = np.add.reduceat(p, start)
        lls.append(float(np.log(total).sum()) - (0.0 if diagonal else log_uniform))
        if it == iterations - 1:
            break
        p /= np.repeat(total, group)  # posteriors, in place
        counts = np.bincount(cell, weights=p, minlength=num_cells)
        if diagonal and optimize_tension and it > 0:
            posterior_by_entry = np.bincount(prior_index, weights=p, minlength=len(diag.feat))
            emp = float(np.dot(posterior_by_entry, diag.feat)) / num_tgt
            for _ in range(8):
                mod = diag.expected_feature(tension) / num_tgt
                tension = min(max(tension + (emp - mod) * 20.0, 0.1), 14.0)
            a = np.take(diag.table(tension), prior_index)
        if variational_bayes:
            row = np.bincount(cell_src, weights=counts + vb_alpha, minlength=vs + 1)
            t = np.exp(_digamma(counts + vb_alpha) - _digamma(row)[cell_src])
        else:
            row = np.bincount(cell_src, weights=counts, minlength=vs + 1)
            t = counts / np.where(row > 0, row, 1.0)[cell_src]

    src_index, tgt_index = _viterbi(p, group, start, src_off, m)
    return Alignment(src_index, tgt_index, lls, tension if diagonal else None)


def _cells(corpus: Corpus) -> tuple[np.ndarray, ...]:
    """The cells of `align`: one per (target token, source position j in 0..n); target token k owns the
    contiguous cells start[k] .. start[k] + n, and its first cell is the NULL word. Returns (group: n + 1 per
    target token, start, j of each cell, cell: the index of its (source word, target word) entry, cell_src: the
    source id of each entry, NULL = vs)."""
    src_off, m = corpus.src_off, np.diff(corpus.tgt_off)
    n, num_pairs = np.diff(src_off), len(src_off) - 1
    vs, vt = len(corpus.src_vocab), len(corpus.tgt_vocab)
    group = np.repeat(n + 1, m)
    start = np.cumsum(group) - group
    num = int(group.sum())
    # Source ids with a NULL (id vs) in front of every pair: pair k's block starts at src_off[k] + k.
    ext_off = src_off[:-1] + np.arange(num_pairs)
    ext = np.full(len(corpus.src_ids) + num_pairs, vs, dtype=np.int64)
    is_word = np.ones(len(ext), bool)
    is_word[ext_off] = False
    ext[is_word] = corpus.src_ids
    j = np.arange(num, dtype=np.int64) - np.repeat(start, group)
    key = np.take(ext, np.repeat(np.repeat(ext_off, m), group) + j)
    key *= vt
    key += np.repeat(corpus.tgt_ids, group)
    space = (vs + 1) * vt
    if space <= DENSE_LIMIT:
        cell_key, _ = count_keys(key, space)
        lookup = np.zeros(space, dtype=np.int64)
        lookup[cell_key] = np.arange(len(cell_key))
        cell = np.take(lookup, key)
        del lookup
    else:
        cell_key, cell = np.unique(key, return_inverse=True)
    return group, start, j, cell, cell_key // vt


def _viterbi(
    p: np.ndarray, group: np.ndarray, start: np.ndarray, src_off: np.ndarray, m: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(source token index, target token index) of each aligned target token: the first cell reaching its
    group's maximum posterior (NULL comes first, so it wins ties; a token aligned to NULL is left out)."""
    num = len(p)
    best_val = np.maximum.reduceat(p, start)
    cand = np.where(p == np.repeat(best_val, group), np.arange(num), num)
    best_j = np.minimum.reduceat(cand, start) - start
    tgt_index = np.flatnonzero(best_j > 0)
    src_index = np.repeat(src_off[:-1], m)[tgt_index] + best_j[tgt_index] - 1
    return src_index, tgt_index


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
    return from_arrays(
        corpus.src_vocab, corpus.tgt_vocab, keys // ny, keys % ny, counts.astype(float), method, settings
    )


@register_learner("ibm1")
def ibm1(
    data: Iterable,
    iterations: int = 5,
    symmetrisation: str = "intersect",
    variational_bayes: bool = False,
    vb_alpha: float = 0.01,
) -> Lexicon:
    """IBM Model 1 with a NULL word (= `fast_align` without `-d`, the setting behind the paper's numbers)."""
    return _ibm(
        data,
        "ibm1",
        symmetrisation,
        iterations=iterations,
        diagonal=False,
        variational_bayes=variational_bayes,
        vb_alpha=vb_alpha,
    )


@register_learner("ibm2")
def ibm2(
    data: Iterable,
    iterations: int = 5,
    symmetrisation: str = "intersect",
    tension: float = 4.0,
    optimize_tension: bool = True,
    null_prob: float = 0.08,
    variational_bayes: bool = False,
    vb_alpha: float = 0.01,
) -> Lexicon:
    """IBM Model 2 with fast_align's diagonal prior (`fast_align -d [-o]`), both directions symmetrised."""
    return _ibm(
        data,
        "ibm2",
        symmetrisation,
        iterations=iterations,
        diagonal=True,
        tension=tension,
        optimize_tension=optimize_tension,
        null_prob=null_prob,
        variational_bayes=variational_bayes,
        vb_alpha=vb_alpha,
    )
