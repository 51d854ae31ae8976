"""The sharded `compose build` as a process tree and a folder: its workers die with it (kill -9, SIGTERM), two
builds never share an output folder, a resumed build cleans what a killed one left, and a damaged work folder
is one line that says what to delete."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from tests.fixtures.paths import ROOT as REPO

pytest.importorskip("duckdb", reason="the sharded path needs the sharded extra: pip install structseq[sharded]")
pytest.importorskip("pyarrow", reason="the sharded path needs the sharded extra: pip install structseq[sharded]")

SRC = REPO / "src"

#: a training stage that sleeps in the worker: the build is mid-stage, its pool started, when the test kills it
SLOW_STAGE = """
import time
import warnings
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


# --- through the CLI, on toy files and the inline engine (no process pool to start) -------------------------------

TRAIN = ["the cat sat", "the dog sat", "a cat ran", "a dog ran", "the cat ran", "a dog sat"] * 3
POOL = ["the dog ran", "a cat sat", "the cat sat", "a dog ran fast", "the dog sat", "a cat ran"]


def _build(tmp_path: Path, *extra: str, train: list[str] | None = None, pool: list[str] | None = None, out="out"):
    from typer.testing import CliRunner

    from structseq.cli import compose as cli

    tmp_path.mkdir(parents=True, exist_ok=True)
    for name, lines in (("train.txt", TRAIN if train is None else train), ("pool.txt", POOL if pool is None else pool)):
        text, path = "".join(s + "\n" for s in lines), tmp_path / name
        if not path.exists() or path.read_text() != text:  # rewritten, a file would start a new work folder
            path.write_text(text)
    args = ["build", "--train", str(tmp_path / "train.txt"), "--pool", str(tmp_path / "pool.txt")]
    args += ["-o", str(tmp_path / out), "-k", "3", "-d", "0", "-r", "1", "-s", "1", *extra]
    return CliRunner().invoke(cli.app, args)


SHARDED = ("--shards", "2", "--engine", "inline")


def _one_error(result, *parts: str) -> None:
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert result.exit_code == 2 and len(lines) == 1, result.output
    for part in parts:
        assert part in lines[0], lines[0]


@pytest.mark.parametrize("sharded", [(), SHARDED], ids=["memory", "sharded"])
@pytest.mark.parametrize("side", ["train", "pool"])
def test_an_empty_corpus_or_blank_pool_is_refused_on_both_paths(tmp_path, sharded, side):
    """The sharded path exited 0 and wrote candidates; both now refuse in the same line."""
    result = _build(tmp_path, *sharded, **{side: ["", "  ", ""]})
    what = "training corpus" if side == "train" else "pool"
    _one_error(result, f"{side}.txt: the {what} holds no sentences (empty or blank lines only)")
    assert not (tmp_path / "out" / "candidates.txt").exists()


def test_max_length_is_honoured_without_shards(tmp_path):
    """--max-length was ignored in memory: a long training line is skipped (as sharded), a long pool line refused."""
    train = TRAIN + ["the bird flew over the cat"] * 5  # atoms "the bird", "bird flew", ... unless skipped
    pool = POOL + ["the bird flew"]
    memory = _build(tmp_path / "m", "--max-length", "5", train=train, pool=pool, out="out")
    sharded = _build(tmp_path / "s", "--max-length", "5", *SHARDED, train=train, pool=pool, out="out")
    assert memory.exit_code == 0 and sharded.exit_code == 0, memory.output + sharded.output
    assert "skipped 5 training line(s) over --max-length 5" in memory.output
    report = json.loads((tmp_path / "m" / "out" / "report.json").read_text())
    assert report["pool"] == json.loads((tmp_path / "s" / "out" / "report.json").read_text())["pool"]
    for name in ("candidates.txt", "candidates.tsv"):
        assert (tmp_path / "m" / "out" / name).read_bytes() == (tmp_path / "s" / "out" / name).read_bytes()
    assert _build(tmp_path / "u", train=train, pool=pool, out="out").exit_code == 0
    unbounded = json.loads((tmp_path / "u" / "out" / "report.json").read_text())
    assert report["pool"]["with_oov"] == unbounded["pool"]["with_oov"] + 1  # "bird", "flew": in skipped lines only
    refused = _build(tmp_path / "m", "--max-length", "2", train=train, pool=pool, out="again")
    _one_error(refused, "pool.txt:1: has 3 tokens, more than the maximum length 2")
    _one_error(_build(tmp_path / "m", "--max-length", "0", out="zero"), "--max-length must be >= 1")


@pytest.mark.parametrize(
    "pool, shards",
    [(["the dog ran", "", "a cat sat", ""], "6"), (POOL + ["zz yy qq ww"] * 8, "2")],
    ids=["more-shards-than-lines", "unknown-words-at-the-end"],
)
def test_a_pool_shard_with_no_scorable_sentence(tmp_path, pool, shards):
    """An empty or all-OOV pool shard crashed the top-K merge (a traceback); now the same candidates as in memory."""
    memory = _build(tmp_path / "m", pool=pool)
    sharded = _build(tmp_path / "s", "--shards", shards, "--engine", "inline", pool=pool)
    assert memory.exit_code == 0 and sharded.exit_code == 0, sharded.output
    for name in ("candidates.txt", "candidates.tsv"):
        assert (tmp_path / "m" / "out" / name).read_bytes() == (tmp_path / "s" / "out" / name).read_bytes()


@pytest.mark.parametrize("limit, says", [("0", "at least 64MB"), ("1KB", "at least 64MB"), ("99999999TB", "more than")])
def test_memory_limit_bounds(tmp_path, limit, says):
    """--memory-limit 0 / 1KB / 99999999TB were DuckDB tracebacks after the training ingest; now refused first."""
    result = _build(tmp_path, *SHARDED, "--memory-limit", limit)
    _one_error(result, f"--memory-limit {limit}: {says}")
    assert not (tmp_path / "out" / "work").exists()


def test_pool_problems_are_found_before_the_training_side(tmp_path):
    """A pool target of the wrong length (accepted silently when it was not checked), a bad pool byte or an
    over-long pool line are refused before any training stage runs."""
    (tmp_path / "pool.ref").write_text("one\ntwo\n")
    result = _build(tmp_path, *SHARDED, "--pool-target", str(tmp_path / "pool.ref"))
    _one_error(result, "pool.ref: pool has 6 sentences but its targets have 2")
    assert not (tmp_path / "out" / "work").exists()
    result = _build(tmp_path, *SHARDED, "--max-length", "3", pool=POOL)
    _one_error(result, "pool.txt:4: has 4 tokens, more than the maximum length 3")
    assert not list((tmp_path / "out" / "work").rglob("train/ingest-*.json"))
    (tmp_path / "pool.txt").write_bytes(b"the cat\n\xff dog\n")
    from typer.testing import CliRunner

    from structseq.cli import compose as cli

    args = ["build", "--train", str(tmp_path / "train.txt"), "--pool", str(tmp_path / "pool.txt"), "-o"]
    result = CliRunner().invoke(cli.app, [*args, str(tmp_path / "bytes"), *SHARDED])
    _one_error(result, "pool.txt:2:")
    assert not list((tmp_path / "bytes").rglob("train/ingest-*.json"))


def test_a_second_build_into_the_same_folder_is_refused(tmp_path):
    from structseq.compose.preflight import build_lock

    with build_lock(tmp_path / "out"):
        _one_error(_build(tmp_path, *SHARDED), "another compose build", str(tmp_path / "out"))
        _one_error(_build(tmp_path), "another compose build")  # in memory too
    assert _build(tmp_path, *SHARDED).exit_code == 0  # the lock goes with its holder


def _work(tmp_path: Path) -> Path:
    (work,) = (tmp_path / "out" / "work").glob("build-*")
    return work


def test_resume_removes_what_a_killed_build_left_and_clean_work_removes_the_folder(tmp_path):
    assert _build(tmp_path, *SHARDED).exit_code == 0
    work = _work(tmp_path)  # kept by default: a rerun with another -d/-r/-s or the uncertainty resumes from it
    left = [work / "pool" / ".degree-0.parquet.abc123.tmp", work / "levels" / ".atoms-2.npy.tmp"]
    left.append(tmp_path / "out" / ".candidates.txt.x1y2z3.tmp")  # an atomic write of an output, killed
    for path in left:
        path.write_bytes(b"partial")
    result = _build(tmp_path, *SHARDED, "--clean-work")
    assert result.exit_code == 0, result.output
    assert (
        "removed 3 temporary file(s)" in result.output
        and not any(path.exists() for path in left)
        and f"removed {work}" in result.output
    )
    assert not work.exists() and not (tmp_path / "out" / "work").exists()


@pytest.mark.parametrize(
    "damage, names",
    [
        ("truncate levels/atoms-2.npy", "levels/atoms-2.npy: work file unreadable"),
        ("garbage vocab.parquet", "vocab.parquet: work file unreadable"),
        ("truncate pool/top-0.parquet", "pool/top-0.parquet: work file unreadable"),
        ("truncate levels/cand-2-0.json", "train/encoded-0.npz: work file missing"),
    ],
)
def test_a_damaged_work_folder_is_one_line_naming_what_to_delete(tmp_path, damage, names):
    assert _build(tmp_path, *SHARDED).exit_code == 0
    work = _work(tmp_path)
    how, name = damage.split()
    path = work / name
    if how == "garbage":
        path.write_bytes(b"not parquet at all")
    else:
        path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    for record in work.glob("pool/degree-*.json"):  # the degree stage reads the dictionary again
        record.unlink()
    _one_error(_build(tmp_path, *SHARDED), names, f"delete {work} and run the build again")


@pytest.mark.parametrize("sharded", [(), SHARDED], ids=["memory", "sharded"])
def test_a_mostly_dropped_pool_is_said_on_the_console(tmp_path, sharded):
    """2,994 of 3,000 shipped ReaCT pool sentences out of vocabulary was said only in report.json (issue 55)."""
    pool = POOL[:3] + ["a zebra sat", "the yak ran", "one cat", "the dog swam", "", "cat zebra"]
    with pytest.warns(UserWarning, match=r"6 of 9 pool sentences \(66.7%\) are left out: 5 have a word seen fewer"):
        result = _build(tmp_path, *sharded, pool=pool)
    assert result.exit_code == 0, result.output
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a pool mostly scored: no warning
        assert _build(tmp_path, *sharded, out="kept").exit_code == 0


def test_atoms_stop_at_the_default_bound_with_a_warning_on_both_paths(tmp_path):
    """A repeated-token line ("ha ha ha ...") made one n-gram level per token (minutes at 3,000 tokens, hours at
    2M); atoms now stop at DEFAULT_MAX_N words, and the build says how many frequent longer n-grams it cut."""
    from structseq.compose.degree import DEFAULT_MAX_N

    train = TRAIN + [" ".join(["ha"] * 100)]  # "ha" x n occurs 101 - n times: frequent (> 3) up to n = 97
    reports = []
    for where, extra in (("m", ()), ("s", SHARDED)):
        with pytest.warns(UserWarning, match=f"1 n-gram\\(s\\) of {DEFAULT_MAX_N + 1} words occur more than 3 times"):
            assert _build(tmp_path / where, *extra, train=train).exit_code == 0
        reports.append(json.loads((tmp_path / where / "out" / "report.json").read_text())["train"])
    assert reports[0] == reports[1]
    assert max(map(int, reports[0]["atoms_per_n"])) == DEFAULT_MAX_N and reports[0]["cut_at_max_n"] == 1
    assert _build(tmp_path / "m", "--max-n", "0", train=train, out="unbounded").exit_code == 0
    unbounded = json.loads((tmp_path / "m" / "unbounded" / "report.json").read_text())["train"]
    assert max(map(int, unbounded["atoms_per_n"])) == 97 and "cut_at_max_n" not in unbounded


def test_an_output_folder_that_cannot_be_written_is_refused_before_any_stage(tmp_path):
    """A read-only output folder was found only when candidates.txt was written, after every stage. (As root no
    permission stops a write, so the test uses a folder no one may create: under /sys where it exists.)"""
    out = Path("/sys/fs/structseq-test-out")
    if not Path("/sys/fs").is_dir() or os.access("/sys/fs", os.W_OK) and _can_create(out):
        pytest.skip("no folder here that this user cannot create")
    result = _build(tmp_path, *SHARDED, "--work-dir", str(tmp_path / "work"), out=str(out))
    _one_error(result, f"{out}: cannot write the build's files there")
    assert not list((tmp_path / "work").rglob("*.json"))


def _can_create(folder: Path) -> bool:
    try:
        folder.mkdir()
    except OSError:
        return False
    folder.rmdir()
    return True


def test_resume_removes_duckdb_spill_files_a_killed_build_left(tmp_path):
    """DuckDB's spill folder (work/spill) of a killed build is removed, and counted, by the resumed build."""
    assert _build(tmp_path, *SHARDED).exit_code == 0
    spill = _work(tmp_path) / "spill"
    spill.mkdir(exist_ok=True)
    planted = [spill / "duckdb_temp_storage-0.tmp", spill / "duckdb_temp_block-1.block"]
    for path in planted:
        path.write_bytes(b"spilled")
    result = _build(tmp_path, *SHARDED)
    assert result.exit_code == 0, result.output
    assert "removed 2 temporary file(s)" in result.output and not any(path.exists() for path in planted)


@pytest.mark.parametrize(
    "error, why",
    [
        (ValueError("bad magic number\nsecond line"), "unreadable (ValueError: bad magic number)"),
        (EOFError(), "unreadable (EOFError: truncated?)"),
        (FileNotFoundError(2, "gone"), "missing (deleted once read"),
    ],
)
def test_a_damaged_work_file_says_why_and_which_folder_to_delete(tmp_path, error, why):
    """The error's type and first line (or 'truncated?' when it has none); the build-<digest> folder that holds the
    file, or the file's own folder outside one."""
    from structseq.compose.preflight import damaged

    inside = tmp_path / "work" / "build-abc" / "levels" / "atoms-2.npy"
    message = str(damaged(inside, error))
    assert why in message and "second line" not in message
    assert f"delete {tmp_path / 'work' / 'build-abc'} and run" in message
    outside = tmp_path / "elsewhere" / "vocab.parquet"
    assert f"delete {tmp_path / 'elsewhere'} and run" in str(damaged(outside, error))


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs a folder no one can write in, root included")
def test_an_output_folder_that_cannot_be_written_is_refused_before_the_first_stage(tmp_path):
    """The writability probe is a file in the folder itself: /proc exists and is a folder, but holds no new file
    (chmod cannot show this to root)."""
    result = _build(tmp_path, *SHARDED, "--work-dir", str(tmp_path / "work"), out="/proc")  # tmp_path / "/proc"
    _one_error(result, f"/proc: cannot write the build's files there ({os.strerror(errno.ENOENT)})")
    assert not list((tmp_path / "work").rglob("*.json"))


@pytest.mark.skipif(not Path("/proc/meminfo").is_file(), reason="reads the machine's memory from /proc/meminfo")
def test_the_memory_limit_is_bounded_by_this_machines_memory_unless_on_ray():
    """The local bound is the machine's memory (reference: /proc/meminfo's MemTotal, which leaves out what the
    kernel reserves); with --engine ray the merges run on its nodes, so up to 1 PiB."""
    from structseq.compose.preflight import memory_limit_bytes, physical_memory
    from structseq.errors import ConfigError

    (total,) = [
        int(line.split()[1]) * 1024
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    ]
    assert total <= physical_memory() <= total * 1.25
    twice = f"{2 * total}"
    with pytest.raises(
        ConfigError, match=f"more than this machine's memory \\({physical_memory() / 1000**3:.1f} GB\\)"
    ):
        memory_limit_bytes(twice, "local")
    assert memory_limit_bytes(twice, "ray") == 2 * total
    with pytest.raises(ConfigError, match="more than"):
        memory_limit_bytes(f"{2**51}", "ray")
    # the exact bounds are allowed, one byte past them is not (the documented "at least 64MB", "at most")
    assert memory_limit_bytes("64MB", "local") == 64 * 1000**2
    with pytest.raises(ConfigError, match="at least 64MB"):
        memory_limit_bytes(f"{64 * 1000**2 - 1}", "local")
    assert memory_limit_bytes(f"{physical_memory()}", "local") == physical_memory()
    assert memory_limit_bytes(f"{2**50}", "ray") == 2**50
    with pytest.raises(ConfigError, match="DuckDB would never spill to disk before running out: give at most that$"):
        memory_limit_bytes(f"{2**50 + 1}", "ray")
