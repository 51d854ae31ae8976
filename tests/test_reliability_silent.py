"""Input that used to be read silently wrong (issue 43, section 3) is refused with an error naming file:line:
a JSON Lines key given twice, a header line that contradicts data.columns, the reserved word `</s>` in a
tagged corpus; and a JSON line nested too deeply is an error, not a RecursionError (section 4)."""

from __future__ import annotations

import pytest

from structseq.data.readers import read_jsonl, read_tsv
from structseq.data.tlgbank import read_tagged
from structseq.errors import DataError


def test_a_jsonl_key_given_twice_is_refused_naming_file_and_line(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"source": "dax", "target": "RED"}\n{"source": "wif", "source": "zup fep", "target": "BLUE"}\n')
    with pytest.raises(DataError, match=r"d\.jsonl:2: key 'source' given twice"):
        read_jsonl(path)
    path.write_text('{"source": "dax", "target": "RED", "meta": {"a": 1, "a": 2}}\n')  # nested objects too
    with pytest.raises(DataError, match=r"d\.jsonl:1: key 'a' given twice"):
        read_jsonl(path, {"source": "source", "target": "target", "note": "meta"})


def test_a_jsonl_line_nested_too_deeply_is_one_data_error(tmp_path):
    path = tmp_path / "deep.jsonl"
    depth = 200_000
    path.write_text('{"source": "dax", "target": "RED"}\n{"source": ' + "[" * depth + "]" * depth + "}\n")
    with pytest.raises(DataError, match=r"deep\.jsonl:2: JSON nested too deeply"):
        read_jsonl(path)


def test_a_header_contradicting_data_columns_is_refused_not_read_as_an_example(tmp_path):
    path = tmp_path / "d.tsv"
    path.write_text("target\tsource\nRED\tdax\n")
    with pytest.raises(DataError, match=r"d\.tsv:1: a header line \(target, source\) that differs from data.columns"):
        read_tsv(path, ["source", "target"])
    path.write_text("source\ttarget\ndax\tRED\n")  # the configured header itself is skipped, as before
    assert [e.source for e in read_tsv(path, ["source", "target"])] == [("dax",)]
    path.write_text("dax\tRED\nwif\tBLUE\n")  # no header: every line an example
    assert len(read_tsv(path, ["source", "target"])) == 2


@pytest.mark.parametrize("word", ["</s>", "<pad>", "<unk>"])
def test_a_reserved_word_in_a_tagged_corpus_is_refused_naming_file_and_line(word, tmp_path):
    path = tmp_path / "tagged.txt"
    path.write_text(f"the|NP/N dog|N\nthe|NP/N {word}|N\n")
    with pytest.raises(DataError, match=rf"tagged\.txt:2: reserved token '{word}' in the source"):
        read_tagged(path)
    path.write_text("the|NP/N a</s>|N\n")  # inside a longer word it is ordinary text
    assert read_tagged(path)[0].source == ("the", "a</s>")
