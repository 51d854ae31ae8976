"""`structseq compose` commands end to end on toy files (the ensemble is faked)."""

from __future__ import annotations

import json
import zlib

import pytest
import torch
from typer.testing import CliRunner

from structseq.cli import compose as cli
from structseq.compose.select import read_degree_tsv, read_uncertainty_tsv
from tests.compose.test_select import toy_corpus
from tests.compose.test_uncertainty import FakeRun

runner = CliRunner()


@pytest.fixture
def files(tmp_path):
    train, pool, targets = toy_corpus()
    (tmp_path / "train.txt").write_text("\n".join(train) + "\n")
    (tmp_path / "pool.txt").write_text("\n".join(pool) + "\n")
    (tmp_path / "pool.ref").write_text("\n".join(targets) + "\n")
    return tmp_path


@pytest.fixture
def fake_ensemble(monkeypatch):
    loaded = []

    def load(run_dirs):
        loaded.append([str(p) for p in run_dirs])
        return [FakeRun(i) for i, _ in enumerate(run_dirs)]

    monkeypatch.setattr(cli, "load_ensemble", load)
    return loaded


def test_degree_command(files):
    out = files / "scores.tsv"
    result = runner.invoke(
        cli.app,
        ["degree", "--train", str(files / "train.txt"), "--pool", str(files / "pool.txt"), "-o", str(out), "--explain"],
    )
    assert result.exit_code == 0, result.output
    table = read_degree_tsv(out)
    assert len(table.sentences) == 300 and table.lines[0] == 1
    header = out.read_text().splitlines()[0].split("\t")
    assert header == ["line", "length", "n_oov", "cover_size", "degree", "cover", "sentence"]
    row = out.read_text().splitlines()[1].split("\t")
    assert row[5].replace(" | ", " ") == row[6] or row[4] == ""
    stdout = runner.invoke(
        cli.app, ["degree", "--train", str(files / "train.txt"), "--pool", str(files / "pool.txt"), "--max-n", "2"]
    )
    assert stdout.exit_code == 0 and stdout.stdout.startswith("line\tlength")
    negative = runner.invoke(
        cli.app, ["degree", "--train", str(files / "train.txt"), "--pool", str(files / "pool.txt"), "--max-n", "-1"]
    )
    assert negative.exit_code == 2 and "--max-n must be >= 1, or 0 for no bound" in " ".join(negative.output.split())
    assert "max_n" not in negative.output
    missing = runner.invoke(cli.app, ["degree", "--train", str(files / "nope.txt"), "--pool", str(files / "pool.txt")])
    assert missing.exit_code == 2 and "no such file" in missing.output


def test_uncertainty_and_build_commands(files, fake_ensemble):
    for name in ("seed1", "seed2", "seed3"):  # run folders (rundir.run_folders: a config.yaml); train-many's log not
        (files / "runs" / name).mkdir(parents=True)
        (files / "runs" / name / "config.yaml").write_text("{}\n")
    (files / "runs" / "seed1.log").write_text("train-many's log of seed 1\n")
    out = files / "bench"
    data = ["--train", str(files / "train.txt"), "--pool", str(files / "pool.txt")]
    sizes = ["-k", "40", "-d", "5", "-r", "20", "-s", "8", "--seed", "1"]
    result = runner.invoke(
        cli.app,
        [
            "build",
            *data,
            *sizes,
            "-o",
            str(out),
            "--ensemble",
            str(files / "runs" / "seed*"),
            "--pool-target",
            str(files / "pool.ref"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert len(fake_ensemble[-1]) == 3
    report = json.loads((out / "report.json").read_text())
    assert report["selection"]["selected"] == 8 and report["config"]["seed"] == 1
    assert len((out / "test.ref").read_text().splitlines()) == 8

    unc = files / "unc.tsv"
    result = runner.invoke(
        cli.app,
        [
            "uncertainty",
            "--ensemble",
            str(files / "runs" / "seed1"),
            "--ensemble",
            str(files / "runs" / "seed2"),
            "--ensemble",
            str(files / "runs" / "seed3"),
            "--pool",
            str(out / "candidates.txt"),
            "-o",
            str(unc),
        ],
    )
    assert result.exit_code == 0, result.output
    assert unc.read_text().splitlines()[0].split("\t") == [
        "index",
        "n_rows",
        "total",
        "data",
        "mi",
        "epkl",
        "rmi",
        "source",
        "hypothesis",
    ]
    resumed = files / "resumed"
    result = runner.invoke(cli.app, ["build", *data, *sizes, "-o", str(resumed), "--uncertainty", str(unc)])
    assert result.exit_code == 0, result.output
    assert (resumed / "test.src").read_text() == (out / "test.src").read_text()

    too_few = runner.invoke(
        cli.app, ["build", *data, "-o", str(files / "x"), "-k", "10", "-d", "5", "-r", "20", "-s", "8"]
    )
    assert too_few.exit_code == 2 and "exceeds candidates" in too_few.output
    no_match = runner.invoke(
        cli.app, ["uncertainty", "--ensemble", str(files / "runs" / "none*"), "--pool", str(files / "pool.txt")]
    )
    assert no_match.exit_code == 2 and "no run folder matches" in no_match.output


def test_stats_and_plot_commands(files):
    test_a, test_b = files / "a.txt", files / "b.txt"
    test_a.write_text("w1 w2 w3\nw4 w5\n")
    test_b.write_text("w1 zz\n")
    out = files / "stats.json"
    result = runner.invoke(
        cli.app,
        [
            "stats",
            "--train",
            str(files / "train.txt"),
            "--test",
            str(test_a),
            "--test",
            str(test_b),
            "--tagger",
            "none",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text())
    assert [r["test"] for r in rows] == [str(test_a), str(test_b)] and rows[1]["with_oov"] == 1
    tsv = files / "stats.tsv"
    assert (
        runner.invoke(
            cli.app,
            ["stats", "--train", str(files / "train.txt"), "--test", str(test_a), "--tagger", "none", "-o", str(tsv)],
        ).exit_code
        == 0
    )
    assert tsv.read_text().startswith("test\texamples\tavg_degree")

    degree = files / "scores.tsv"
    assert (
        runner.invoke(
            cli.app,
            ["degree", "--train", str(files / "train.txt"), "--pool", str(files / "pool.txt"), "-o", str(degree)],
        ).exit_code
        == 0
    )
    (files / "A.tsv").write_text("".join(f"{i % 7}\n" for i in range(300)))
    (files / "B.tsv").write_text("line\tscore\n" + "".join(f"{i + 1}\t{i % 5}\n" for i in range(300)))
    fig, bins = files / "fig.png", files / "bins.tsv"
    result = runner.invoke(
        cli.app,
        [
            "plot",
            "--scores",
            str(files / "A.tsv"),
            str(files / "B.tsv"),
            "--degree",
            str(degree),
            "-o",
            str(fig),
            "--bins",
            "4",
            "--table",
            str(bins),
            "--labels",
            "new",
            "old",
        ],
    )
    assert result.exit_code == 0, result.output
    assert fig.read_bytes()[:4] == b"\x89PNG" and len(bins.read_text().splitlines()) == 5
    both = runner.invoke(cli.app, ["plot", "--degree", str(degree), "-o", str(fig)])
    assert both.exit_code == 2 and "exactly one" in both.output


def test_dataset_specs_read_registered_splits(tmp_path):
    from structseq.compose import read_sentences

    sources, targets = read_sentences("colors:train"), read_sentences("colors:train", side="target")
    assert len(sources) == len(targets) == 14
    assert sources[0] == "dax" and targets[0] == "RED"
    out = tmp_path / "s.json"
    result = runner.invoke(
        cli.app, ["stats", "--train", "colors:train", "--test", "colors:test", "--tagger", "none", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())[0]["examples"] == 10


def test_name_split_specs_read_from_the_data_root_option(tmp_path):
    """`compose --data-root DIR ... cogs:train` reads DIR/cogs, not the default data root."""
    from typer.testing import CliRunner

    from structseq.cli.compose import app
    from structseq.compose import corpus

    (tmp_path / "cogs").mkdir()
    (tmp_path / "cogs" / "train.tsv").write_text("zorp blick\tX\tin_distribution\n" * 3)
    (tmp_path / "pool.txt").write_text("zorp blick\n")
    try:
        result = CliRunner().invoke(
            app,
            [
                "--data-root",
                str(tmp_path),
                "degree",
                "--train",
                "cogs:train",
                "--pool",
                str(tmp_path / "pool.txt"),
                "--min-count",
                "1",
            ],
        )
    finally:
        corpus.use_data_root(None)
    assert result.exit_code == 0, result.output
    assert "zorp blick" in result.output


class NearTieRun(FakeRun):
    """The same distributions for every sentence of a length, nudged by up to 1e-6 per sentence: uncertainties that
    differ only past the 6th significant digit (the ties the TSV's 6 digits made, issue 55)."""

    def token_log_probs(self, sources, targets):
        out = []
        for source, target in zip(sources, targets):
            rows = len(target.split()) + 1
            base = torch.randn(rows, self.vocab, generator=torch.Generator().manual_seed(self.member + 100 * rows))
            nudge = (zlib.crc32(source.encode()) % 997) * 1e-9
            out.append(torch.log_softmax(base.double() * (1 + nudge), -1))
        return out


def test_both_react_routes_select_the_same_test_set(files, monkeypatch):
    """One step (`build --ensemble`) and two (`build`, `uncertainty` on its candidates, `build --uncertainty`)."""
    monkeypatch.setattr(cli, "load_ensemble", lambda dirs: [NearTieRun(i) for i, _ in enumerate(dirs)])
    members = sum((["--ensemble", str(files / f"run{i}")] for i in range(3)), [])
    data = ["--train", str(files / "train.txt"), "--pool", str(files / "pool.txt")]
    sizes = ["-k", "40", "-d", "5", "-r", "20", "-s", "8", "--seed", "3"]
    one = runner.invoke(cli.app, ["build", *data, *sizes, "-o", str(files / "one"), *members])
    assert one.exit_code == 0, one.output
    two = runner.invoke(cli.app, ["build", *data, *sizes, "-o", str(files / "two")])
    assert two.exit_code == 0, two.output
    table = files / "two.tsv"
    scored = ["uncertainty", *members, "--pool", str(files / "two" / "candidates.txt"), "-o", str(table)]
    assert runner.invoke(cli.app, scored).exit_code == 0
    assert table.read_bytes() == (files / "one" / "uncertainty.tsv").read_bytes()
    resumed = runner.invoke(cli.app, ["build", *data, *sizes, "-o", str(files / "two"), "--uncertainty", str(table)])
    assert resumed.exit_code == 0, resumed.output
    for name in ("test.src", "selected.tsv"):
        assert (files / "two" / name).read_bytes() == (files / "one" / name).read_bytes(), name
    rmi = read_uncertainty_tsv(table).measures["rmi"]
    assert len(set(rmi.tolist())) == len(rmi) > len({f"{v:.6g}" for v in rmi.tolist()})  # near ties, kept apart
