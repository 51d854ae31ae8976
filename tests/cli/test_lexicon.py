"""`structseq lexicon learn/show/plot` through typer's test runner."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from structseq.cli.lexicon import app
from structseq.lexicon import Lexicon
from tests.fixtures.tiny import COLOR_WORDS, COLORS_TRAIN

runner = CliRunner()
COLORS = COLORS_TRAIN[:10]


@pytest.fixture
def tsv(tmp_path):
    path = tmp_path / "colors.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in COLORS), encoding="utf-8")
    return path


def test_learn_show_plot(tmp_path, tsv):
    out = tmp_path / "lex.json"
    res = runner.invoke(app, ["learn", str(tsv), "--method", "simple", "--epsilon", "3", "-o", str(out)])
    assert res.exit_code == 0, res.output
    lex = Lexicon.load(out)
    assert lex.best() == COLOR_WORDS
    assert lex.settings["epsilon"] == 3 and lex.settings["data"] == str(tsv)

    res = runner.invoke(app, ["show", str(out), "--plain"])
    assert res.exit_code == 0 and "dax\tRED\t" in res.output
    res = runner.invoke(app, ["show", str(out)])
    assert res.exit_code == 0 and "simple lexicon" in res.output

    png = tmp_path / "lexicon.png"
    res = runner.invoke(app, ["plot", str(out), "-o", str(png), "--tau", "0.1"])
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_learn_named_dataset_prints_a_table():
    res = runner.invoke(app, ["learn", "colors", "-m", "ibm1"])
    assert res.exit_code == 0, res.output
    assert "ibm1 lexicon" in res.output and "YELLOW" in res.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["learn", "{tsv}", "-m", "giza"], "unknown lexicon method 'giza'; choices: bayesian, ibm1, ibm2, pmi, simple"),
        (["learn", "{tsv}", "-m", "ibm2", "--epsilon", "2"], "--epsilon does not apply to method 'ibm2'"),
        (["learn", "{tsv}", "-m", "simple", "--rule", "loose"], "rule must be one of"),
        (["learn", "no-such-dataset"], "unknown dataset 'no-such-dataset'"),
        (["show", "{missing}"], "lexicon file not found"),
        (["plot", "{bad}"], "not valid JSON"),
    ],
)
def test_errors_are_one_line_and_exit_2(tmp_path, tsv, args, message):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    args = [a.format(tsv=tsv, missing=tmp_path / "missing.json", bad=bad) for a in args]
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert message in res.output


def test_bad_tsv_line_is_named(tmp_path):
    path = tmp_path / "broken.tsv"
    path.write_text("dax\tRED\nlug BLUE\n")
    res = runner.invoke(app, ["learn", str(path)])
    assert res.exit_code == 2 and f"{path}:2:" in res.output


def test_show_reads_the_trained_matrix_of_a_run_directory(tmp_path):
    from structseq import api

    steps = ["train.max_steps=2", "train.valid_every=2"]
    api.train("configs/colors/lstm-lex-simple.yaml", tmp_path / "lex", overrides=steps, seed=1)
    res = runner.invoke(app, ["show", str(tmp_path / "lex"), "--sources", "dax,lug,fep,nosuch", "--plain"])
    assert res.exit_code == 0, res.output
    # Simple's rows are fixed (not trained): each primitive is one-hot on its colour; `fep` has no row
    assert res.stdout == "dax\tRED\t1\nlug\tBLUE\t1\n"
    assert "mutual exclusivity" in res.stderr and res.stderr.rstrip().endswith(": fep, nosuch")

    api.train("configs/colors/lstm.yaml", tmp_path / "plain", overrides=steps, seed=1)
    res = runner.invoke(app, ["show", str(tmp_path / "plain")])
    assert res.exit_code == 2 and "not a lexical-translation run (its output head: SoftmaxHead)" in res.output
