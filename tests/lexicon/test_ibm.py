"""IBM Model 1/2 EM: monotone likelihood, recovery of a known lexicon, symmetric intersection."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structseq.errors import ConfigError
from structseq.lexicon import ibm1, ibm2
from structseq.lexicon.corpus import Corpus
from structseq.lexicon.ibm import align, symmetrise
from tests.fixtures.tiny import COLOR_WORDS, COLORS_TRAIN

TRUTH = {f"s{i}": f"T{i}" for i in range(12)}


def synthetic(seed: int, monotone: bool, pairs: int = 400) -> list[tuple[list[str], list[str]]]:
    """Sentences over a one-to-one lexicon; targets are word-by-word translations, shuffled unless monotone."""
    rng = np.random.default_rng(seed)
    words = list(TRUTH)
    data = []
    for _ in range(pairs):
        src = [words[i] for i in rng.choice(len(words), size=rng.integers(2, 8), replace=False)]
        tgt = [TRUTH[w] for w in src]
        if not monotone:
            tgt = [tgt[i] for i in rng.permutation(len(tgt))]
        data.append((src, tgt))
    return data


def assert_monotone(lls):
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(lls, lls[1:])), lls


@pytest.mark.parametrize("diagonal", [False, True])
def test_em_log_likelihood_never_decreases(diagonal):
    corpus = Corpus.from_data(synthetic(0, monotone=False, pairs=200) + [("the s1 s2", "T1 T2"), ("s3 the", "T3 X")])
    for c in (corpus, corpus.swapped()):
        result = align(c, iterations=12, diagonal=diagonal, optimize_tension=False)
        assert len(result.log_likelihoods) == 12
        assert_monotone(result.log_likelihoods)
        assert result.log_likelihoods[-1] > result.log_likelihoods[0]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.sampled_from("abcde"), min_size=1, max_size=5),
            st.lists(st.sampled_from("VWXYZ"), min_size=1, max_size=5),
        ),
        min_size=1,
        max_size=12,
    ),
    st.booleans(),
)
def test_em_monotone_on_random_corpora(pairs, diagonal):
    result = align(Corpus.from_data(pairs), iterations=8, diagonal=diagonal)
    assert_monotone(result.log_likelihoods)


@pytest.mark.parametrize("learner, monotone", [(ibm1, False), (ibm2, True), (ibm2, False)])
def test_recovers_a_known_one_to_one_lexicon(learner, monotone):
    lex = learner(synthetic(1, monotone=monotone))
    assert lex.best() == TRUTH


def test_model1_on_colors_maps_only_colour_words():
    # The setting behind the paper's IBM numbers (fast_align -o, no -d) is Model 1; the paper reports
    # that it maps only colour words on Colors, like Simple.
    assert ibm1(COLORS_TRAIN).best() == COLOR_WORDS


@pytest.mark.parametrize("learner", [ibm1, ibm2])
def test_intersection_is_symmetric(learner):
    data = synthetic(2, monotone=False, pairs=150) + [("s1 extra", "T1"), ("s2", "T2 junk")]
    swapped = [(t, s) for s, t in data]
    assert learner(swapped).transpose().entries == learner(data).entries
    assert (
        learner(swapped, symmetrisation="forward").transpose().entries
        == learner(data, symmetrisation="reverse").entries
    )


def test_symmetrisations_nest():
    data = synthetic(3, monotone=False, pairs=100)
    inter, union = ibm1(data), ibm1(data, symmetrisation="union")
    fwd, rev = ibm1(data, symmetrisation="forward"), ibm1(data, symmetrisation="reverse")
    for s, t, v in inter.pairs():
        assert v <= min(fwd[s][t], rev[s][t]) and union[s][t] >= max(fwd[s][t], rev[s][t])
    with pytest.raises(ConfigError, match="symmetrisation"):
        ibm1(data, symmetrisation="grow-diag")


def test_viterbi_links_point_into_their_own_pair_and_null_words_stay_unaligned():
    data = [("a b", "A B"), ("a", "A"), ("b", "B"), ("c", "A B")]
    corpus = Corpus.from_data(data)
    result = align(corpus, iterations=5)
    pair_of_src = np.repeat(np.arange(len(corpus)), np.diff(corpus.src_off))
    pair_of_tgt = np.repeat(np.arange(len(corpus)), np.diff(corpus.tgt_off))
    assert (pair_of_src[result.src_index] == pair_of_tgt[result.tgt_index]).all()
    links = symmetrise(corpus, result, align(corpus.swapped()), "intersect")
    assert len(links) == len(np.unique(links))


def test_tension_optimisation_stays_in_range_and_vb_runs():
    data = synthetic(4, monotone=True, pairs=200)
    lex = ibm2(data, optimize_tension=True)
    for direction in ("forward", "reverse"):
        assert 0.1 <= lex.settings["final_tension"][direction] <= 14.0
        assert lex.settings["final_tension"][direction] != 4.0
    assert ibm1(data, variational_bayes=True).best() == TRUTH


def test_bad_settings():
    with pytest.raises(ConfigError, match="iterations"):
        ibm1([("a", "A")], iterations=0)
    with pytest.raises(ConfigError, match="null_prob"):
        ibm2([("a", "A")], null_prob=1.0)


def reference_em(pairs, iterations, diagonal, optimize_tension, tension=4.0, p0=0.08):
    """Plain-loop transcription of fast_align's training (1-based feature), for checking the vectorised code."""
    pairs = [(s.split(), t.split()) for s, t in pairs]
    tgt_vocab = {w for _, t in pairs for w in t}
    table: dict = {}

    def prob(e, f):
        return table.get((e, f), 1.0 / len(tgt_vocab)) if table else 1.0 / len(tgt_vocab)

    def prior(i, j, m, n, lam):  # j = 0 is NULL
        if not diagonal:
            return 1.0 / (n + 1)
        if j == 0:
            return p0
        z = sum(np.exp(-lam * abs(i / m - k / n)) for k in range(1, n + 1))
        return (1 - p0) * np.exp(-lam * abs(i / m - j / n)) / z

    lls, links = [], []
    for it in range(iterations):
        counts: dict = {}
        ll, emp, toks = 0.0, 0.0, 0
        for src, tgt in pairs:
            n, m = len(src), len(tgt)
            for i, f in enumerate(tgt, 1):
                words = [None, *src]
                probs = [prob(e, f) * prior(i, j, m, n, tension) for j, e in enumerate(words)]
                total = sum(probs)
                ll += np.log(total)
                toks += 1
                if it == iterations - 1:
                    best = int(np.argmax(probs))
                    if best:
                        links.append((best - 1, i - 1))
                    continue
                for j, (e, p) in enumerate(zip(words, probs)):
                    counts[(e, f)] = counts.get((e, f), 0.0) + p / total
                    if j:
                        emp += -abs(i / m - j / n) * p / total
        lls.append(ll)
        if it == iterations - 1:
            break
        if diagonal and optimize_tension and it > 0:
            for _ in range(8):
                mod = 0.0
                for src, tgt in pairs:
                    n, m = len(src), len(tgt)
                    for i in range(1, m + 1):
                        w = [np.exp(-tension * abs(i / m - k / n)) for k in range(1, n + 1)]
                        mod += sum(wk * -abs(i / m - k / n) for k, wk in enumerate(w, 1)) / sum(w)
                tension = min(max(tension + (emp / toks - mod / toks) * 20.0, 0.1), 14.0)
        totals: dict = {}
        for (e, _), c in counts.items():
            totals[e] = totals.get(e, 0.0) + c
        table = {(e, f): c / totals[e] for (e, f), c in counts.items()}
    return lls, links, tension


@pytest.mark.parametrize("diagonal, optimize", [(False, False), (True, False), (True, True)])
def test_vectorised_em_matches_a_plain_loop_transcription(diagonal, optimize):
    pairs = [("a b c", "A B C"), ("a c", "C A"), ("b", "B B"), ("c a b d", "A D B"), ("d", "D")]
    lls, links, tension = reference_em(pairs, 6, diagonal, optimize)
    corpus = Corpus.from_data(pairs)
    result = align(corpus, iterations=6, diagonal=diagonal, optimize_tension=optimize)
    assert result.log_likelihoods == pytest.approx(lls, rel=1e-10)
    pair = np.repeat(np.arange(len(corpus)), np.diff(corpus.src_off))[result.src_index]
    got = [
        (int(s - corpus.src_off[k]), int(t - corpus.tgt_off[k]))
        for s, t, k in zip(result.src_index, result.tgt_index, pair)
    ]
    assert got == links
    if diagonal:
        assert result.tension == pytest.approx(tension, rel=1e-10)
