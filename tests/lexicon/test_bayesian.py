"""Bayesian lexicon: the MH sampler against a brute-force posterior over every lexicon of a tiny corpus."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from structseq.errors import ConfigError
from structseq.lexicon import bayesian
from structseq.lexicon.bayesian import MHSampler
from structseq.lexicon.corpus import Corpus
from tests.fixtures.tiny import COLOR_WORDS, colors_pairs

# Source vocabulary {a, b, c}, target {A, B, C}: 6 co-occurring pairs, so 64 lexicons to enumerate.
TINY = [("a b", "A B"), ("a", "A"), ("b c", "B"), ("c", "C B"), ("a a", "A")]
HYPER = {"alpha": 0.5, "gamma": 0.95, "kappa": 0.1}


def brute_force(data, alpha, gamma, kappa):
    """Independent plain-Python reading of the documented model: {lexicon: log posterior}, and q."""
    pairs = [(set(s.split()), set(t.split())) for s, t in data]
    vocab = {x for xs, _ in pairs for x in xs}
    co = Counter((x, y) for xs, ys in pairs for x in xs for y in ys)
    support = sorted(co)
    q = {e: co[e] / sum(co.values()) for e in support}
    post = {}
    for bits in itertools.product([False, True], repeat=len(support)):
        lex = frozenset(e for e, b in zip(support, bits) if b)
        deg = Counter(y for _, y in lex)
        linked_src = {x for x, _ in lex}
        z = sum(kappa if x in linked_src else 1.0 for x in vocab)
        lp = -alpha * len(lex)
        for xs, ys in pairs:
            for x in xs:
                p_nr = (kappa if x in linked_src else 1.0) / z
                p_r = sum(1.0 / deg[y] for y in ys if (x, y) in lex) / len(ys)
                lp += math.log((1 - gamma) * p_nr + gamma * p_r)
        post[lex] = lp
    return support, q, post


@pytest.fixture(scope="module")
def exact():
    support, q, post = brute_force(TINY, **HYPER)
    sampler = MHSampler(Corpus.from_data(TINY), **HYPER)
    vocab_s, vocab_t = sampler.corpus.src_vocab, sampler.corpus.tgt_vocab
    entries = [(vocab_s[x], vocab_t[y]) for x, y in zip(sampler.entry_x, sampler.entry_y)]
    assert sorted(entries) == support
    return sampler, entries, q, post


def mask(entries, lex):
    return np.array([e in lex for e in entries])


def test_log_posterior_matches_brute_force(exact):
    sampler, entries, _, post = exact
    norm = None
    for lex, lp in post.items():
        got = sampler.log_posterior(mask(entries, lex))
        norm = got - lp if norm is None else norm
        assert got - lp == pytest.approx(norm, abs=1e-9)  # equal up to the constant


def test_acceptance_ratio_satisfies_detailed_balance_exactly(exact):
    sampler, entries, q, post = exact
    for lex in post:
        sampler.reset(mask(entries, lex))
        for k, e in enumerate(entries):
            other = lex ^ {e}
            if e in lex:  # deletion proposed with 1/2 * 1/|l|; the reverse insertion with 1/2 * q(e)
                fwd, back = 0.5 / len(lex), 0.5 * q[e]
            else:
                fwd, back = 0.5 * q[e], 0.5 / len(other)
            expected = post[other] + math.log(back) - post[lex] - math.log(fwd)
            ratio, _ = sampler.log_acceptance_ratio(k)
            assert ratio == pytest.approx(expected, abs=1e-9)
            # pi(l) T(l -> l') == pi(l') T(l' -> l) with T = proposal * min(1, ratio)
            flow = post[lex] + math.log(fwd) + min(0.0, ratio)
            reverse = post[other] + math.log(back) + min(0.0, -ratio)
            assert flow == pytest.approx(reverse, abs=1e-9)


def test_sampled_frequencies_match_exact_marginals(exact):
    _, entries, _, post = exact
    top = max(post.values())
    weights = {lex: math.exp(lp - top) for lex, lp in post.items()}
    total = sum(weights.values())
    marginal = {e: sum(w for lex, w in weights.items() if e in lex) / total for e in entries}
    lex = bayesian(TINY, **HYPER, burn_in=500, thin=2, samples=15000, runs=2, seed=1)
    for (s, t), p in marginal.items():
        assert lex.get(s, {}).get(t, 0.0) == pytest.approx(p, abs=0.03), (s, t)


def test_incremental_updates_agree_with_full_recomputation():
    data = colors_pairs("dax", "lug", "wif blicket dax", "dax kiki lug", "lug fep", "wif kiki dax blicket lug")
    sampler = MHSampler(Corpus.from_data(data))
    rng = np.random.default_rng(0)
    for _ in range(300):
        e = int(rng.integers(sampler.num_entries))
        before = sampler.log_likelihood(sampler.state)
        delta, commit = sampler._delta(e)
        sampler._commit(e, commit)
        assert delta == pytest.approx(sampler.log_likelihood(sampler.state) - before, abs=1e-9)
        assert sorted(sampler.members) == np.flatnonzero(sampler.state).tolist()


def test_seeded_and_finds_the_colour_words():
    data = colors_pairs("dax", "lug", "wif", "zup", "lug fep", "dax fep", "lug blicket wif", "dax kiki lug")
    a, b = bayesian(data, seed=3), bayesian(data, seed=3)
    assert a == b and a.settings["seed"] == 3
    best = a.best()
    assert {w: best[w] for w in COLOR_WORDS} == COLOR_WORDS
    assert all(0.0 < v <= 1.0 for _, _, v in a.pairs())


def test_bad_settings():
    with pytest.raises(ConfigError, match="thin"):
        bayesian(TINY, thin=0)
    with pytest.raises(ConfigError, match="gamma"):
        bayesian(TINY, gamma=1.0)
