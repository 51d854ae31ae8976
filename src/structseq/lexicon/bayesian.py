"""Bayesian cross-situational lexicon (Frank, Goodman & Tenenbaum 2007) sampled with Metropolis-Hastings.

No public implementation exists; Akyürek & Andreas (2021, section 4.1 and appendix C) give the model
only in outline. This module implements exactly the following.

Data. Each pair k is a set X_k of distinct source tokens (the words) and a set Y_k of distinct target
tokens (the meanings present in the situation).

Lexicon. A set l of (x, y) entries drawn from the support S = {(x, y): c(x, y) > 0}, where c(x, y) is
the number of pairs with x in X_k and y in Y_k (no other entry can ever be proposed).

Prior. log p(l) = -alpha |l| + const (description length). Section 4.1 writes exp(-|l|); we read the
appendix's alpha = 2 as this weight, as in Frank et al.'s exp(-alpha |l|).

Likelihood. Write deg(y) = |{x: (x, y) in l}|. The speaker's intention is the whole meaning set Y_k
(Frank et al. sum over subsets of the situation; the paper's eq. 14 sums over all of y), and each word
x in X_k is generated independently:

    p(x | Y_k, l) = (1 - gamma) p_NR(x | l) + gamma (1 / |Y_k|) sum_{y in Y_k} [(x, y) in l] / deg(y)

that is eq. 14 with Frank et al.'s 1/|I| averaging over the intended meanings, and p_R(x | y, l) =
[(x, y) in l] / deg(y) (uniform over the words the lexicon gives y; 0 for every x when deg(y) = 0).
The non-referential distribution is p_NR(x | l) = w(x) / Z, with w(x) = kappa if x has an entry in l
and 1 otherwise, and Z = sum of w over the source vocabulary. As in the paper's equation, meanings
without an entry keep their share gamma / |Y_k| unused (the model is deficient), so the empty lexicon
pays (1 - gamma) on every word and entries are cheap, in line with the paper's remark that its Bayesian
lexicons have too many entries. log p(D | l) = sum_k sum_{x in X_k} log p(x | Y_k, l); gamma = 0.95, kappa = 0.1.

Sampler (the paper's appendix C). From the current l, with probability 1/2 propose an insertion: draw
(x, y) from S with probability q(x, y) = c(x, y) / sum c (the empirical joint co-occurrence); if it is
already in l the chain stays. Otherwise propose a deletion: an entry of l uniformly at random (stay if
l is empty). The Hastings ratio of inserting e into l is (1 / (|l| + 1)) / q(e), of deleting e from l
it is q(e) |l|. Each chain starts from the empty lexicon, discards `burn_in` steps, then records the
state every `thin` steps until it has `samples` states; `runs` seeded chains are pooled. The score of
(x, y) is its posterior frequency: the fraction of recorded states containing it. The paper gives the
burn-in (1000), the thinning (10) and the 5 runs but not the chain length; `samples=100` per chain
(2000 steps) is our default.

Cost: toggling (x, y) recomputes only the word tokens of pairs that contain y (all tokens when x gains its
first or loses its last entry, since Z changes), with vectorised numpy over those tokens.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from structseq.errors import ConfigError
from structseq.lexicon.corpus import Corpus, product_index
from structseq.lexicon.lexicon import Lexicon, from_arrays
from structseq.registry import register_learner


class MHSampler:
    """The posterior over lexicons for one corpus, with the incremental state of one chain."""

    def __init__(self, corpus: Corpus, alpha: float = 2.0, gamma: float = 0.95, kappa: float = 0.1):
        if not 0.0 <= gamma < 1.0:
            raise ConfigError(f"gamma must be in [0, 1), not {gamma}")
        if not kappa > 0.0:
            raise ConfigError(f"kappa must be > 0, not {kappa}")
        self.alpha, self.gamma, self.kappa = float(alpha), float(gamma), float(kappa)
        self.corpus = corpus
        co = corpus.cooccurrence()
        self.entry_x, self.entry_y = co.x, co.y
        self.num_entries = len(co.x)
        self.q = co.count / co.count.sum()
        self.log_q = np.log(self.q)
        self.nx, self.ny = len(corpus.src_vocab), len(corpus.tgt_vocab)

        xs, xo = corpus.source_sets()
        ys, yo = corpus.target_sets()
        self.tok_x = xs
        self.tok_pair = np.repeat(np.arange(len(corpus)), np.diff(xo))
        self.num_pairs = len(corpus)
        # Word tokens of the pairs containing y, grouped by y (CSR).
        iy, it = product_index(yo, xo)
        order = np.argsort(ys[iy], kind="stable")
        self.y_tokens = it[order].astype(np.int64)
        self.y_tokens_off = np.searchsorted(ys[iy][order], np.arange(self.ny + 1))
        self.tok_meanings = np.maximum(np.diff(yo), 1)[self.tok_pair].astype(float)  # |Y_k| per word token
        # Cross product (token, y) for from-scratch evaluation.
        self._prod_tok, iy2 = product_index(xo, yo)
        self._prod_y = ys[iy2]
        self.reset()

    # ---- full evaluation (used to initialise the chain and by tests) ----
    def _terms(self, wx: np.ndarray, z: float, ref: np.ndarray, tok: np.ndarray | slice) -> np.ndarray:
        """log p(x | Y_k, l) of word tokens `tok` given their w(x), Z and referential sums."""
        return np.log((1.0 - self.gamma) * wx / z + self.gamma * ref / self.tok_meanings[tok])

    def _caches(self, state: np.ndarray):
        deg_y = np.bincount(self.entry_y[state], minlength=self.ny)
        deg_x = np.bincount(self.entry_x[state], minlength=self.nx)
        w = np.where(deg_x > 0, self.kappa, 1.0)
        z = float(w.sum())
        keys = np.sort(self.entry_x[state] * self.ny + self.entry_y[state])
        pk = self.tok_x[self._prod_tok] * self.ny + self._prod_y
        pos = np.minimum(np.searchsorted(keys, pk), max(len(keys) - 1, 0))
        linked = (keys[pos] == pk) if len(keys) else np.zeros(len(pk), bool)
        ref = np.bincount(
            self._prod_tok[linked], weights=1.0 / deg_y[self._prod_y[linked]], minlength=len(self.tok_x)
        ).astype(float)  # float even when nothing is linked
        return deg_y, deg_x, w, z, ref

    def log_likelihood(self, state: np.ndarray) -> float:
        """log p(D | l) from scratch for a boolean mask over the support entries."""
        state = np.asarray(state, dtype=bool)
        _, _, w, z, ref = self._caches(state)
        return float(self._terms(w[self.tok_x], z, ref, slice(None)).sum())

    def log_posterior(self, state: np.ndarray) -> float:
        """Unnormalised log p(l | D)."""
        state = np.asarray(state, dtype=bool)
        return self.log_likelihood(state) - self.alpha * int(state.sum())

    # ---- chain state ----
    def reset(self, state: np.ndarray | None = None) -> None:
        """Set the chain to a lexicon (a boolean mask over support entries; default empty)."""
        self.state = np.zeros(self.num_entries, bool) if state is None else np.array(state, dtype=bool)
        self.deg_y, self.deg_x, self.w, self.z, self.ref = self._caches(self.state)
        self.term = self._terms(self.w[self.tok_x], self.z, self.ref, slice(None))
        self.members = [int(e) for e in np.flatnonzero(self.state)]
        self.slot = {e: i for i, e in enumerate(self.members)}
        self.linked_x: dict[int, set[int]] = {}
        for e in self.members:
            self.linked_x.setdefault(int(self.entry_y[e]), set()).add(int(self.entry_x[e]))
        self._mark = np.zeros(self.nx, bool)

    def _delta(self, e: int):
        """Change of log-likelihood if entry e is toggled, with everything needed to commit it."""
        x0, y0 = int(self.entry_x[e]), int(self.entry_y[e])
        inserting = not self.state[e]
        d = int(self.deg_y[y0])
        d2 = d + (1 if inserting else -1)
        toks = self.y_tokens[self.y_tokens_off[y0] : self.y_tokens_off[y0 + 1]]
        xa = self.tok_x[toks]
        linked = self.linked_x.get(y0, set())
        mark = self._mark
        if linked:
            mark[list(linked)] = True
        old = mark[xa]
        mark[x0] = inserting
        new = mark[xa]
        mark[list(linked | {x0})] = False
        ref_a = self.ref[toks] - (old / d if d else 0.0) + (new / d2 if d2 else 0.0)
        dx2 = int(self.deg_x[x0]) + (1 if inserting else -1)
        w_changes = (self.deg_x[x0] > 0) != (dx2 > 0)
        if not w_changes:
            new_a = self._terms(self.w[xa], self.z, ref_a, toks)
            delta = float(new_a.sum() - self.term[toks].sum())
            return delta, (x0, y0, inserting, d2, dx2, toks, ref_a, None, new_a)
        w2 = self.w.copy()
        w2[x0] = self.kappa if dx2 > 0 else 1.0
        z2 = self.z + (w2[x0] - self.w[x0])
        ref = self.ref.copy()
        ref[toks] = ref_a
        new_all = self._terms(w2[self.tok_x], z2, ref, slice(None))
        delta = float(new_all.sum() - self.term.sum())
        return delta, (x0, y0, inserting, d2, dx2, toks, ref_a, (w2, z2), new_all)

    def log_acceptance_ratio(self, e: int) -> tuple[float, tuple]:
        """log of [p(l') q(l' -> l)] / [p(l) q(l -> l')] for toggling entry e of the current lexicon."""
        delta, commit = self._delta(e)
        size = len(self.members)
        if self.state[e]:  # deletion: forward q = 1/2 * 1/|l|, backward q = 1/2 * q(e)
            ratio = delta + self.alpha + self.log_q[e] + math.log(size)
        else:  # insertion: forward q = 1/2 * q(e), backward q = 1/2 * 1/(|l| + 1)
            ratio = delta - self.alpha - math.log(size + 1) - self.log_q[e]
        return ratio, commit

    def _commit(self, e: int, commit: tuple) -> None:
        x0, y0, inserting, d2, dx2, toks, ref_a, wz, new_terms = commit
        self.ref[toks] = ref_a
        if wz is None:
            self.term[toks] = new_terms
        else:
            self.w, self.z = wz
            self.term = new_terms
        self.deg_y[y0] = d2
        self.deg_x[x0] = dx2
        self.state[e] = inserting
        if inserting:
            self.linked_x.setdefault(y0, set()).add(x0)
            self.slot[e] = len(self.members)
            self.members.append(e)
        else:
            self.linked_x[y0].discard(x0)
            i = self.slot.pop(e)
            last = self.members.pop()
            if last != e:
                self.members[i] = last
                self.slot[last] = i

    def run(self, steps: int, burn_in: int, thin: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
        """Run the chain; returns (per-entry count of recorded states containing it, states recorded)."""
        insert = rng.random(steps) < 0.5
        proposals = rng.choice(self.num_entries, size=steps, p=self.q)
        u_pick = rng.random(steps)
        log_u = np.log(rng.random(steps))
        freq = np.zeros(self.num_entries, np.int64)
        since = np.zeros(self.num_entries, np.int64)
        taken = 0
        for s in range(steps):
            if insert[s]:
                e = int(proposals[s])
                if self.state[e]:
                    e = -1
            else:
                e = self.members[int(u_pick[s] * len(self.members))] if self.members else -1
            if e >= 0:
                ratio, commit = self.log_acceptance_ratio(e)
                if ratio >= 0.0 or log_u[s] < ratio:
                    if self.state[e]:
                        freq[e] += taken - since[e]
                    else:
                        since[e] = taken
                    self._commit(e, commit)
            if s + 1 > burn_in and (s + 1 - burn_in) % thin == 0:
                taken += 1
        for e in self.members:
            freq[e] += taken - since[e]
        return freq, taken


@register_learner("bayesian")
def bayesian(
    data: Iterable,
    alpha: float = 2.0,
    gamma: float = 0.95,
    kappa: float = 0.1,
    burn_in: int = 1000,
    thin: int = 10,
    samples: int = 100,
    runs: int = 5,
    seed: int = 0,
) -> Lexicon:
    """Posterior entry frequencies of the Frank et al. (2007) lexicon model, pooled over `runs` chains."""
    for name, value, low in (("burn_in", burn_in, 0), ("thin", thin, 1), ("samples", samples, 1), ("runs", runs, 1)):
        if value < low:
            raise ConfigError(f"{name} must be >= {low}, not {value}")
    corpus = Corpus.from_data(data)
    sampler = MHSampler(corpus, alpha, gamma, kappa)
    steps = burn_in + thin * samples
    total = np.zeros(sampler.num_entries, np.int64)
    recorded = 0
    for child in np.random.SeedSequence(seed).spawn(runs):
        sampler.reset()
        freq, taken = sampler.run(steps, burn_in, thin, np.random.default_rng(child))
        total += freq
        recorded += taken
    keep = total > 0
    return from_arrays(
        corpus.src_vocab,
        corpus.tgt_vocab,
        sampler.entry_x[keep],
        sampler.entry_y[keep],
        total[keep] / recorded,
        "bayesian",
        {
            "alpha": alpha,
            "gamma": gamma,
            "kappa": kappa,
            "burn_in": burn_in,
            "thin": thin,
            "samples": samples,
            "runs": runs,
            "seed": seed,
        },
    )
