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


# ------------------------------------------------------------------ compare and plot read what evaluate and train wrote
def _system(folder, score):
    """A predictions TSV of `evaluate` with its metrics JSON, whose nltk_bleu score is `score` (raw JSON text)."""
    folder.mkdir()
    tsv = folder / "test.tsv"
    tsv.write_text(
        "source\treference\thypothesis\n" + "".join(f"s{i}\tA B\tA {'B' if i % 2 else 'C'}\n" for i in range(6))
    )
    (folder / "test.metrics.json").write_text(
        '{"task": "seq2seq", "nltk_bleu": {"score": ' + score + ', "signature": "nltk_bleu|scale:fraction"}}'
    )
    return tsv


@pytest.mark.parametrize("score", ["NaN", "null", "Infinity", '"0.5"'])
def test_compare_refuses_a_score_that_is_not_a_finite_number(score, tmp_path, monkeypatch, capsys):
    """A metrics JSON with a NaN score: on d15a89c compare reported mean NaN and delta NaN with exit 0; null was
    a TypeError traceback. Now one line naming the file and the metric, exit 2."""
    from tests.fixtures.cli_run import one_line_error, run_main

    a, b = _system(tmp_path / "a", "0.5"), _system(tmp_path / "b", score)
    code, err = run_main(monkeypatch, capsys, "compare", a, b, "--resamples", 10)
    one_line_error(code, err, str(b.with_name("test.metrics.json")), "nltk_bleu", "not a finite number")


def test_compare_and_plot_name_a_broken_file(tmp_path, monkeypatch, capsys):
    """Broken JSON in a metrics JSON and non-UTF-8 bytes in metrics.jsonl: one-line errors that now name the file."""
    from tests.fixtures.cli_run import one_line_error, run_main

    a, b = _system(tmp_path / "a", "0.5"), _system(tmp_path / "b", "0.5")
    b.with_name("test.metrics.json").write_text('{"task": "seq2seq", "nltk_bleu": {"score": 0.5,')
    code, err = run_main(monkeypatch, capsys, "compare", a, b, "--resamples", 10)
    one_line_error(code, err, str(b.with_name("test.metrics.json")), "not valid JSON")
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes(b'{"step": 1, "loss": 2.0}\n{"step": 2, "note": "caf\xe9"}\n')
    code, err = run_main(monkeypatch, capsys, "plot", run, "-o", tmp_path / "curves.png")
    one_line_error(code, err, "metrics.jsonl:2", "not UTF-8")


def test_evaluate_says_when_config_yaml_was_edited(tmp_path):
    """An edit of RUN/config.yaml (`beam: 4`): on d15a89c evaluate used the checkpoint's config without a word;
    now a warning names the key with both values. An unedited run loads without it."""
    import warnings

    import yaml

    from structseq.api import load_run
    from structseq.train.loop import Trainer
    from tests.fixtures.toy import toy_config, toy_tsv

    Trainer(toy_config(toy_tsv(tmp_path), max_steps=1), tmp_path / "run", show_progress=False).run()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at all for a run as it was written
        load_run(tmp_path / "run")
    path = tmp_path / "run" / "config.yaml"
    cfg = yaml.safe_load(path.read_text())
    beam = cfg["decode"]["beam"]
    cfg["decode"]["beam"] = beam + 3
    path.write_text(yaml.safe_dump(cfg))
    with pytest.warns(
        UserWarning,
        match=rf"config.yaml differs from the checkpoint's config, which is used \(decode.beam: {beam + 3} \(checkpoint: {beam}\)\)",
    ):
        assert load_run(tmp_path / "run").config.decode.beam == beam


def test_evaluate_never_replaces_predictions_a_user_edited(tmp_path, monkeypatch, capsys):
    """`structseq evaluate RUN` after the user edited RUN/predictions/LABEL.tsv: on d15a89c the file was
    replaced although the folder's manifest recorded another hash (issue 43 s2); now one line naming it, exit
    2, the edit kept; --overwrite replaces it."""
    from structseq.train.loop import Trainer
    from tests.fixtures.cli_run import one_line_error, run_main
    from tests.fixtures.toy import toy_config, toy_tsv

    Trainer(toy_config(toy_tsv(tmp_path), max_steps=1), tmp_path / "run", show_progress=False).run()
    code, err = run_main(monkeypatch, capsys, "evaluate", tmp_path / "run", "--threads", 1)
    assert code == 0, err
    (tsv,) = [p for p in (tmp_path / "run" / "predictions").glob("*.tsv")]
    tsv.write_text(tsv.read_text() + "my own note\n")
    code, err = run_main(monkeypatch, capsys, "evaluate", tmp_path / "run", "--threads", 1)
    one_line_error(code, err, str(tsv), "--overwrite")
    assert "my own note" in tsv.read_text()
    code, err = run_main(monkeypatch, capsys, "evaluate", tmp_path / "run", "--threads", 1, "--overwrite")
    assert code == 0, err
    assert "my own note" not in tsv.read_text()
