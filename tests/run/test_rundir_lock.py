"""Issue 12, run directories: the lock, files a run did not create, stale temporaries, metrics on resume."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from structseq.run.directory import (
    MARKER,
    RunDirError,
    RunLock,
    clean_temporaries,
    prepare_new,
    truncate_metrics,
)
from structseq.run.saved_config import read_run_config

HOLD = (
    "import sys, time; from structseq.run.directory import RunLock; lock = RunLock(sys.argv[1]).acquire(); "
    "print('locked', flush=True); time.sleep(60)"
)


def test_second_lock_on_a_directory_is_refused_naming_the_owner(tmp_path):
    with RunLock(tmp_path / "run"):
        with pytest.raises(RunDirError, match=rf"run is in use by another run \(pid {os.getpid()} on "):
            RunLock(tmp_path / "run").acquire()
    with RunLock(tmp_path / "run") as again:  # released: free again
        assert again.held
    assert not (tmp_path / "run" / ".lock").exists()


def test_lock_of_a_killed_process_does_not_block(tmp_path):
    run = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirError, match=rf"pid {p.pid} "):
            RunLock(run).acquire()
    finally:
        p.kill()
        p.wait()
    assert json.loads((run / ".lock").read_text())["pid"] == p.pid  # the dead owner's file is still there
    with RunLock(run):
        assert json.loads((run / ".lock").read_text())["pid"] == os.getpid()


def test_lock_file_with_a_dead_pid_does_not_block(tmp_path):
    (tmp_path / ".lock").write_text(json.dumps({"pid": 999999999, "host": "x", "started": "then"}))
    with RunLock(tmp_path) as lock:
        assert lock.held


def test_a_file_is_not_a_run_directory(tmp_path):
    f = tmp_path / "notes.txt"
    f.write_text("mine")
    with pytest.raises(RunDirError, match="notes.txt is an existing file, not a run directory"):
        RunLock(f).acquire()
    with pytest.raises(RunDirError, match="is an existing file"):
        prepare_new(f)
    assert f.read_text() == "mine"


def test_new_run_never_overwrites_files_it_did_not_create(tmp_path):
    (tmp_path / "config.yaml").write_text("my: own\n")
    with pytest.raises(RunDirError, match="holds config.yaml, which no run created"):
        prepare_new(tmp_path)
    assert (tmp_path / "config.yaml").read_text() == "my: own\n"
    assert not (tmp_path / MARKER).exists()


def test_new_run_replaces_the_files_of_a_run_that_died_before_its_first_checkpoint(tmp_path):
    prepare_new(tmp_path)
    (tmp_path / "config.yaml").write_text("train: {}\n")
    (tmp_path / "metrics.jsonl").write_text('{"step": 10, "loss": 1.0}\n')
    prepare_new(tmp_path)
    assert not (tmp_path / "metrics.jsonl").exists()
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.pt").write_bytes(b"x")
    with pytest.raises(RunDirError, match="already holds a run; use --resume"):
        prepare_new(tmp_path)


def test_stale_save_temporaries_are_removed(tmp_path):
    ck = tmp_path / "checkpoints"
    ck.mkdir()
    for name in (".last.pt.abc123.tmp", ".best.pt.x.tmp", "last.pt", "keep.tmp"):
        (ck / name).write_bytes(b"")
    removed = clean_temporaries(tmp_path)
    assert sorted(p.name for p in removed) == [".best.pt.x.tmp", ".last.pt.abc123.tmp"]
    assert sorted(p.name for p in ck.iterdir()) == ["keep.tmp", "last.pt"]


def test_metrics_are_truncated_to_the_checkpoint_step(tmp_path):
    lines = (
        [{"step": s, "loss": 1.0} for s in (2, 4, 6)]
        + [{"step": 6, "valid_loss": 0.5}]
        + [{"step": s, "loss": 1.0} for s in (8, 10)]
    )
    text = "".join(json.dumps(r) + "\n" for r in lines) + '{"step": 12, "lo'  # torn by a kill
    (tmp_path / "metrics.jsonl").write_text(text)
    assert truncate_metrics(tmp_path, 6) == 3
    kept = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert kept == lines[:4]
    assert truncate_metrics(tmp_path, 6) == 0


@pytest.mark.parametrize(
    "content, message",
    [
        (None, r"config\.yaml: missing"),
        (b"train: [\n", r"config\.yaml:2: not valid YAML"),
        (b"train: {seed: 1}\ntrain: {seed: 2}\n", r"config\.yaml:2: duplicate key 'train' \(first given on line 1\)"),
        (b"\xff\xfe", r"config\.yaml:1: not UTF-8 \(byte 0xff\)"),
        (b"- a\n- b\n", r"config\.yaml: not a run's config \(expected a mapping"),
    ],
)
def test_run_config_problems_name_the_file(tmp_path, content, message):
    if content is not None:
        (tmp_path / "config.yaml").write_bytes(content)
    with pytest.raises(RunDirError, match=message):
        read_run_config(tmp_path)


def test_run_config_reads_a_mapping(tmp_path):
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"train": {"max_steps": 3}}))
    assert read_run_config(tmp_path) == {"train": {"max_steps": 3}}
