"""The small parsers and intervals at their boundaries (issue 52's surviving mutants): a value holding the
separator (`--set KEY=a=b`, `LABEL=FILE` with `=` in the file name) splits at the first `=`; a figure's unknown
suffix is refused by name; a bootstrap interval at level L is the two-sided percentile interval, against a plain
numpy loop."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from structseq import report
from structseq.config import config_from_dict, load_config, moved_paths
from structseq.metrics import significance as sig
from tests.fixtures.cli_run import one_line_error, run_main
from tests.fixtures.paths import ROOT

CONFIG = ROOT / "configs" / "scan-jump" / "lstm-256.yaml"


def test_set_splits_at_the_first_equals_sign(tmp_path, monkeypatch, capsys):
    """`--set KEY=VALUE` whose VALUE holds `=`: the key is what comes before the first `=` (a path may hold one),
    through `structseq train` (its error names the whole value) and the Python API; a moved folder
    (`--set model.pretrained=DIR`, `config.moved_paths`) too."""
    data = tmp_path / "a=b.tsv"  # not there: train's error names it whole
    args = ["train", CONFIG, "--set", "data.dataset=files", "--set", f"data.train={data}", "--out", tmp_path / "r"]
    one_line_error(*run_main(monkeypatch, capsys, *args), f"'data.train': '{data}' is neither a file")
    cfg = load_config(CONFIG, ["data.train=x=1.tsv", "train.init_from=runs/lr=0.1-s1"])
    assert cfg.data.train == "x=1.tsv" and cfg.train.init_from == "runs/lr=0.1-s1"
    hf = config_from_dict({"task": "hf-seq2seq", "model": {"arch": "hf-seq2seq", "pretrained": str(tmp_path)}})
    moved = moved_paths(hf, [f"model.pretrained={tmp_path}/v=2"], "RUN")
    assert moved.model.pretrained == f"{tmp_path}/v=2"


def _ops(path: Path, count: float) -> Path:
    path.write_text(json.dumps({"command": "c", "rows": [{"model": "lstm", "ops_per_update": count}]}), "utf-8")
    return path


def test_label_file_splits_at_the_first_equals_sign(tmp_path):
    """`LABEL=FILE` whose FILE holds `=` (`before=runs/lr=0.1.json`): the label is what comes before the first
    `=`, and the file is read whole."""
    (tmp_path / "lr=0.1").mkdir()
    before, after = _ops(tmp_path / "lr=0.1" / "a=1.json", 300), _ops(tmp_path / "b.json", 200)
    out = report.render(["ops", "ops", f"old={before}", f"new={after}"])
    assert "| model | old | new | old / new |" in out and "| lstm | 300 | 200 | 1.50 |" in out


def test_a_figure_with_an_unknown_suffix_is_refused_naming_it(tmp_path, monkeypatch, capsys):
    """`report results ... --plot curve.xyz`: one line naming the file and its suffix, nothing written (not
    matplotlib's error turned into 'a record is not of the shape')."""
    final, curve = tmp_path / "r.jsonl", tmp_path / "c.jsonl"
    rec = {"config": "c.yaml", "overrides": [], "split": "test", "seed": 1, "run_dir": "runs/s1", "steps": 100}
    rec["metrics"] = {"exact_match": {"score": 0.5}}
    final.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    curve.write_text(json.dumps({**rec, "step": 50}) + "\n", encoding="utf-8")
    plot = tmp_path / "curve.xyz"
    args = ["report", "results", final, "--curve", curve, "--curve-only", "--plot", plot]
    one_line_error(*run_main(monkeypatch, capsys, *args), f"{plot}: cannot draw a .xyz file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "r.jsonl"]


@pytest.mark.parametrize("level", [0.95, 0.9, 0.5])
def test_the_paired_bootstrap_interval_is_the_two_sided_percentile_interval(level):
    """`delta_ci` at `level`: the (1 - level)/2 and 1 - (1 - level)/2 percentiles of the resampled deltas, a plain
    loop over numpy's resamples (the same generator, seed and draws); a one-sided tail (a 90% interval called
    95%) differs from it."""
    rng = np.random.default_rng(5)
    a = np.array([[c, 1.0] for c in rng.random(60) < 0.7])
    b = np.array([[c, 1.0] for c in rng.random(60) < 0.5])
    resamples, seed = 2000, 11
    idx = np.random.default_rng(seed).integers(0, len(a), size=(resamples, len(a)))
    deltas = [a[row, 0].sum() / a[row, 1].sum() - b[row, 0].sum() / b[row, 1].sum() for row in idx]
    tail = 100 * (1 - level) / 2
    want = np.percentile(deltas, [tail, 100 - tail])
    got = sig.paired_bootstrap(a, b, resamples=resamples, seed=seed, level=level)["delta_ci"]
    assert got == pytest.approx(want.tolist(), abs=1e-12)
    one_sided = np.percentile(deltas, [2 * tail, 100 - 2 * tail])
    assert not np.allclose(got, one_sided)
