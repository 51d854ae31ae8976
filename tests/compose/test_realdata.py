"""Checks on the real benchmark data (skipped when the data root is missing)."""

from __future__ import annotations

import numpy as np
import pytest

from structseq.compose import NgramDictionary, min_cover, read_corpora, read_sentences, score_pool, table2_stats
from structseq.paths import data_root

ROOT = data_root()
needs_data = pytest.mark.skipif(not (ROOT / "cogs" / "train.tsv").is_file(), reason="benchmark data not found")


@needs_data
def test_cogs_novel_word_ngrams_match_paper_table2():
    # Zheng & Lapata (2023), Table 2, COGS: 6,097 novel word 2-grams and 24,275 novel word 3-grams
    row = table2_stats(read_sentences(ROOT / "cogs/train.tsv"), {"gen": read_sentences(ROOT / "cogs/gen.tsv")})[0]
    assert row["examples"] == 21_000
    assert (row["word_2gram_novel"], row["word_3gram_novel"]) == (6_097, 24_275)


@needs_data
def test_fast_degree_equals_general_dp_on_react():
    # the pool is part of train (min_count 1), so every sentence is in vocabulary and gets a degree
    pool = read_sentences(ROOT / "react/raw/cg_test.de")
    train = read_corpora([ROOT / "react/raw/valid.de", ROOT / "react/raw/test.de"]) + pool
    dictionary = NgramDictionary.from_corpus(train, min_count=1)
    result = score_pool(dictionary, pool, explain=True)
    assert np.isfinite(result.degree).all()
    for i, sentence in enumerate(pool):
        cover = min_cover(sentence.split(), dictionary)
        assert cover == result.covers[i], sentence
