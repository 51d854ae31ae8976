"""The rules of a run directory (its files: `structseq.run.layout`): one run at a time, no file it did not
create overwritten, nothing stale.

The lock is `flock` on `.lock`: the kernel drops it when its process dies, so a crashed or killed run never
blocks the directory; the pid inside only names the owner in the error a second run gets.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from structseq.errors import StructseqError
from structseq.outputs import atomic_write, file_digest
from structseq.run.layout import (
    LOCK,
    MARKER,
    OWNED,
    RunDirError,
    check_directory,
    checkpoint_file,
    checkpoints_dir,
    data_files_record,
    history_file,
    metrics_file,
)
from structseq.run.saved_config import record_config_change, write_config

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locking
    fcntl = None


class RunLock:
    """An exclusive advisory lock on a run directory; `release()` (or process death) frees it."""

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOCK
        self._file = None

    def acquire(self) -> RunLock:
        if fcntl is None:  # pragma: no cover
            return self
        check_directory(self.run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        while True:
            f = open(self.path, "a+")
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.seek(0)
                owner = _owner(f.read())
                f.close()
                raise RunDirError(
                    f"{self.run_dir} is in use by another run ({owner}; lock file {self.path}); "
                    "wait for it to end or choose another --out"
                ) from None
            try:  # the file we locked may have been unlinked by an owner releasing it meanwhile
                same = os.stat(self.path).st_ino == os.fstat(f.fileno()).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            f.close()
        f.seek(0)
        f.truncate()
        f.write(
            json.dumps(
                {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
            )
            + "\n"
        )
        f.flush()
        self._file = f
        return self

    def release(self) -> None:
        if self._file is not None:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self._file.close()
            self._file = None

    @property
    def held(self) -> bool:
        return self._file is not None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _owner(text: str) -> str:
    try:
        info = json.loads(text)
        return f"pid {info['pid']} on {info['host']}, started {info['started']}"
    except (ValueError, KeyError, TypeError):
        return "owner unknown"


def check_new(run_dir: str | Path) -> None:
    """Whether a new run may start in `run_dir`, checked before the run reads any data (`Trainer` opens its
    directory first) and again under the lock (`prepare_new`): a directory holding a run's checkpoint is refused
    (resume it instead); one holding files a run writes (e.g. a user's own config.yaml in `-o .`) that no run
    created is refused, naming them."""
    run_dir = Path(run_dir)
    check_directory(run_dir)
    if checkpoint_file(run_dir, "last").exists():
        raise RunDirError(f"{run_dir} already holds a run; use --resume to continue it or another --out")
    if not (run_dir / MARKER).exists():
        foreign = [name for name in OWNED if (run_dir / name).exists()]
        if foreign:
            raise RunDirError(
                f"{run_dir} holds {', '.join(foreign)}, which no run created; a run never "
                "overwrites files it did not create: choose another --out"
            )


def prepare_new(run_dir: str | Path) -> None:
    """Check (under the lock: `check_new`) that a new run may start in `run_dir`, then mark it as a run's
    directory; the files of a run that died before its first checkpoint are replaced."""
    run_dir = Path(run_dir)
    check_new(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / MARKER).write_text("a structseq run directory; its files are written by `structseq train`\n")
    for path in (metrics_file(run_dir), history_file(run_dir)):  # left by a run that died before checkpointing
        path.unlink(missing_ok=True)
    clean_temporaries(run_dir)


def clean_temporaries(run_dir: str | Path) -> list[Path]:
    """Remove the temporaries of checkpoint saves a kill interrupted (`checkpoints/.last.pt.*.tmp`).
    Call with the lock held: then no save is in progress."""
    removed = []
    for p in sorted(checkpoints_dir(run_dir).glob(".*.pt.*.tmp")):
        p.unlink(missing_ok=True)
        removed.append(p)
    return removed


def truncate_metrics(run_dir: str | Path, step: int) -> int:
    """Drop the records of `metrics.jsonl` after `step` (written after the checkpoint a resumed run starts
    from, so they would be written again) and a torn last line; returns how many lines were dropped."""
    path = metrics_file(run_dir)
    if not path.exists():
        return 0
    kept, dropped = [], 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True):
        try:
            rec = json.loads(line)
            ok = (
                line.endswith("\n")
                and isinstance(rec, dict)
                and not (isinstance(rec.get("step"), int) and rec["step"] > step)
            )
        except ValueError:
            ok = False
        if ok:
            kept.append(line)
        else:
            dropped += 1
    if dropped:
        atomic_write(path, "".join(kept))
    return dropped


def write_data_files(run_dir: str | Path, files: list[Path]) -> None:
    """data-files.json: the path and sha256 of each data file a new run read (generated splits read none),
    in the order read; what `--resume` compares the data with (`check_data_files`)."""
    rows = [{"path": str(p), "sha256": file_digest(p)} for p in files]
    atomic_write(data_files_record(run_dir), json.dumps({"files": rows}, indent=1) + "\n")


def check_data_files(run_dir: str | Path, files: list[Path]) -> None:
    """A RunDirError, naming the file and both hashes, when a data file a resumed run reads does not hold
    what it held when the run started (data-files.json): resuming would silently continue on other data. A
    run without that record (written before it existed) is not checked."""
    path = data_files_record(run_dir)
    if not path.exists():
        return
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))["files"]
        recorded = [(str(r["path"]), str(r["sha256"])) for r in rows]
    except (ValueError, KeyError, TypeError) as e:
        raise RunDirError(f"{path}: not a record of data files ({type(e).__name__}: {e})") from None
    now = [(str(p), file_digest(p)) for p in files]
    if len(now) != len(recorded):
        raise RunDirError(
            f"the run read {len(recorded)} data file(s) when it started "
            f"({', '.join(p for p, _ in recorded) or 'none'}) but reads {len(now)} now "
            f"({', '.join(p for p, _ in now) or 'none'}); --resume continues on the same data only"
        )
    for (old_path, old), (new_path, new) in zip(recorded, now):
        if old != new:
            was = "" if old_path == new_path else f" (read from {old_path} then)"
            raise RunDirError(
                f"{new_path}: the data changed since the run started{was}: sha256 {old} at the start, "
                f"{new} now; --resume continues on the same data only: restore the file, or start "
                "a new run (another --out)"
            )


def open_session(out: Path, dist, *, config: dict, files, resumed, step: int, unfinished: bool, changes: dict):
    """The run directory for one run, locked for its life (the returned `RunLock`; None on ranks > 0): rank 0
    locks it, then a new run (`resumed` None) checks and marks it and writes config.yaml and the hashes of its
    data files; a resumed one calls `resumed()` (which raises when the checkpoint changed since it was loaded)
    and, unless finished, refuses changed data, removes stale save temporaries, cuts metrics.jsonl back to
    `step` and records config `changes`. Every rank raises when rank 0 failed (`dist.any`)."""
    lock, error = None, None
    if dist.is_main:
        try:
            lock = RunLock(out).acquire()
            if resumed is None:
                prepare_new(out)
                write_config(out, config)
                write_data_files(out, files)
            else:
                resumed()
                if unfinished:
                    check_data_files(out, files)
                    clean_temporaries(out)
                    truncate_metrics(out, step)
                    if changes:
                        write_config(out, config)
                        record_config_change(out, step, changes)
        except BaseException as e:
            if lock is not None:
                lock.release()
            error = e
    if dist.any(error is not None):
        if error is not None:
            raise error
        raise StructseqError(f"rank 0 could not open the run directory {out}; see its error")
    return lock
