"""`structseq train-many`: K runs at once, one pinned process each, each the run it would be alone."""

import json
import os
import subprocess
import sys

import torch

from structseq.train.checkpoint import load_checkpoint
from structseq.train.loop import Trainer
from structseq.train.many import core_sets, plan_runs
from test_train import toy_config, toy_tsv


def test_core_sets_are_disjoint_equal_shares():
    sets = core_sets(4, range(16))
    assert [len(s) for s in sets] == [4] * 4 and len({c for s in sets for c in s}) == 16
    assert core_sets(3, [0, 1]) == [[0], [1], [0]]  # more runs than cores: shared round-robin
    assert [n for n, _, _ in plan_runs(["a/x.yaml", "b/y.yaml"], [1, 2])] == [
        "x-seed1",
        "x-seed2",
        "y-seed1",
        "y-seed2",
    ]


def test_two_runs_at_once_equal_each_run_alone(tmp_path):
    """K = 2 CPU processes, seeds 1 and 2 of one config: both finish, each pinned to its own core, and each
    one's final parameters are those of the same seed trained alone in this process (one thread each)."""
    data = toy_tsv(tmp_path)
    cfg = toy_config(data, max_steps=6, valid_every=3, threads=1).to_dict()
    config = tmp_path / "toy.yaml"
    config.write_text(json.dumps(cfg))  # JSON is YAML
    out = tmp_path / "many"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    r = subprocess.run(
        [sys.executable, "-m", "structseq", "train-many", str(config), "--seeds", "1,2", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.loads((out / "many.json").read_text())
    assert summary["k"] == 2 and [run["exit"] for run in summary["runs"]] == [0, 0]
    assert [run["steps_after"] for run in summary["runs"]] == [6, 6]
    if len(os.sched_getaffinity(0)) >= 2:
        assert not set(summary["runs"][0]["cores"]) & set(summary["runs"][1]["cores"])
    for seed in (1, 2):
        alone = Trainer(
            toy_config(data, max_steps=6, valid_every=3, threads=1, seed=seed),
            tmp_path / f"alone{seed}",
            show_progress=False,
        )
        alone.run()
        theirs = load_checkpoint(out / f"toy-seed{seed}" / "checkpoints" / "last.pt", {"model": dict})["model"]
        for name, p in alone.model.state_dict().items():
            torch.testing.assert_close(theirs[name], p, rtol=1e-6, atol=1e-7, msg=name)
