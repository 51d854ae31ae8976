"""Issue 55, "numbers that are not what they say": with other seeds (or another number of them) on the two sides,
`compare` tested only min(nA, nB) seed pairs and kept the rest in the mean, so its verdict could contradict its
own difference column. Now every run is tested: paired over examples where the seeds pair up (the same seeds on
both sides), else Welch's t-test over the runs' scores, the rule stated in the report. The p-value is checked
against the t distribution as mpmath computes it (an independent implementation of the incomplete beta)."""

from __future__ import annotations

import json
import math

import mpmath
import pytest
from typer.testing import CliRunner

from structseq.cli import app
from structseq.metrics import significance as sig

runner = CliRunner()
REFS = [f"w{i} x{i}" for i in range(20)]


def _write(folder, name, n_right, seed):
    """Predictions of `REFS` with the first `n_right` right and a metrics JSON stating `seed`."""
    hyps = [r if i < n_right else "zz" for i, r in enumerate(REFS)]
    path = folder / f"{name}.tsv"
    rows = ["source\treference\thypothesis"] + [f"s{i}\t{r}\t{h}" for i, (r, h) in enumerate(zip(REFS, hyps))]
    path.write_text("\n".join(rows) + "\n")
    (folder / f"{name}.metrics.json").write_text(json.dumps({"seed": seed, "checkpoint": "best"}))
    return str(path)


def _welch_p(xs, ys):
    """Welch's two-sided p by its formula, the t tail from mpmath's regularised incomplete beta."""
    ma, mb = sum(xs) / len(xs), sum(ys) / len(ys)
    va = sum((x - ma) ** 2 for x in xs) / (len(xs) - 1) / len(xs)
    vb = sum((y - mb) ** 2 for y in ys) / (len(ys) - 1) / len(ys)
    t = (ma - mb) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(xs) - 1) + vb**2 / (len(ys) - 1))
    return float(mpmath.betainc(df / 2, 0.5, 0, df / (df + t * t), regularized=True))


def _compare(tmp_path, a, b, fmt="json"):
    r = runner.invoke(app, ["compare", ",".join(a), ",".join(b), "-f", fmt, "--resamples", "200"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout) if fmt == "json" else r.stdout


def test_other_seed_counts_test_every_run_and_the_verdict_follows_the_difference(tmp_path):
    # A: seeds 1-4, two weak and two strong runs (mean 13/20); B: seeds 1-2, both 12/20 (mean 12/20).
    # Seed pairs (A1, B1), (A2, B2) alone say B is better, significantly, though A's mean is higher.
    a = [_write(tmp_path, f"a{s}", n, s) for s, n in zip((1, 2, 3, 4), (6, 6, 20, 20))]
    b = [_write(tmp_path, f"b{s}", 12, s) for s in (1, 2)]
    report = _compare(tmp_path, a, b)
    em = next(m for m in report["metrics"] if m["name"] == "exact_match")
    assert em["delta"] == pytest.approx(13 / 20 - 12 / 20)
    (test,) = em["paired"]
    assert test["a"] == [1, 2, 3, 4] and test["b"] == [1, 2] and test["test"] == "welch"
    assert test["delta"] == pytest.approx(em["delta"])  # the test weighs the same runs as the mean
    assert em["verdict"] == "="  # the big spread of A's runs: no significant difference, not "B better"
    assert report["test"]["pairs"] is None and "Welch" in report["test"]["unpaired"]

    # B's runs spread too (Welch's df well defined): p equals the formula with mpmath's t tail
    b = [_write(tmp_path, f"c{s}", n, s) for s, n in zip((5, 6, 7), (4, 5, 7))]
    md = _compare(tmp_path, a, b, "markdown")
    assert "p (Welch t over runs)" in md and "seeds do not pair up" in md
    assert "Paired test" not in md and "PairedTest" not in md  # the paragraph names no test that did not run
    report = _compare(tmp_path, a, b)
    em = next(m for m in report["metrics"] if m["name"] == "exact_match")
    xs, ys = [n / 20 for n in (6, 6, 20, 20)], [n / 20 for n in (4, 5, 7)]
    assert em["paired"][0]["p_value"] == pytest.approx(_welch_p(xs, ys), rel=1e-6)
    assert em["A"]["values"] == pytest.approx(xs) and em["B"]["values"] == pytest.approx(ys)


def test_the_same_seeds_still_pair_and_one_run_against_several(tmp_path):
    a = [_write(tmp_path, f"a{s}", 15, s) for s in (1, 2)]
    b = [_write(tmp_path, f"b{s}", 5, s) for s in (1, 2)]
    report = _compare(tmp_path, a, b)
    em = next(m for m in report["metrics"] if m["name"] == "exact_match")
    assert report["test"]["pairs"] == [[1, 1], [2, 2]] and [t["a"] for t in em["paired"]] == [1, 2]
    assert em["verdict"] == "A" and report["test"]["unpaired"] is None

    # one run against three (seeds 1 vs 4, 5, 6): that run against the others' spread, n - 1 df
    one = [_write(tmp_path, "one", 16, 1)]
    three = [_write(tmp_path, f"t{s}", n, s) for s, n in zip((4, 5, 6), (8, 10, 12))]
    report = _compare(tmp_path, one, three)
    (test,) = next(m for m in report["metrics"] if m["name"] == "exact_match")["paired"]
    t = (16 / 20 - 0.5) / (0.1 * math.sqrt(1 + 1 / 3))
    want = float(mpmath.betainc(1, 0.5, 0, 2 / (2 + t * t), regularized=True))
    assert test["test"] == "one-run" and test["df"] == 2 and test["p_value"] == pytest.approx(want, rel=1e-6)


def test_runs_test_edges():
    assert sig.runs_test([0.5, 0.5], [0.5])["p_value"] == 1.0  # no spread, equal means
    flat = sig.runs_test([0.6, 0.6], [0.5, 0.5])  # no spread: no certainty either
    assert flat["p_value"] == 1.0 and flat["delta"] == pytest.approx(0.1) and "do not vary" in flat["note"]
    assert sig.runs_test([0.9], [0.5, 0.5, 0.5])["p_value"] == 1.0
    with pytest.raises(ValueError, match="three runs"):
        sig.runs_test([0.5], [0.4])
