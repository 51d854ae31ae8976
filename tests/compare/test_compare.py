"""`structseq compare` and its statistics (`structseq.metrics.significance`): values, not only that it runs.

Mean ± sd and the t interval equal numpy and a hand formula with t quantiles from a printed table; the paired
tests give p = 1 for identical systems and a small p for a planted difference; the BLEU test's p-value is
sacrebleu's own `paired_bs` / `paired_ar` for the same seed and resamples; the Markdown, LaTeX and JSON reports
parse; runs are read through the predictions `evaluate` wrote (evaluated first when missing)."""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import sys

import numpy as np
import pytest

from structseq.compare import check_same_examples, compare, load_system, predictions_path
from structseq.compare.render import render
from structseq.errors import StructseqError
from structseq.metrics import significance as sig

#: two-sided 95% t quantiles t(0.975, df) from a printed table (df: value)
T_TABLE = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    20: 2.086,
    30: 2.042,
}
WORDS = "the a cat dog sat on mat ran fast slow red blue".split()


def test_t_quantiles_match_the_printed_table():
    for df, t in T_TABLE.items():
        assert sig.t_quantile(0.975, df) == pytest.approx(t, abs=6e-4)
    assert sig.t_quantile(0.5, 7) == pytest.approx(0.0, abs=1e-9)
    assert sig.t_quantile(0.025, 4) == pytest.approx(-2.776, abs=6e-4)
    assert sig.t_cdf(sig.t_quantile(0.9, 3.5), 3.5) == pytest.approx(0.9, abs=1e-10)


def test_mean_sd_and_confidence_interval_equal_numpy_and_the_hand_formula():
    xs = [0.81, 0.79, 0.83, 0.80, 0.85]
    s = sig.seed_summary(xs)
    assert s["mean"] == pytest.approx(np.mean(xs)) and s["sd"] == pytest.approx(np.std(xs, ddof=1))
    half = T_TABLE[4] * np.std(xs, ddof=1) / math.sqrt(5)
    assert s["ci"] == pytest.approx([np.mean(xs) - half, np.mean(xs) + half], abs=1e-5)
    # sd = sqrt(0.00232 / 4) = 0.0241
    assert sig.format_mean_sd(xs) == f"{np.mean(xs):.3f} ± {np.std(xs, ddof=1):.3f}" == "0.816 ± 0.024"
    one = sig.seed_summary([0.5])
    assert one["sd"] is None and one["ci"] is None and sig.format_mean_sd([0.5], 2) == "0.50"
    ninety = sig.confidence_interval([1.0, 2.0, 4.0], level=0.90)  # t(0.95, 2) = 2.920
    assert ninety[1] - np.mean([1, 2, 4]) == pytest.approx(2.920 * np.std([1, 2, 4], ddof=1) / math.sqrt(3), abs=1e-3)


def _refs(n=300, seed=0):
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(n)]


def _system(refs, p_right, seed):
    rng = random.Random(seed)
    return [
        r if rng.random() < p_right else " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for r in refs
    ]


def test_ratio_statistics_give_the_registered_metrics():
    from structseq.metrics.base import MetricInputs
    from structseq.metrics.report import compute_metric

    refs = _refs(80)
    hyps = _system(refs, 0.5, 1)
    inputs = MetricInputs(hyps, refs)
    for m in ("exact_match", "token_accuracy"):
        assert sig.ratio_score(sig.ratio_stats(m, hyps, refs)) == pytest.approx(compute_metric(m, inputs)["score"])


@pytest.mark.parametrize("test", sig.TESTS)
def test_paired_tests_identical_systems_and_a_planted_difference(test):
    refs = _refs()
    a = _system(refs, 0.5, 1)
    for metric in ("exact_match", "token_accuracy"):
        sa = sig.ratio_stats(metric, a, refs)
        same = sig.paired_test(sa, sig.ratio_stats(metric, list(a), refs), test, 1000, 7)
        assert same["p_value"] == 1.0 and same["delta"] == 0.0
        better = sig.ratio_stats(metric, _system(refs, 0.75, 2), refs)  # planted: 75% right against 50%
        planted = sig.paired_test(better, sa, test, 1000, 7)
        assert planted["delta"] > 0.1 and planted["p_value"] < 0.05
        assert planted["p_value"] >= 1 / 1001  # the +1 correction
        again = sig.paired_test(better, sa, test, 1000, 7)
        assert again == planted  # seeded
    # two systems of the same quality: no significant difference (p well above 0.05)
    even = sig.paired_test(
        sig.ratio_stats("exact_match", _system(refs, 0.5, 3), refs),
        sig.ratio_stats("exact_match", _system(refs, 0.5, 4), refs),
        test,
        1000,
        7,
    )
    assert abs(even["delta"]) < 0.05 and even["p_value"] > 0.2


@pytest.mark.parametrize("test,kind", [("bootstrap", "bs"), ("ar", "ar")])
def test_bleu_paired_test_is_sacrebleus_own(test, kind, monkeypatch):
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    refs = _refs(200)
    a, b = _system(refs, 0.5, 1), _system(refs, 0.6, 2)
    ours = sig.sacrebleu_paired(a, b, refs, test=test, resamples=500, seed=4321)
    monkeypatch.setenv("SACREBLEU_SEED", "4321")
    _, scores = PairedTest([("a", a), ("b", b)], {"BLEU": BLEU()}, [refs], test_type=kind, n_samples=500)()
    assert ours["p_value"] == scores["BLEU"][1].p_value and ours["score_b"] == scores["BLEU"][1].score
    assert ours["score_a"] == scores["BLEU"][0].score and 0 < ours["p_value"] < 1
    same = sig.sacrebleu_paired(a, list(a), refs, test=test, resamples=500, seed=4321)
    assert same["p_value"] == 1.0 and same["sacrebleu_p_value"] == pytest.approx(1 / 501)  # its strict count


def _write_predictions(path, refs, hyps, seed=None, task="seq2seq"):
    lines = ["source\treference\thypothesis\tcorrect\tcategory"]
    lines += [f"src {i}\t{r}\t{h}\t{int(r == h)}\t" for i, (r, h) in enumerate(zip(refs, hyps))]
    path.write_text("\n".join(lines) + "\n")
    if seed is not None:
        report = {
            "seed": seed,
            "task": task,
            "checkpoint": "best",
            "nltk_bleu": {"score": 0.1 * seed, "signature": "nltk_bleu|scale:fraction", "n": len(refs)},
        }
        path.with_name(path.name[:-4] + ".metrics.json").write_text(json.dumps(report))
    return path


def _sides(tmp_path, refs, seeds=(1, 2, 3)):
    a = [_write_predictions(tmp_path / f"a{s}.tsv", refs, _system(refs, 0.5, 10 * s), s) for s in seeds]
    b = [_write_predictions(tmp_path / f"b{s}.tsv", refs, _system(refs, 0.7, 10 * s + 1), s) for s in seeds]
    return a, b


def test_compare_over_seeds_summaries_pairs_and_pooling(tmp_path):
    refs = _refs(150)
    _sides(tmp_path, refs)
    a, b = load_system(str(tmp_path / "a*.tsv"), "A"), load_system(str(tmp_path / "b*.tsv"), "B")
    assert [o.seed for o in a] == [1, 2, 3]
    report = compare(a, b, resamples=200)
    em = next(m for m in report["metrics"] if m["name"] == "exact_match")
    xs = [sum(r == h for r, h in zip(refs, o.hypotheses)) / len(refs) for o in a]
    assert em["A"]["values"] == pytest.approx(xs) and em["A"]["mean"] == pytest.approx(np.mean(xs))
    assert em["A"]["ci"][1] - em["A"]["mean"] == pytest.approx(T_TABLE[2] * np.std(xs, ddof=1) / math.sqrt(3), rel=1e-3)
    assert [(t["a"], t["b"]) for t in em["paired"]] == [(1, 1), (2, 2), (3, 3)]
    assert all(t["p_value"] < 0.05 and t["delta"] < 0 for t in em["paired"])
    bleu = next(m for m in report["metrics"] if m["name"] == "bleu")
    assert bleu["signature"].endswith("|scale:percent") and len(bleu["paired"]) == 3
    nltk = next(m for m in report["metrics"] if m["name"] == "nltk_bleu")  # from the metrics JSONs only
    assert nltk["paired"] is None and nltk["A"]["values"] == pytest.approx([0.1, 0.2, 0.3])
    pooled = compare(a, b, resamples=200, pairing="pooled")
    em = next(m for m in pooled["metrics"] if m["name"] == "exact_match")
    (t,) = em["paired"]
    assert t["a"] == [1, 2, 3] and t["score_a"] == pytest.approx(np.mean(xs)) and t["p_value"] < 0.05


def test_compare_recomputes_the_metrics_the_task_registers(tmp_path, monkeypatch):
    """Issue 56 item 4: compare kept its own metric list per kind of task beside the registry; now the task's
    registered metrics (`Task.metrics`) that have a paired test decide, in the task's order."""
    from structseq.registry import TASKS

    refs = _refs(40)
    a, b = _sides(tmp_path, refs, seeds=(1,))

    def tested() -> list[str]:
        report = compare(load_system(str(a[0]), "A"), load_system(str(b[0]), "B"), resamples=20)
        return [m["name"] for m in report["metrics"] if m["paired"] is not None]

    assert tested() == ["exact_match", "token_accuracy", "bleu"]
    monkeypatch.setattr(TASKS.get("seq2seq"), "metrics", ("bleu", "nltk_bleu", "exact_match"))
    assert tested() == ["bleu", "exact_match"]


def test_reports_parse_in_every_format(tmp_path):
    refs = _refs(100)
    _sides(tmp_path, refs, seeds=(1, 2))
    report = compare(
        load_system(str(tmp_path / "a*.tsv"), "A"),
        load_system(str(tmp_path / "b*.tsv"), "B"),
        resamples=100,
        test="ar",
        names=("lstm", "lex"),
        split="test",
    )
    assert json.loads(render(report, "json")) == json.loads(json.dumps(report))
    md = render(report, "markdown")
    assert "approximate randomisation" in md and "A seed 1 vs B seed 1" in md and "95% t interval" in md
    table = [line for line in md.splitlines() if line.startswith("|")]
    assert all(line.count("|") == 9 for line in table) and len(table) == 2 + len(report["metrics"])
    assert table[0].split("|")[2].strip() == "lstm mean ± sd" and "lstm − lex" in table[0]  # names in the columns
    rows = {line.split("|")[1].strip(): line.split("|")[2:-1] for line in table[2:]}
    em = next(m for m in report["metrics"] if m["name"] == "exact_match")
    assert rows["exact_match"][0].strip() == f"{em['A']['mean']:.3f} ± {em['A']['sd']:.3f}"
    tex = render(report, "latex")
    body = tex[tex.index(r"\begin{tabular}") : tex.index(r"\end{tabular}")]
    assert tex.count(r"\begin{tabular}{lrrrrrrl}") == 1 and tex.rstrip().endswith(r"\end{tabular}")
    assert r"\toprule" in body and r"\midrule" in body and r"\hline" not in tex  # booktabs
    lines = [x for x in body.splitlines()[1:] if x.endswith(r"\\")]
    assert len(lines) == 1 + len(report["metrics"])
    assert all(len(re.findall(r"(?<!\\)&", x)) == 7 for x in lines)  # 8 cells a row, escaped & not counted
    assert r"exact\_match" in body and body.count("{") == body.count("}")
    assert all(x.startswith("%") for x in tex[: tex.index(r"\begin")].splitlines())


def test_different_examples_and_missing_predictions_are_errors(tmp_path):
    refs = _refs(20)
    a = _write_predictions(tmp_path / "a.tsv", refs, refs)
    b = _write_predictions(tmp_path / "b.tsv", refs[:-1] + ["other words"], refs)
    with pytest.raises(StructseqError, match=r"differ at example 20 \(reference"):
        check_same_examples(load_system(str(a), "A") + load_system(str(b), "B"))
    run = tmp_path / "run"
    (run / "predictions").mkdir(parents=True)
    (run / "config.yaml").write_text("{}\n")
    with pytest.raises(StructseqError, match=r"no predictions for split 'test'.*structseq evaluate .*run --split test"):
        load_system(str(run), "A", "test", evaluate=False)
    with pytest.raises(StructseqError, match="needs --split"):
        load_system(str(run), "A")
    with pytest.raises(StructseqError, match="nothing-\\*: no run folder matches this pattern"):
        load_system(str(tmp_path / "nothing-*"), "A")  # the words of every command taking runs (run_folders)


def test_cli_compares_runs_evaluating_the_missing_predictions(tmp_path):
    from structseq import api
    from tests.fixtures.toy import toy_config, toy_tsv

    data = toy_tsv(tmp_path)
    runs = []
    for seed in (1, 2):
        cfg = toy_config(data, seed=seed, max_steps=4, valid_every=0)
        api.train(cfg, tmp_path / f"run{seed}", show_progress=False)
        runs.append(tmp_path / f"run{seed}")
    api.load_run(runs[0]).evaluate(str(data))  # run 2 has no predictions yet: compare evaluates it
    assert not predictions_path(runs[1], str(data)).exists()
    exe = [sys.executable, "-m", "structseq.cli", "compare"]
    r = subprocess.run(
        exe + [str(runs[0]), str(runs[1]), "--split", str(data), "-f", "json", "--resamples", "200"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "no predictions" in r.stderr and predictions_path(runs[1], str(data)).exists()
    report = json.loads(r.stdout)
    assert [o["seed"] for o in report["systems"]["B"]["outputs"]] == [2] and report["n_examples"] == 60
    m = json.loads(predictions_path(runs[0], str(data)).with_suffix(".metrics.json").read_text())
    em = next(x for x in report["metrics"] if x["name"] == "exact_match")
    assert em["A"]["values"] == [m["exact_match"]["score"]]  # the evaluation's own number
    r = subprocess.run(exe + [str(runs[0]), str(runs[1]), str(runs[0])], capture_output=True, text=True)
    assert r.returncode == 2 and "expected two systems A and B, got 3" in r.stderr and "quote a glob" in r.stderr
