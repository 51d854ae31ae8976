"""Compositional degree: the paper's example, ties, OOV rules, and DP == brute force (property tests)."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structseq.compose import NgramDictionary, all_min_covers, compositional_degree, min_cover, score_pool
from structseq.errors import ConfigError

PAPER_ATOMS = {("x1",), ("x2",), ("x3", "x4"), ("x5",), ("x1", "x2"), ("x3", "x4", "x5")}
PAPER_SENTENCE = "x1 x2 x3 x4 x5".split()


def brute_force(tokens, atoms, max_n=None):
    """Smallest number of atoms over all 2^(L-1) segmentations; None when none is a cover."""
    best = None
    length = len(tokens)
    if length == 0:
        return 0
    for cuts in itertools.product([False, True], repeat=max(length - 1, 0)):
        bounds = [0] + [i + 1 for i, cut in enumerate(cuts) if cut] + [length]
        pieces = [tuple(tokens[a:b]) for a, b in zip(bounds, bounds[1:])]
        if all(p in atoms and (max_n is None or len(p) <= max_n) for p in pieces):
            best = len(pieces) if best is None else min(best, len(pieces))
    return best


def reference_atoms(train, min_count, threshold, max_n):
    """The dictionary by its definition, counted naively."""
    words = Counter(w for s in train for w in s.split())
    vocab = {w for w, c in words.items() if c >= min_count}
    grams = Counter()
    for s in train:
        tokens = s.split()
        for n in range(2, len(tokens) + 1 if max_n is None else min(max_n, len(tokens)) + 1):
            for i in range(len(tokens) - n + 1):
                grams[tuple(tokens[i : i + n])] += 1
    atoms = {(w,) for w in vocab}
    atoms |= {g for g, c in grams.items() if c > threshold and all(w in vocab for w in g)}
    return atoms, vocab


def test_paper_worked_example_general_dp():
    cover = min_cover(PAPER_SENTENCE, PAPER_ATOMS)
    assert cover.size == 2
    assert cover.pieces(PAPER_SENTENCE) == ["x1 x2", "x3 x4 x5"]
    assert cover.size / len(PAPER_SENTENCE) == pytest.approx(0.4)
    assert brute_force(PAPER_SENTENCE, PAPER_ATOMS) == 2


def test_paper_worked_example_from_counts():
    # x1x2 and x3x4x5 each seen 4 (> 3) times: the fast path must find the same 2/5 cover
    train = ["x1 x2"] * 4 + ["x3 x4 x5"] * 4
    dictionary = NgramDictionary.from_corpus(train)
    result = score_pool(dictionary, [" ".join(PAPER_SENTENCE)], explain=True)
    assert result.cover_size[0] == 2
    assert result.degree[0] == pytest.approx(0.4)
    assert result.covers[0].render(PAPER_SENTENCE) == "x1 x2 | x3 x4 x5"
    assert compositional_degree(PAPER_SENTENCE, dictionary) == pytest.approx(0.4)


def test_several_optimal_covers_tie_break():
    atoms = {("a",), ("b",), ("c",), ("a", "b"), ("b", "c")}
    tokens = "a b c".split()
    covers = all_min_covers(tokens, atoms)
    assert {c.render(tokens) for c in covers} == {"a | b c", "a b | c"}
    # documented tie-break: longest last atom, recursively leftwards
    assert min_cover(tokens, atoms).render(tokens) == "a | b c"
    dictionary = NgramDictionary.from_corpus(["a b"] * 4 + ["b c"] * 4 + ["c"] * 3)
    result = score_pool(dictionary, ["a b c"], explain=True)
    assert result.covers[0].render(tokens) == "a | b c"
    assert result.degree[0] == pytest.approx(2 / 3)


def test_unique_optimum_and_tie_among_overlapping_atoms():
    atoms = {("a",), ("b",), ("a", "b"), ("b", "a")}
    tokens = "a b a b".split()
    assert [c.render(tokens) for c in all_min_covers(tokens, atoms)] == ["a b | a b"]
    assert min_cover(tokens, atoms).size == 2
    tokens = "a b a".split()
    assert {c.render(tokens) for c in all_min_covers(tokens, atoms)} == {"a b | a", "a | b a"}


def test_no_cover_and_empty():
    assert min_cover(["a", "z"], {("a",)}) is None
    assert all_min_covers(["a", "z"], {("a",)}) == []
    assert min_cover([], {("a",)}).size == 0


def test_oov_rule_and_atom_threshold():
    # "rare" twice (< 3): OOV; "thrice" exactly 3 times: in vocabulary, but its bigrams (3, not > 3) are no atoms
    train = ["a b rare", "a b rare", "a b thrice", "a b thrice", "thrice c"]
    dictionary = NgramDictionary.from_corpus(train)
    assert "rare" not in dictionary.vocab and "thrice" in dictionary.vocab
    assert ("a", "b") in dictionary and ("a", "b", "thrice") not in dictionary
    result = score_pool(dictionary, ["a b rare", "a b thrice", "unseen", "a b a b"])
    assert result.n_oov.tolist() == [1, 0, 1, 0]
    assert math.isnan(result.degree[0]) and math.isnan(result.degree[2])
    assert result.cover_size.tolist() == [-1, 2, -1, 2]
    assert result.degree[1] == pytest.approx(2 / 3)
    with_oov = score_pool(dictionary, ["a b rare", "unseen"], oov_as_atoms=True)
    assert with_oov.cover_size.tolist() == [2, 1]


def test_max_n_caps_atoms():
    train = ["a b c d"] * 5
    full = NgramDictionary.from_corpus(train)
    assert full.sizes() == {1: 4, 2: 3, 3: 2, 4: 1}
    capped = NgramDictionary.from_corpus(train, max_n=2)
    assert capped.sizes() == {1: 4, 2: 3}
    assert ("a", "b", "c") not in capped
    assert score_pool(full, ["a b c d"]).cover_size[0] == 1
    assert score_pool(capped, ["a b c d"]).cover_size[0] == 2
    assert score_pool(NgramDictionary.from_corpus(train, max_n=1), ["a b c d"]).degree[0] == 1.0


def test_chunking_and_empty_inputs():
    rng = np.random.default_rng(0)
    words = list("abcdefg")
    train = [" ".join(rng.choice(words, rng.integers(1, 9))) for _ in range(300)]
    pool = [" ".join(rng.choice(words + ["zz"], rng.integers(0, 12))) for _ in range(500)]
    dictionary = NgramDictionary.from_corpus(train)
    whole = score_pool(dictionary, pool, explain=True)
    chunked = score_pool(dictionary, pool, explain=True, chunk_size=7)
    np.testing.assert_array_equal(whole.cover_size, chunked.cover_size)
    np.testing.assert_array_equal(whole.n_oov, chunked.n_oov)
    assert whole.covers == chunked.covers
    assert len(score_pool(dictionary, [])) == 0
    empty = NgramDictionary.from_corpus([])
    assert empty.sizes() == {1: 0}
    assert score_pool(empty, ["a"]).n_oov.tolist() == [1]


def test_bad_settings():
    with pytest.raises(ConfigError):
        NgramDictionary.from_corpus(["a"], min_count=0)
    with pytest.raises(ConfigError):
        NgramDictionary.from_corpus(["a"], max_n=0)


sentences = st.lists(st.sampled_from("abcd"), min_size=0, max_size=8).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(
    train=st.lists(sentences, min_size=0, max_size=25),
    pool=st.lists(st.lists(st.sampled_from("abcde"), min_size=1, max_size=8).map(" ".join), min_size=1, max_size=6),
    min_count=st.integers(1, 3),
    threshold=st.integers(0, 3),
    max_n=st.one_of(st.none(), st.integers(1, 4)),
)
def test_fast_path_equals_brute_force(train, pool, min_count, threshold, max_n):
    atoms, vocab = reference_atoms(train, min_count, threshold, max_n)
    dictionary = NgramDictionary.from_corpus(train, min_count=min_count, atom_threshold=threshold, max_n=max_n)
    assert set(dictionary.vocab) == vocab
    for sentence in pool + train:
        tokens = sentence.split()
        for n in range(1, len(tokens) + 1):
            for i in range(len(tokens) - n + 1):
                gram = tuple(tokens[i : i + n])
                assert (gram in dictionary) == (gram in atoms), gram
    result = score_pool(dictionary, pool, explain=True)
    for i, sentence in enumerate(pool):
        tokens = sentence.split()
        expected = brute_force(tokens, atoms)
        if any(w not in vocab for w in tokens):
            assert expected is None and result.cover_size[i] == -1 and math.isnan(result.degree[i])
            continue
        assert result.cover_size[i] == expected
        assert result.degree[i] == pytest.approx(expected / len(tokens))
        cover = result.covers[i]
        assert [tuple(tokens[a:b]) for a, b in cover.segments] and all(
            tuple(tokens[a:b]) in atoms for a, b in cover.segments
        )
        assert cover.segments[0][0] == 0 and cover.segments[-1][1] == len(tokens)
        assert all(x[1] == y[0] for x, y in zip(cover.segments, cover.segments[1:]))
        # the general DP agrees, including its tie-break
        assert min_cover(tokens, dictionary) == cover


@settings(max_examples=150, deadline=None)
@given(
    atoms=st.sets(st.lists(st.sampled_from("abc"), min_size=1, max_size=4).map(tuple), max_size=14),
    tokens=st.lists(st.sampled_from("abc"), min_size=0, max_size=8),
    max_n=st.one_of(st.none(), st.integers(1, 4)),
)
def test_general_dp_equals_brute_force(atoms, tokens, max_n):
    expected = brute_force(tokens, atoms, max_n)
    cover = min_cover(tokens, atoms, max_n)
    if expected is None:
        assert cover is None and all_min_covers(tokens, atoms, max_n) == []
        return
    assert cover.size == expected
    everything = all_min_covers(tokens, atoms, max_n)
    assert cover in everything
    for c in everything:
        assert c.size == expected and "".join("".join(p.split()) for p in c.pieces(tokens)) == "".join(tokens)
        assert all(tuple(tokens[a:b]) in atoms for a, b in c.segments)
