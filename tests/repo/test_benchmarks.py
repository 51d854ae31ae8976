"""The benchmarks run end to end at toy sizes and write what their report tables read (not timings: those are
measured quietly by hand, see docs/performance.md)."""

import json
import subprocess
import sys

from tests.fixtures.paths import ROOT


def test_context_benchmark_writes_rows_and_ratios_against_sequential(tmp_path):
    out = tmp_path / "bench.json"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_context.py"),
            "--lengths",
            "8",
            "12",
            "--variants",
            "sequential",
            "interleave",
            "--d-model",
            "16",
            "--batch",
            "2",
            "--steps",
            "1",
            "--decode-reps",
            "1",
            "--out",
            str(out),
        ],
        check=True,
        cwd=ROOT,
        capture_output=True,
    )
    d = json.loads(out.read_text())
    assert {(r["variant"], r["context_tokens"]) for r in d["rows"]} == {
        (v, n) for v in ("sequential", "interleave") for n in (8, 12)
    }
    for r in d["rows"]:
        assert r["train_target_tokens_per_s"] > 0 and r["decode_sentences_per_s"] > 0 and r["parameters"] > 0
        assert r["variant"] != "sequential" or r["train_speed_vs_sequential"] == 1.0
    assert len(d["loadavg_before"]) == 3 and d["settings"]["lengths"] == [8, 12]


def test_count_ops_counts_over_a_checkout_whose_trainer_predates_step(monkeypatch, capsys):
    """`count_ops.py --src OLD/src` (docs/performance.md counts d15a89c, whose Trainer has no step(): its private
    `_update` returned (loss, target tokens)): the worker counts such a Trainer, the same numbers as step()'s."""
    import importlib.util

    from structseq.train.loop import Trainer

    spec = importlib.util.spec_from_file_location("count_ops", ROOT / "benchmarks" / "count_ops.py")
    count_ops = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(count_ops)
    config, overrides = count_ops.MODELS["cogs/transformer"]
    run = {"config": config, "overrides": overrides, "set": [], "smoke": True, "warmup": 1, "updates": 1}
    run.update(data_root=None, accelerator=False)
    count_ops.worker(run)
    new = json.loads(capsys.readouterr().out.splitlines()[-1])
    step = Trainer.step
    monkeypatch.delattr(Trainer, "step")
    monkeypatch.setattr(Trainer, "_update", lambda self: tuple(step(self))[:2], raising=False)
    count_ops.worker(run)
    old = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert old == new and new["target_tokens"] > 0 and new["ops_per_update"] > 0
