"""Issue 47 items 2 and 3 through the CLI: validation reaches the console as fairseq prints it, with a closing
summary; seeds of one config share the held-out sample and vocabularies, so their ensemble just works."""

from __future__ import annotations

import re

import yaml
from typer.testing import CliRunner

from structseq.cli import app
from test_train import toy_config, toy_tsv

runner = CliRunner()


def _config(tmp_path, **train):
    """The toy config as a YAML file (`valid` held out of `train` when `holdout` is true)."""
    cfg = toy_config(toy_tsv(tmp_path), **train).to_dict()
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_train_prints_each_validation_and_a_closing_summary(tmp_path):
    cfg = _config(tmp_path, max_steps=4, valid_every=2, log_every=2, valid_metric="exact_match")
    r = runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    lines = [x for x in r.output.splitlines() if x.startswith("valid | ")]
    assert [re.match(r"valid \| update (\d+) \|", x).group(1) for x in lines] == ["2", "4"]
    assert all("| valid_loss " in x and "| valid_exact_match " in x and "| best_exact_match " in x for x in lines)
    summary = re.search(r"best exact_match (\S+) at update (\d+) → (\S+); last (\S+) at update 4 → (\S+)", r.output)
    assert summary, r.output
    assert summary.group(3) == str(tmp_path / "run" / "checkpoints" / "best.pt")
    assert summary.group(5) == str(tmp_path / "run" / "checkpoints" / "last.pt")
    values = [float(re.search(r"valid_exact_match (\S+)", x).group(1)) for x in lines]
    assert float(summary.group(1)) == max(values) and int(summary.group(2)) == 2 * (values.index(max(values)) + 1)
    quiet = runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "quiet"), "-q"])
    assert quiet.exit_code == 0 and "valid | " not in quiet.output
