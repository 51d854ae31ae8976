"""`structseq train-many`: K runs at once, one pinned process each, each the run it would be alone."""

import json
import os
import subprocess
import sys

import torch

from structseq.run.checkpoint import load_checkpoint
from structseq.train.loop import Trainer
from structseq.train.many import core_sets, plan_runs
from tests.fixtures.toy import toy_config, toy_tsv


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
    cfg = _plain(toy_config(data, max_steps=6, valid_every=3, threads=1))
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


def _many(config, out, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    cmd = [sys.executable, "-m", "structseq", "train-many", str(config), "--out", str(out), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


def test_a_second_call_continues_each_run_and_an_edited_config_is_refused(tmp_path, monkeypatch, capsys):
    """Issue 52 (train-many never resuming survived) and 55.2: the same command twice continues the run (a larger
    train.max_steps in the config extends it: updates 3 -> 6, the log says it resumed); each run's log is
    the run's full log (its validation lines), the console one line per run with its update; the config
    edited in another key is then refused in one line naming the key, before any run starts."""
    from tests.fixtures.cli_run import one_line_error, run_main

    data = toy_tsv(tmp_path)
    config = tmp_path / "toy.yaml"
    config.write_text(json.dumps(_plain(toy_config(data, max_steps=3, valid_every=3, threads=1))))
    out = tmp_path / "many"
    first = _many(config, out, "--seeds", "1", "--report-every", "0.5")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "toy-seed1: update 3/3" in first.stdout and "valid_loss" in first.stdout
    log = (out / "toy-seed1.log").read_text()
    assert "valid | update 3" in log and "best " in log  # the run's own lines, not --quiet's one line
    config.write_text(json.dumps(_plain(toy_config(data, max_steps=6, valid_every=3, threads=1))))
    second = _many(config, out, "--seeds", "1")
    assert second.returncode == 0, second.stdout + second.stderr
    run = json.loads((out / "many.json").read_text())["runs"][0]
    assert (run["steps_before"], run["steps_after"]) == (3, 6) and "--resume" in run["command"]
    assert load_checkpoint(out / "toy-seed1" / "checkpoints" / "last.pt")["progress"]["step"] == 6
    config.write_text(json.dumps(_plain(toy_config(data, max_steps=6, valid_every=3, threads=1, seed=3, log_every=1))))
    edited = _plain(toy_config(data, max_steps=6, valid_every=3, threads=1))
    edited["optim"]["lr"] = 1e-3
    config.write_text(json.dumps(edited))
    before = (out / "many.json").read_text()
    code, err = run_main(monkeypatch, capsys, "train-many", config, "--seeds", "1", "--out", out)
    one_line_error(code, err, "toy-seed1", "optim.lr", "0.003 -> 0.001")
    assert (out / "many.json").read_text() == before


def test_seed_lists_that_name_no_run_are_one_line(tmp_path, monkeypatch, capsys):
    """Issue 52: `--seeds ''`, `,`, `a`, `1,1`: one line each naming --seeds, nothing written."""
    from tests.fixtures.cli_run import one_line_error, run_main

    config = tmp_path / "toy.yaml"
    config.write_text(json.dumps(_plain(toy_config(toy_tsv(tmp_path)))))
    for seeds in ("", ",", " , ", "a", "1,1"):
        code, err = run_main(monkeypatch, capsys, "train-many", config, "--seeds", seeds, "--out", tmp_path / "o")
        one_line_error(code, err, "--seeds")
    assert not (tmp_path / "o").exists()


def _plain(cfg) -> dict:
    """A config as a dict without the decode keys a plugin strategy registered in this worker declares (the
    train-many subprocess does not have the plugin and would refuse them)."""
    from dataclasses import fields

    from structseq.config import DecodeConfig

    d = cfg.to_dict()
    d["decode"] = {k: v for k, v in d["decode"].items() if k in {f.name for f in fields(DecodeConfig)}}
    return d
