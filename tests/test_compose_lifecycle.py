"""The sharded `compose build` as a process tree and a folder: its workers die with it (kill -9, SIGTERM), two
builds never share an output folder, a resumed build cleans what a killed one left, and a damaged work folder
is one line that says what to delete."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("duckdb", reason="the sharded path needs the sharded extra: pip install structseq[sharded]")
pytest.importorskip("pyarrow", reason="the sharded path needs the sharded extra: pip install structseq[sharded]")

SRC = Path(__file__).resolve().parents[1] / "src"

#: a training stage that sleeps in the worker: the build is mid-stage, its pool started, when the test kills it
SLOW_STAGE = """
import time
from structseq.compose import stages
_real = stages.ingest_train
def slow(work, shard, *args):
    time.sleep(300)
    return _real(work, shard, *args)
slow.marker = _real.marker
"""

BUILD = """
import sys
import slowstage
from structseq.compose import stages
stages.ingest_train = slowstage.slow
from structseq.compose.sharded import build_sharded
build_sharded([sys.argv[1]], sys.argv[2], sys.argv[3], shards=2, workers=2, engine="local")
"""


def _children() -> dict[int, list[int]]:
    """Every process's children, from /proc."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def _descendants(pid: int) -> list[int]:
    tree, out, todo = _children(), [], [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's zombie may wait for a reaper that a container lacks)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _small_corpus(tmp_path: Path) -> tuple[Path, Path]:
    train, pool = tmp_path / "train.txt", tmp_path / "pool.txt"
    train.write_text("a b c\n" * 4 + "b c a\n" * 4)
    pool.write_text("a b\nc a\nb c a b\n")
    return train, pool


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill-9", "term"])
def test_workers_die_with_the_build(tmp_path, sig):
    """A build killed mid-stage leaves no worker, forkserver or resource tracker behind (they used to run on)."""
    (tmp_path / "slowstage.py").write_text(SLOW_STAGE)
    train, pool = _small_corpus(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(tmp_path)]), "OMP_NUM_THREADS": "1"}
    family: list[int] = []
    build = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(BUILD), str(train), str(pool), str(tmp_path / "out")], env=env
    )
    try:
        deadline = time.monotonic() + 120
        while len(family := _descendants(build.pid)) < 4:  # resource tracker, forkserver, two workers
            assert build.poll() is None, "the build ended before its workers started"
            assert time.monotonic() < deadline, f"workers did not start: {family}"
            time.sleep(0.2)
        build.send_signal(sig)
        build.wait(30)
        deadline = time.monotonic() + 10
        while (left := [p for p in family if _running(p)]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"processes left running after the build was killed: {left}"
    finally:
        for pid in {build.pid, *family, *_descendants(build.pid)}:  # what a failing build left
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        build.wait()
