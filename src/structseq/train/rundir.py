"""The rules of a run directory: one run at a time, no file it did not create overwritten, nothing stale.

    RUN_DIR/
      .lock                 advisory lock held for the life of a run (owner pid, host, start time)
      .structseq-run        marker: this directory was created for a run (its files may be replaced)
      config.yaml           the run's config (rewritten when `--resume` extends train.max_steps)
      config-history.jsonl  one line per change of the config of the run (`--resume --set train.max_steps=N`)
      metrics.jsonl         training and validation records, truncated to the checkpoint's step on resume
      data-files.json       the sha256 of each data file the run read at its start (`--resume` refuses changed data)
      checkpoints/{last,best}.pt

The lock is `flock` on `.lock`: the kernel drops it when its process dies, so a crashed or killed run never
blocks the directory; the pid inside only names the owner in the error a second run gets.
"""

from __future__ import annotations

import json
import os
import socket
import time
import warnings
from pathlib import Path

import yaml

from structseq.errors import ConfigError, DataError, StructseqError
from structseq.outputs import append_lines, atomic_write, file_digest
from structseq.textio import read_text
from structseq.yamlio import load_yaml

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no locking
    fcntl = None

LOCK = ".lock"
MARKER = ".structseq-run"
#: the names a run writes; a new run refuses a directory holding any of them that no run created
DATA_FILES = "data-files.json"
OWNED = (
    "config.yaml",
    "metrics.jsonl",
    "config-history.jsonl",
    DATA_FILES,
    "checkpoints",
    "predictions",
    "tensorboard",
)


class RunDirError(StructseqError):
    """A run directory that cannot be used as asked (in use, holds another run or foreign files)."""


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


def check_directory(run_dir: Path) -> None:
    """A run directory must be a folder (or not exist yet)."""
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"{run_dir} is an existing file, not a run directory; choose another --out")


def prepare_new(run_dir: str | Path) -> None:
    """Check (under the lock) that a new run may start in `run_dir`, then mark it as a run's directory.

    A directory holding a run's checkpoint is refused (resume it instead); one holding files a run writes
    (e.g. a user's own config.yaml in `-o .`) that no run created is refused, naming them; the files of a
    run that died before its first checkpoint are replaced."""
    run_dir = Path(run_dir)
    check_directory(run_dir)
    if (run_dir / "checkpoints" / "last.pt").exists():
        raise RunDirError(f"{run_dir} already holds a run; use --resume to continue it or another --out")
    if not (run_dir / MARKER).exists():
        foreign = [name for name in OWNED if (run_dir / name).exists()]
        if foreign:
            raise RunDirError(
                f"{run_dir} holds {', '.join(foreign)}, which no run created; a run never "
                "overwrites files it did not create: choose another --out"
            )
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / MARKER).write_text("a structseq run directory; its files are written by `structseq train`\n")
    for name in ("metrics.jsonl", "config-history.jsonl"):  # left by a run that died before checkpointing
        (run_dir / name).unlink(missing_ok=True)
    clean_temporaries(run_dir)


def clean_temporaries(run_dir: str | Path) -> list[Path]:
    """Remove the temporaries of checkpoint saves a kill interrupted (`checkpoints/.last.pt.*.tmp`).
    Call with the lock held: then no save is in progress."""
    removed = []
    for p in sorted((Path(run_dir) / "checkpoints").glob(".*.pt.*.tmp")):
        p.unlink(missing_ok=True)
        removed.append(p)
    return removed


def truncate_metrics(run_dir: str | Path, step: int) -> int:
    """Drop the records of `metrics.jsonl` after `step` (written after the checkpoint a resumed run starts
    from, so they would be written again) and a torn last line; returns how many lines were dropped."""
    path = Path(run_dir) / "metrics.jsonl"
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


def write_config(run_dir: str | Path, config: dict) -> None:
    """The run's config.yaml (the run created it: `prepare_new` checked)."""
    atomic_write(Path(run_dir) / "config.yaml", yaml.safe_dump(config, sort_keys=False))


def record_config_change(run_dir: str | Path, step: int, changes: dict[str, tuple]) -> None:
    """Append `{"step", "time", "changes": {key: [old, new]}}` to config-history.jsonl."""
    rec = {
        "step": step,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "changes": {k: list(v) for k, v in changes.items()},
    }
    append_lines(Path(run_dir) / "config-history.jsonl", [json.dumps(rec)])


def read_run_config(run_dir: str | Path) -> dict:
    """The run's config.yaml as a mapping, read as strictly as a config file (`structseq.yamlio`: a key given
    twice is an error); missing, not UTF-8, not YAML or not a mapping is an error naming the file."""
    path = Path(run_dir) / "config.yaml"
    if not path.exists():
        raise RunDirError(
            f"{path}: missing; is {run_dir} a training run directory? (pass --checkpoint "
            "best|last to load its checkpoint anyway)"
        )
    try:
        raw = load_yaml(read_text(path), path)
    except (DataError, ConfigError) as e:
        raise RunDirError(str(e)) from None
    if not isinstance(raw, dict):
        raise RunDirError(f"{path}: not a run's config (expected a mapping of sections, found {type(raw).__name__})")
    return raw


def _flat(d: object, prefix: str = "") -> dict[str, str]:
    if not isinstance(d, dict):
        return {prefix.rstrip("."): json.dumps(d, sort_keys=True, default=str)}
    return {k: v for key, value in d.items() for k, v in _flat(value, f"{prefix}{key}.").items()}


#: the sections a run's config.yaml shares with its checkpoints and that decide what evaluation computes
EVALUATED = ("task", "data", "model", "decode")


def config_edits(run_dir: str | Path, saved: dict) -> list[str]:
    """The keys of `EVALUATED` whose value in the run's config.yaml differs from `saved` (the checkpoint's
    config, which loading uses), as `KEY: YAML (checkpoint: SAVED)`; [] when config.yaml is missing or broken."""
    try:
        edited = read_run_config(run_dir)
    except StructseqError:
        return []
    mine = _flat({s: edited.get(s) for s in EVALUATED})
    theirs = _flat({s: saved.get(s) for s in EVALUATED})
    return [
        f"{k}: {mine.get(k, 'absent')} (checkpoint: {theirs.get(k, 'absent')})"
        for k in sorted(set(mine) | set(theirs))
        if mine.get(k) != theirs.get(k)
    ]


def warn_config_edits(run_dir: str | Path, saved: dict) -> None:
    """A warning naming the keys of config.yaml edited since the checkpoint (`config_edits`): config.yaml is the
    run's record, the checkpoint's config what loading uses."""
    edits = config_edits(run_dir, saved)
    if edits:
        warnings.warn(
            f"{Path(run_dir) / 'config.yaml'} differs from the checkpoint's config, which is used "
            f"({'; '.join(edits[:3])}{'; ...' if len(edits) > 3 else ''}); to decode otherwise, use --beam or "
            "--set decode.KEY=VALUE",
            stacklevel=3,
        )


def write_data_files(run_dir: str | Path, files: list[Path]) -> None:
    """data-files.json: the path and sha256 of each data file a new run read (generated splits read none),
    in the order read; what `--resume` compares the data with (`check_data_files`)."""
    rows = [{"path": str(p), "sha256": file_digest(p)} for p in files]
    atomic_write(Path(run_dir) / DATA_FILES, json.dumps({"files": rows}, indent=1) + "\n")


def check_data_files(run_dir: str | Path, files: list[Path]) -> None:
    """A RunDirError, naming the file and both hashes, when a data file a resumed run reads does not hold
    what it held when the run started (data-files.json): resuming would silently continue on other data. A
    run without that record (written before it existed) is not checked."""
    path = Path(run_dir) / DATA_FILES
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


def is_run_folder(path: str | Path) -> bool:
    """A run folder: a directory holding a run's config.yaml or its checkpoints/ (what `structseq train` makes)."""
    p = Path(path)
    return p.is_dir() and ((p / "config.yaml").is_file() or (p / "checkpoints").is_dir())


def run_folders(args: list[str | Path]) -> list[Path]:
    """The runs named by RUN arguments, the one rule of every command that takes runs: a path as given; a glob
    (quoted, so the shell leaves it) its run folders, sorted, its other matches skipped (train-many's NAME.log
    and many.json beside `runs/many/x-seed*`); a glob with no run folder among its matches is a RunDirError
    naming the pattern and what it matched."""
    import glob

    out: list[Path] = []
    for arg in map(str, args):
        if Path(arg).exists() or not glob.has_magic(arg):
            out.append(Path(arg))
            continue
        matches = sorted(glob.glob(arg))
        runs = [Path(m) for m in matches if is_run_folder(m)]
        if not runs:
            seen = f"it matches {len(matches)} path(s), e.g. {matches[0]}, " if matches else "it matches nothing; "
            raise RunDirError(
                f"{arg}: no run folder matches this pattern ({seen}a run folder is a directory with a run's "
                "config.yaml or checkpoints/)"
            )
        out += runs
    return out
