"""The GPU lease plan fits the lease before any lease (issue 53 goal 5): scripts/lease_plan.py's table against
the limits (fast), the smoke's own enforcement on a synthetic plan (fast), and the whole plan in --cpu-smoke
(slow: every device script end to end on the CPU under the planned budgets)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.fixtures.paths import ROOT

spec = importlib.util.spec_from_file_location("lease_plan", ROOT / "scripts" / "lease_plan.py")
plan = sys.modules.setdefault("lease_plan", importlib.util.module_from_spec(spec))
spec.loader.exec_module(plan)


def test_the_plan_fits_the_lease_limits():
    """Each call <= 10 minutes with a minute for its tails, <= 8 files back at most 2 folders down, the tree and
    its carried folders <= 64 MiB, its command's --budget-s within its minutes; each lease's start, calls and
    gaps <= 15 minutes (a plain sum here, the reference for `lease_seconds`)."""
    assert plan.problems() == []
    for lease in {c.lease for c in plan.PLAN}:
        calls = [c for c in plan.PLAN if c.lease == lease]
        total = 90 + sum(c.minutes * 60 for c in calls) + 30 * (len(calls) - 1)
        assert total <= 15 * 60 and plan.lease_seconds(calls) == total
    for c in plan.PLAN:
        assert c.minutes * 60 + 60 <= 600 and len(c.files) <= 8 and plan.TREE_MIB + c.carry_mib <= 64
        script = c.command.split()[1]
        assert (ROOT / script).exists(), script
    names = [c.name for c in plan.PLAN]
    assert len(set(names)) == len(names)
    # what issue 53 asks of the plan: the A/B, K-scaling and the reproduction in calls of their own
    assert {"check", "ab-transformer", "ab-dangle", "kscale", "reproduce-transformer"} <= set(names)


def test_a_plan_over_the_limits_is_refused_naming_what_breaks():
    Call = plan.Call
    bad = [
        Call(1, "long", "g", "x.sh $OUT --budget-s 600", 10.0, ("a",)),
        Call(1, "files", "g", "x.sh $OUT --budget-s 60", 1.0, tuple(f"f{i}" for i in range(9))),
        Call(2, "deep", "g", "x.sh $OUT --budget-s 60", 1.0, ("a/b/c/d",), (".x",), 60),
        Call(3, "budget", "g", "x.sh $OUT --budget-s 500", 5.0, ("a",)),
        Call(4, "one", "g", "x.sh $OUT --budget-s 400", 7.0, ("a",)),
        Call(4, "two", "g", "x.sh $OUT --budget-s 400", 7.0, ("a",)),
    ]
    found = "\n".join(plan.problems(bad))
    for text in (
        "call 'long': 10.0 minutes leave under a minute",
        "call 'files': 9 files back, over 8",
        "call 'deep': a/b/c/d more than 2 folders down",
        "call 'deep': the tree (8 MiB) and 60 MiB carried, over 64",
        "call 'budget': its command's --budget-s must be at most its 300 s",
        "lease 4: 16.0 minutes with its start and gaps, over 15",
    ):
        assert text in found, found


def test_what_would_not_come_back_is_named(tmp_path):
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c" / "deep.json").write_text("{}")
    with open(tmp_path / "big.bin", "wb") as f:
        f.truncate(17 * 2**20)
    for i in range(7):
        (tmp_path / f"f{i}.txt").write_text("x")
    (tmp_path / "odd name.txt").write_text("x")
    found = "\n".join(plan.returned(tmp_path))
    assert "10 files, over 8" in found and "big.bin: 17.0 MiB, over 16" in found
    assert "deep.json: more than 2 folders down" in found and "odd name.txt: a name" in found
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts/lease_plan.py"), "returned", str(tmp_path)], capture_output=True, text=True
    )
    assert r.returncode == 1 and "would not come back" in r.stdout


def test_the_smoke_fails_a_call_that_overruns_or_leaves_too_much(tmp_path):
    """The smoke's own enforcement: a call stopped at its limit (factor x minutes), one that leaves 9 files,
    and one that exits non-zero each fail the smoke; a call within its limits passes."""
    Call = plan.Call
    calls = [
        Call(1, "fits", "g", "mkdir -p $OUT && echo ok > $OUT/a.txt; true --budget-s 60", 1.0, ("a.txt",)),
        Call(1, "slow", "g", "sleep 30; true --budget-s 60", 1.0, ()),
        Call(2, "many", "g", "for i in 1 2 3 4 5 6 7 8 9; do echo > $OUT/f$i; done; true --budget-s 60", 1.0, ()),
        Call(3, "fails", "g", "exit 3; true --budget-s 60", 1.0, ()),
    ]
    rc = plan.smoke(calls, tmp_path / "s", factor=0.05)  # 3 s a call
    assert rc == 1
    record = {r["call"]: r for r in json.loads((tmp_path / "s" / "smoke.json").read_text())["calls"]}
    assert record["fits"]["problems"] == [] and record["fits"]["files"] == ["a.txt"]
    assert record["slow"]["exit"] == "time limit" and record["slow"]["wall_s"] < 30
    assert any("9 files, over 8" in p for p in record["many"]["problems"])
    assert record["fails"]["problems"][0] == "exit 3"
    assert plan.smoke(calls[:1], tmp_path / "s2", factor=0.05) == 0


def test_docs_gpu_holds_the_plan_table():
    text = (ROOT / "docs" / "gpu.md").read_text()
    assert "<!-- generated: python scripts/lease_plan.py table -->\n" + plan.table() + "\n<!-- /generated -->" in text


@pytest.mark.slow
def test_the_whole_plan_runs_in_its_cpu_smoke_within_the_limits(tmp_path):
    """Every call of every lease, in order, with --cpu-smoke under its planned seconds (factor 1): each ends
    with exit 0 within its budget and leaves what a call brings back; the continued reproduction reads the
    first one's parts."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHON": sys.executable}
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts/lease_plan.py"), "smoke", str(tmp_path / "s")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
    )
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    assert "not measurements" in r.stdout
    record = json.loads((tmp_path / "s" / "smoke.json").read_text())
    assert [c["call"] for c in record["calls"]] == [c.name for c in plan.PLAN]
    progress = json.loads((tmp_path / "s" / "3-reproduce-continue" / "progress.json").read_text())
    assert progress["finished"] and all("exact_match" in v for v in progress["eval"].values())
