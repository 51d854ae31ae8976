"""What the sharded `compose build` checks before its first stage, and the folders it owns while it runs.

At 10^8 sentences the training side takes an hour or more, so a mistake found after it (a bad byte or an over-long
line in the pool, a `--pool-target` of another length, a memory limit DuckDB refuses, an output folder that cannot
be written) would cost that hour: every setting and every cheap-to-check input is checked first, and the pool is
read before the training side (`sharded.build_sharded`). While it runs, a build holds a lock on its output folder
and on its work folder (`flock`: the kernel drops it when the process ends, so a killed build leaves no stale
lock): a second build into either is refused in one line instead of both writing the same files. A resumed build
first removes the temporary files (`.*.tmp`) and DuckDB spill files that a killed one left. A work file that cannot
be read (truncated, overwritten, deleted) is one line naming it and the folder to delete (`damaged`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from structseq.compose.ngrams_duckdb import parse_size
from structseq.errors import ConfigError, DataError
from structseq.outputs import OutputError

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None

#: the smallest `--memory-limit`: DuckDB's merge buffers need a few MB per thread (4 MB fails on a 10-line corpus)
MIN_MEMORY = 64 * 1000**2
#: the largest with `--engine ray`, whose merges run on other machines (locally: this machine's memory)
MAX_CLUSTER_MEMORY = 2**50

LOCK = ".compose-build.lock"


def physical_memory() -> int | None:
    """This machine's memory in bytes (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def memory_limit_bytes(text: str, engine: str) -> int:
    """`--memory-limit` in bytes, within its bounds: at least 64 MB, at most this machine's memory (a limit above
    it would never spill before the OOM killer), or 1 PiB with `--engine ray` (the merges run on its nodes)."""
    size = parse_size(text)
    high = MAX_CLUSTER_MEMORY if engine == "ray" else physical_memory() or MAX_CLUSTER_MEMORY
    if size < MIN_MEMORY:
        raise ConfigError(f"--memory-limit {text}: at least 64MB (DuckDB's merges need a few MB per thread)")
    if size > high:
        raise ConfigError(
            f"--memory-limit {text}: more than this machine's memory ({high / 1000**3:.1f} GB); DuckDB would never "
            "spill to disk before running out: give at most that"
        )
    return size


def check_writable(folder: Path, what: str) -> None:
    """Create `folder` and a file in it (then remove that), so a read-only or full output folder is found now."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-check.", suffix=".tmp", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise OutputError(f"{folder}: cannot write the {what} there ({error.strerror or error})") from None


@contextmanager
def build_lock(*folders: Path) -> Iterator[None]:
    """Hold an exclusive lock on each folder (a `.compose-build.lock` file in it) for the block; a folder another
    build holds is refused at once, naming the folder and that build's pid."""
    with ExitStack() as stack:
        for folder in folders:
            stack.enter_context(_lock(folder))
        yield


@contextmanager
def _lock(folder: Path) -> Iterator[None]:
    if folder.exists() and not folder.is_dir():
        raise OutputError(f"{folder}: is a file; the build writes a folder of files: choose another --out-dir")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
                raise OutputError(
                    f"{folder}: another compose build (pid {holder}) is writing here; wait for it to end or choose "
                    "another --out-dir / --work-dir"
                ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)


def remove_leftovers(work: Path, out: Path, names: list[str]) -> int:
    """Delete what a killed build left: temporary files of unfinished writes in its work folder and of its own
    output files (`names`) in `out`, and DuckDB's spill files. Only under a held `build_lock` (a running build's
    temporary files are its own). Returns how many."""
    removed = 0
    left = [*work.rglob(".*.tmp"), *(p for name in names for p in out.glob(f".{name}.*.tmp"))]
    for path in left:
        if path.is_file():
            path.unlink()
            removed += 1
    spill = work / "spill"
    if spill.is_dir():
        removed += sum(1 for p in spill.rglob("*") if p.is_file())
        shutil.rmtree(spill)
    return removed


def build_folder(path: Path) -> Path:
    """The `build-<digest>` folder that holds `path` (the work folder a user deletes to start over)."""
    for parent in Path(path).parents:
        if parent.name.startswith("build-"):
            return parent
    return Path(path).parent


def damaged(path: Path, error: BaseException) -> DataError:
    """A work file that cannot be read, in one line: which, why, and the folder to delete to start over."""
    if isinstance(error, FileNotFoundError):
        why = "missing (deleted once read, or removed by hand) while the task that reads it has no record"
    else:
        why = f"unreadable ({type(error).__name__}: {str(error).splitlines()[0] if str(error) else 'truncated?'})"
    return DataError(
        f"work file {why}; the work folder is damaged: delete {build_folder(path)} and run the build again", path
    )
