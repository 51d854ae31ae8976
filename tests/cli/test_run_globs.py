"""Issue 55 items 1 and 4 through the CLI and the API: a glob of runs takes the run folders (train-many's
NAME.log and many.json beside them skipped, a glob of no run one line), the same rule for every command that
takes runs; and `test` of a `dataset: files` config is its data.test file, its predictions test*.tsv, which
compare finds by the split's name."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from structseq import api
from structseq.cli import app
from structseq.config import config_from_dict
from tests.fixtures.cli_run import one_line_error, run_main

runner = CliRunner()


def _tiny(data, out, seed):
    cfg = config_from_dict(
        {
            "data": {"dataset": "files", "train": str(data), "valid": str(data), "test": [str(data)]},
            "model": {"arch": "lstm", "embed_dim": 8, "hidden_dim": 8, "layers": 1, "dropout": 0.0},
            "optim": {"lr": 5e-3, "max_tokens": 200},
            "train": {"max_steps": 2, "valid_every": 2, "seed": seed, "threads": 1},
            "decode": {"batch_size": 8},
        }
    )
    api.train(cfg, out, show_progress=False)
    return out


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """train-many's layout: OUT/toy-seed1, OUT/toy-seed2, their logs and many.json beside them."""
    root = tmp_path_factory.mktemp("globs")
    data = root / "toy.tsv"
    data.write_text("a b\tB A\nc\tC\na c\tC A\nb\tB\n")
    out = root / "many"
    for seed in (1, 2):
        _tiny(data, out / f"toy-seed{seed}", seed)
        (out / f"toy-seed{seed}.log").write_text("valid | update 2\n")
    (out / "many.json").write_text("{}\n")
    return out


def test_a_glob_of_runs_takes_the_run_folders_and_skips_the_logs(many, monkeypatch, capsys):
    r = runner.invoke(app, ["evaluate", f"{many}/toy-seed*", "--split", "test", "--json"])
    assert r.exit_code == 0, r.output  # was: "toy-seed1.log: an existing file, not a run directory"
    assert json.loads(r.stdout)["ensemble"]["members"] == [str(many / "toy-seed1"), str(many / "toy-seed2")]
    for pattern in (f"{many}/*.log", f"{many}/nothing*"):
        code, err = run_main(monkeypatch, capsys, "evaluate", pattern, "--split", "test")
        one_line_error(code, err, pattern, "no run folder matches")
    unc = many.parent / "unc.tsv"
    pool = many.parent / "pool.txt"
    pool.write_text("a b\nc\n")
    code, err = run_main(
        monkeypatch, capsys, "compose", "uncertainty", "--ensemble", f"{many}/toy-seed*", "--pool", pool, "-o", unc
    )
    assert code == 0 and len(unc.read_text().splitlines()) == 3, err


def test_test_of_a_files_config_is_its_data_test_and_compare_finds_it_by_name(many, monkeypatch, capsys):
    """`load_run(R).evaluate("test")` (the README's example) and `evaluate R --split test` said "unknown dataset
    'test'"; now both read data.test, write predictions/test.tsv, and `compare A B --split test` finds them."""
    report = api.load_run(many / "toy-seed1").evaluate("test")
    assert report["exact_match"]["n"] == 4
    assert (many / "toy-seed1" / "predictions" / "test.tsv").is_file()
    assert api.load_run(many / "toy-seed1").load_split("valid")[2] == api.load_run(many / "toy-seed1").load_split()[2]
    code, err = run_main(monkeypatch, capsys, "evaluate", many / "toy-seed2", "--split", "test")
    assert code == 0, err
    assert (many / "toy-seed2" / "predictions" / "test.tsv").is_file()
    code, err = run_main(
        monkeypatch, capsys, "compare", many / "toy-seed1", many / "toy-seed2", "--split", "test", "--no-evaluate"
    )
    assert code == 0, err


def test_test_is_data_test_beside_a_folder_named_test(many, monkeypatch, capsys, tmp_path):
    """A `test/` folder in the working directory (a project's tests) is not a file: `--split test` is data.test."""
    (tmp_path / "test").mkdir()
    monkeypatch.chdir(tmp_path)
    code, err = run_main(monkeypatch, capsys, "evaluate", many / "toy-seed1", "--split", "test", "--overwrite")
    assert code == 0, err
    assert (many / "toy-seed1" / "predictions" / "test.tsv").is_file()


def test_compare_takes_the_run_folders_of_a_glob_too(many, monkeypatch, capsys):
    """Issue 55.1, compare: `compare 'OUT/toy-seed*' ...` skips train-many's logs beside the runs."""
    for seed in (1, 2):
        if not (many / f"toy-seed{seed}" / "predictions" / "test.tsv").exists():
            api.load_run(many / f"toy-seed{seed}").evaluate("test")
    code, err = run_main(
        monkeypatch, capsys, "compare", f"{many}/toy-seed*", many / "toy-seed1", "--split", "test", "--no-evaluate"
    )
    assert code == 0, err


def test_compare_reads_a_glob_of_runs_by_the_rule_of_every_command(many, monkeypatch, capsys):
    """Issue 56 item 4: compare's `expand` kept its own glob rule beside `run_folders` and, when a glob matched
    no run folder, read what it matched (train-many's NAME.log) as predictions: now a glob of no run folder and
    no predictions TSV is the one line every command taking runs gives."""
    from structseq.compare import expand
    from structseq.run.layout import run_folders

    assert expand(f"{many}/toy-seed*") == run_folders([f"{many}/toy-seed*"])
    for pattern in (f"{many}/*.log", f"{many}/nothing*"):
        code, err = run_main(monkeypatch, capsys, "compare", pattern, many / "toy-seed1", "--split", "test")
        one_line_error(code, err, pattern, "no run folder matches")
