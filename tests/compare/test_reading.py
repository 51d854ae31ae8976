"""Issue 47 item 5, through the CLI: `compare` reads as sacrebleu and compare-mt users expect: each system's
bootstrap interval as sacrebleu computes it (also with one seed), intervals inside the metric's range, one
verdict across seeds with its method stated, the systems' names in the columns, booktabs LaTeX."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from structseq.cli import app
from structseq.metrics import significance as sig
from tests.compare.test_compare import _refs, _system, _write_predictions

runner = CliRunner()


def _compare(*args):
    r = runner.invoke(app, ["compare", *map(str, args)])
    assert r.exit_code == 0, r.output
    return r.stdout


def test_one_seed_gets_sacrebleus_bootstrap_interval(tmp_path):
    refs = _refs(200)
    a = _write_predictions(tmp_path / "a.tsv", refs, _system(refs, 0.5, 1), seed=1)
    b = _write_predictions(tmp_path / "b.tsv", refs, _system(refs, 0.8, 2), seed=1)
    report = json.loads(_compare(a, b, "-f", "json", "--resamples", "300", "--seed", "77"))
    bleu = next(m for m in report["metrics"] if m["name"] == "bleu")
    paired = sig.sacrebleu_paired(
        _system(refs, 0.5, 1), _system(refs, 0.8, 2), refs, resamples=300, seed=77
    )  # sacrebleu's own paired bs gives each system's mean and half-width
    assert bleu["A"]["bootstrap"][0] == pytest.approx({"mean": paired["mean_a"], "ci": paired["ci_a"]})
    assert bleu["B"]["bootstrap"][0] == pytest.approx({"mean": paired["mean_b"], "ci": paired["ci_b"]})
    assert bleu["A"]["interval"] == pytest.approx(
        [paired["mean_a"] - paired["ci_a"], paired["mean_a"] + paired["ci_a"]]
    )
    em = next(m for m in report["metrics"] if m["name"] == "exact_match")
    right = np.array([h == r for h, r in zip(_system(refs, 0.5, 1), refs)], dtype=float)
    idx = np.random.default_rng(77).choice(len(refs), size=(300, len(refs)), replace=True)
    scores = np.sort(right[idx].mean(1))  # the hand formula: 2.5% and 97.5% order statistics (n // 40)
    half = (scores[300 - 300 // 40 - 1] - scores[300 // 40]) / 2
    assert em["A"]["bootstrap"][0] == pytest.approx({"mean": scores.mean(), "ci": half})
    assert em["verdict"] == "B"  # 0.5 vs 0.8 of 200 examples right


def test_intervals_stay_in_range_and_one_verdict_across_seeds(tmp_path):
    refs = _refs(150)
    quality = {1: 0.05, 2: 0.95, 3: 0.5}  # seeds so far apart that the t interval leaves [0, 1]
    a = [_write_predictions(tmp_path / f"a{s}.tsv", refs, _system(refs, q, s), s) for s, q in quality.items()]
    b = [_write_predictions(tmp_path / f"b{s}.tsv", refs, _system(refs, q, 10 + s), s) for s, q in quality.items()]
    spec_a, spec_b = ",".join(map(str, a)), ",".join(map(str, b))
    report = json.loads(_compare(spec_a, spec_b, "-f", "json", "--resamples", "200"))
    em = next(m for m in report["metrics"] if m["name"] == "exact_match")
    assert em["A"]["ci"][0] < 0 and em["A"]["ci"][1] > 1  # the raw t interval, kept in the JSON
    assert em["A"]["interval"] == [0.0, 1.0] == em["A"]["range_ci"]
    bleu = next(m for m in report["metrics"] if m["name"] == "bleu")
    assert 0.0 <= bleu["A"]["interval"][0] and bleu["A"]["interval"][1] <= 100.0
    assert em["verdict"] == "=" and "intersection-union" in report["test"]["verdict"]
    md = _compare(spec_a, spec_b, "--resamples", "200", "--names", "lstm,lex")
    header = next(line for line in md.splitlines() if line.startswith("| metric"))
    assert "lstm mean ± sd" in header and "lex 95% CI" in header and "lstm − lex" in header and "verdict" in header
    assert "no significant difference" in md and "Verdict: one test: p < 0.05" in md
    better = [_write_predictions(tmp_path / f"c{s}.tsv", refs, list(refs), s) for s in quality]  # always right
    md = _compare(",".join(map(str, better)), spec_b, "--resamples", "200", "--names", "oracle,lex")
    em_row = next(line for line in md.splitlines() if line.startswith("| exact_match"))
    assert em_row.rstrip(" |").endswith("oracle better")
    tex = _compare(",".join(map(str, better)), spec_b, "--resamples", "200", "-f", "latex")
    assert "\\toprule" in tex and "\\midrule" in tex and "\\bottomrule" in tex and "\\hline" not in tex
