"""The GPU readiness pieces cannot rot where no GPU is (issue 33): a subset of the `gpu` tests runs on the CPU,
and scripts/device_check.sh, device_ab.sh and device_reproduce.sh run end to end in their --cpu-smoke setting
(the whole lease plan: tests/repo/test_lease_plan.py, slow)."""

import json
import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.fixtures.paths import ROOT

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHON": sys.executable, "STRUCTSEQ_LEARNED_SEEDS": "1"}  # SMOKE's ids
#: the gpu tests run here on the CPU: one architecture through training, numerics, decoding, syncs and resume;
#: a pretrained one (on the random BART the gpu tests build) through training
SMOKE = [
    f"tests/train/test_gpu.py::{name}"
    for name in (
        "test_every_architecture_trains_and_its_loss_falls[transformer-fp32]",
        "test_every_architecture_trains_and_its_loss_falls[rdangle-pretrained-fp32]",  # its tiny BART
        "test_teacher_forced_equals_incremental[transformer]",
        "test_decoding_on_the_device_equals_the_cpu[transformer]",
        "test_no_sync_per_update_beyond_the_logging_interval[transformer]",
        "test_resume_on_the_device_is_bit_exact_and_the_checkpoint_evaluates_on_a_cpu",
    )
]


def _junit(path: Path) -> dict:
    suite = ET.parse(path).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    return {k: int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")}


def test_gpu_tests_run_on_the_cpu(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *SMOKE,
            "-m",
            "gpu",
            "-p",
            "no:cacheprovider",
            "--junitxml",
            str(tmp_path / "j.xml"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**ENV, "STRUCTSEQ_TEST_DEVICE": "cpu"},
    )
    assert r.returncode == 0, r.stdout[-4000:]
    assert _junit(tmp_path / "j.xml") == {"tests": len(SMOKE), "failures": 0, "errors": 0, "skipped": 0}


def _script(*args, timeout=900, env=None):
    r = subprocess.run(
        ["bash", *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env={**ENV, **(env or {})}
    )
    return r.returncode, r.stdout + r.stderr


def _machine_named(path: Path) -> dict:
    info = json.loads(path.read_text())
    assert info["device_name"] and info["torch"] and info["date"], info
    return info


def test_device_scripts_run_on_the_cpu(tmp_path):
    check = tmp_path / "check"
    rc, out = _script(ROOT / "scripts/device_check.sh", check, "--cpu-smoke", "--budget-s", 600)
    assert rc == 0, out[-4000:]
    assert "none of these numbers is a measurement" in out and "reached its end in" in out
    assert _machine_named(check / "device.json")["device"] == "cpu"
    imports = json.loads((check / "imports.json").read_text())
    modules = [row["module"] for row in imports["imports"]]
    assert set(modules) >= {"torch", "yaml", "structseq.cli", "xdist", "importlinter"}
    assert len(modules) == len(set(modules)), modules  # each distribution once, whatever extras name it
    assert _junit(check / "gpu-tests.xml")["tests"] == 1 and "== summary" in (check / "check.log").read_text()
    for section, key in (("gemm", "flops_per_s"), ("train", "target_tokens_per_s"), ("decode", "sentences_per_s")):
        data = json.loads((check / "bench" / f"{section}.json").read_text())
        assert data["machine"]["device_name"] and data["machine"]["load_avg"] and data["machine"]["date"]
        assert data["rows"] and all(row.get(key, 0) > 0 for row in data["rows"]), data["rows"]
    models = {row["model"] for row in json.loads((check / "bench/train.json").read_text())["rows"]}
    assert len(models) == 7 and "cogs/rdangle-sep-oinf" in models and "maruf-ted/interleave" in models
    assert "cogs/transformer" not in models and "cogs/dangle" not in models  # the A/B's, a call of its own
    assert len([p for p in check.rglob("*") if p.is_file()]) == 7  # a device call brings back at most 8 files

    first, again = tmp_path / "first", tmp_path / "again"
    # budgets far above the seconds this takes on an idle machine: they are caps, and CI machines may be loaded
    # chunks of up to 60 s: on a loaded machine the start-up alone can outlast the smoke setting's 8 s
    rc, out = _script(
        ROOT / "scripts/device_reproduce.sh", first, "--cpu-smoke", "--budget-s", 400, env={"CHUNK_S": "60"}
    )
    assert rc == 0, out[-4000:]
    _machine_named(first / "device.json")
    progress = json.loads((first / "progress.json").read_text())
    assert progress["finished"] and progress["steps"] == progress["max_steps"] == 120, progress
    assert sum(c["updates"] for c in progress["chunks"]) == 120 and progress["updates_per_min"] > 0
    assert all(progress["eval"][s]["exact_match"]["n"] == 20 for s in ("gen", "test"))
    assert progress["config"]["model"]["positions"] == "relative" and progress["config"]["train"]["seed"] == 1
    assert list(first.glob("run.tar.gz.part-*")) and (first / "reproduce.log").exists()
    rc, out = _script(ROOT / "scripts/device_reproduce.sh", again, first, "--cpu-smoke", "--budget-s", 300)
    assert rc == 0 and "evaluated already" in out, out[-4000:]
    carried = json.loads((again / "progress.json").read_text())
    assert carried["chunks"] == progress["chunks"] and carried["eval"] == progress["eval"]


def test_the_ab_call_runs_on_the_cpu(tmp_path):
    """scripts/device_ab.sh: d15a89c (from git), this tree eager and compiled (dynamo only on the CPU), one
    process per model and arm, its table with s/update beside tokens/s; 3 files; says it measures nothing."""
    out = tmp_path / "ab"
    rc, log = _script(ROOT / "scripts/device_ab.sh", out, "--cpu-smoke", "--rounds", 1, "--budget-s", 600)
    assert rc == 0, log[-4000:]
    assert sorted(p.name for p in out.iterdir()) == ["ab.log", "ab.tar.gz", "device.json"]
    with tarfile.open(out / "ab.tar.gz") as tar:
        names = set(tar.getnames())
        summary = json.load(tar.extractfile("ab/summary.json"))
    assert {f"ab/{arm}-cogs_transformer-1/train.json" for arm in ("a", "eager", "compiled")} <= names, names
    (row,) = summary["rows"]
    assert row["model"] == "cogs/transformer" and {"a", "eager", "compiled", "compiled_over_a"} <= set(row)
    assert row["compiled"]["shapes"] >= 1 and summary["smoke"]
    assert "s/update" in log and "not measurements (--cpu-smoke)" in log and "none of these numbers" in log


def test_reproduction_of_k_runs_at_once_on_the_cpu(tmp_path):
    """--k-runs 2: seeds 1 and 2 through `structseq train-many` with the fast path's batching, both to their
    last update and evaluated (seed1/gen ... seed2/test); the parts are left out once everything is evaluated."""
    out = tmp_path / "k"
    # chunks of up to 150 s: two processes starting at once on a loaded 2-core machine need tens of seconds
    rc, log = _script(
        ROOT / "scripts/device_reproduce.sh",
        out,
        "--cpu-smoke",
        "--k-runs",
        2,
        "--budget-s",
        400,
        env={"CHUNK_S": "150"},
    )
    assert rc == 0, log[-4000:]
    progress = json.loads((out / "progress.json").read_text())
    assert progress["finished"] and progress["run_steps"] == {"transformer-seed1": 120, "transformer-seed2": 120}
    assert sum(c["updates"] for c in progress["chunks"]) == 240 and all(c["runs"] == 2 for c in progress["chunks"])
    assert {k: v["exact_match"]["n"] for k, v in progress["eval"].items()} == {
        f"seed{s}/{split}": 20 for s in (1, 2) for split in ("gen", "test")
    }
    assert progress["config"]["optim"]["static_shapes"] and not list(out.glob("run.tar.gz.part-*"))
