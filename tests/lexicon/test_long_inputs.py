"""Issue 12: lexicon learners and compose on long lines, empty pools, folders given as files."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from structseq.cli import compose as compose_cli
from structseq.compose.degree import NgramDictionary, score_pool
from structseq.lexicon import learn
from structseq.lexicon.corpus import MAX_LENGTH, Corpus

runner = CliRunner()
PAIRS = [("dax", "RED"), ("wif", "GREEN"), ("dax fep", "RED RED RED"), ("wif fep", "GREEN GREEN GREEN")] * 3


@pytest.mark.parametrize("method", ["simple", "pmi", "ibm1", "ibm2", "bayesian"])
def test_learners_leave_out_over_long_pairs_with_a_warning(method):
    long = (" ".join(["dax"] * 2000), " ".join(["RED"] * 2000))
    with pytest.warns(UserWarning, match=f"left out 1 of 13 pairs with a side longer than {MAX_LENGTH} tokens"):
        lexicon = learn(PAIRS + [long], method)
    assert lexicon.entries == learn(PAIRS, method).entries


def test_corpus_of_only_over_long_pairs_is_an_error():
    from structseq.errors import DataError

    with pytest.raises(DataError, match="every pair has a side longer than 3 tokens"):
        Corpus.from_data([("a b c d", "x")], max_length=3)


def _degree(tmp_path, pool_text: str | None, pool_name="pool.txt"):
    (tmp_path / "train.txt").write_text("a b\nb c\n" * 5)
    pool = tmp_path / pool_name
    if pool_text is not None:
        pool.write_text(pool_text)
    return runner.invoke(compose_cli.app, ["degree", "--train", str(tmp_path / "train.txt"), "--pool", str(pool)])


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_empty_pool_is_an_error(tmp_path, text):
    result = _degree(tmp_path, text)
    assert result.exit_code == 2 and "pool holds no sentences" in " ".join(result.output.split())


def test_directory_as_pool_says_so(tmp_path):
    (tmp_path / "dir").mkdir()
    result = _degree(tmp_path, None, "dir")
    assert result.exit_code == 2 and "is a directory" in " ".join(result.output.split())


def test_pool_degrees_still_work(tmp_path):
    result = _degree(tmp_path, "a b c\n")
    assert result.exit_code == 0 and result.stdout.splitlines()[1].split("\t")[:5] == ["1", "3", "0", "2", repr(2 / 3)]


@pytest.mark.slow
def test_degree_of_a_32770_word_atom_does_not_overflow():
    line = " ".join(["a"] * 32770)  # every n-gram is an atom: reach 32,770 at the first word
    dictionary = NgramDictionary.from_corpus([line], min_count=1, atom_threshold=0)
    assert dictionary.longest == 32770
    result = score_pool(dictionary, [line])
    assert result.cover_size.tolist() == [1]
