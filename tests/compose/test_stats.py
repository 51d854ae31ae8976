"""Table 2 statistics and the Figure 1a binning."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structseq.compose import (
    bleu_difference_by_degree,
    degree_bins,
    get_tagger,
    novel_ngrams,
    plot_difference,
    read_scores,
    score_difference_by_degree,
    table2_stats,
)
from structseq.compose.plot import align
from structseq.errors import ConfigError, DataError


def naive_novel(train, test, n):
    grams = lambda corpus: {tuple(s[i : i + n]) for s in corpus for i in range(len(s) - n + 1)}
    return len(grams(test) - grams(train))


token_lists = st.lists(st.lists(st.sampled_from("abcde"), max_size=7), max_size=12)


@settings(max_examples=100, deadline=None)
@given(train=token_lists, test=token_lists, n=st.integers(1, 4))
def test_novel_ngrams_match_sets(train, test, n):
    assert novel_ngrams(train, test, n) == naive_novel(train, test, n)


def test_table2_with_pluggable_tagger():
    train = ["the dog ran .", "a cat sat .", "the cat ran ."] * 2
    tests = {"t1": ["the dog sat .", "a dog ran ."], "t2": ["zebra ran ."]}
    tagger = lambda sentences: [
        [{"the": "DT", "a": "DT", ".": "."}.get(w, "NN" if w in ("dog", "cat", "zebra") else "VB") for w in s]
        for s in sentences
    ]
    rows = table2_stats(train, tests, tagger=tagger, min_count=1, atom_threshold=1)
    r1, r2 = rows
    assert r1["examples"] == 2 and r1["word_2gram_novel"] == naive_novel(
        [s.split() for s in train], [s.split() for s in tests["t1"]], 2
    )
    assert r1["pos_2gram_novel"] == 0 and r1["pos_3gram_novel"] == 0
    assert r2["word_2gram_novel"] == 1 and r2["with_oov"] == 1 and r2["unscored"] == 0
    # "ran ." is an atom, zebra its own atom: 2 atoms / 3 words
    assert r2["avg_degree"] == pytest.approx(2 / 3)
    strict = table2_stats(train, tests, min_count=1, atom_threshold=1, oov_as_atoms=False)
    assert strict[1]["unscored"] == 1 and "pos_2gram_novel" not in strict[1]
    bad = lambda sentences: [s[:-1] for s in sentences]
    with pytest.raises(DataError, match="tags for"):
        table2_stats(train, tests, tagger=bad)


def test_textblob_tagger_offline():
    pytest.importorskip("textblob")
    tagger = get_tagger("textblob")
    assert tagger([["the", "dog", "ran", "."], []]) == [["DT", "NN", "VBD", "."], []]
    assert get_tagger("none") is None
    with pytest.raises(ConfigError, match="textblob"):
        get_tagger("spacy")


def test_degree_bins():
    degree = np.array([0.9, 0.1, np.nan, 0.5, 0.3, 0.7, 0.2])
    groups = degree_bins(degree, bins=3)
    assert [len(g) for g in groups] == [2, 2, 2]
    assert [degree[g].tolist() for g in groups] == [[0.1, 0.2], [0.3, 0.5], [0.7, 0.9]]
    assert [len(g) for g in degree_bins(degree, binning="count", bin_size=4)] == [3, 3]
    width = degree_bins(degree, bins=4, binning="width")
    assert sorted(np.concatenate(width).tolist()) == [0, 1, 3, 4, 5, 6]
    assert degree[width[0]].max() < degree[width[-1]].min()
    with pytest.raises(ConfigError):
        degree_bins(degree, binning="log")
    with pytest.raises(ConfigError):
        degree_bins(degree, binning="width", bin_size=2)


def test_score_and_bleu_differences(tmp_path):
    degree = np.array([0.1, 0.2, 0.8, 0.9])
    rows = score_difference_by_degree(degree, np.array([1.0, 1.0, 3.0, 5.0]), np.array([1.0, 1.0, 1.0, 1.0]), bins=2)
    assert [r["difference"] for r in rows] == [0.0, 3.0]
    assert rows[1]["degree_mean"] == pytest.approx(0.85) and rows[1]["examples"] == 2
    refs = ["the cat sat on the mat", "a dog ran in the park", "it is raining today", "we like green tea"]
    good, bad = list(refs), ["x y z"] * 4
    bleu = bleu_difference_by_degree(degree, good, bad, refs, bins=2)
    assert all(r["difference"] > 50 for r in bleu)
    assert all(r["difference"] == 0 for r in bleu_difference_by_degree(degree, good, good, refs, bins=2))
    path = tmp_path / "fig.png"
    plot_difference(rows, path, labels=("R-Dangle", "Transformer"))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(DataError):
        plot_difference([], tmp_path / "empty.png")


def test_read_and_align_scores(tmp_path):
    bare = tmp_path / "bare.txt"
    bare.write_text("1.5\n2\n\n3\n")
    assert read_scores(bare).values.tolist() == [1.5, 2.0, 3.0]
    keyed = tmp_path / "keyed.tsv"
    keyed.write_text("line\tbleu\tchrf\n3\t30\t1\n1\t10\t2\n")
    scores = read_scores(keyed, "bleu")
    assert align(scores, np.array([1, 2, 3])).tolist()[::2] == [10.0, 30.0]
    assert np.isnan(align(scores, np.array([1, 2, 3]))[1])
    assert read_scores(keyed).values.tolist() == [1.0, 2.0]  # no `score` column: the last one
    with pytest.raises(DataError, match="columns are"):
        read_scores(keyed, "ter")
    with pytest.raises(DataError, match="has 4 rows"):
        align(read_scores(bare), np.array([1, 2, 3, 4]))
