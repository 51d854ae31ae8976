"""Where the stage tasks run: in this process, in a local process pool (the default), or on Ray (`engine_ray`).

An engine only maps a module-level stage function over a list of argument tuples and yields each task's
result as it finishes; it keeps no state between stages, so any engine runs the same stage functions. The local
pool is `concurrent.futures.ProcessPoolExecutor` on the `forkserver` start method (children forked from a
clean server process: safe next to the DuckDB and Arrow threads of the parent, and quick to start); each task
measures its own peak memory (`run_task`). A worker dies with the coordinating process, however that ends (kill -9,
SIGTERM, a crash): the workers are the forkserver's children, not the coordinator's, so each watches the
coordinator's pid (`_die_with`), and once they are gone the forkserver and the resource tracker exit by themselves.
"""

from __future__ import annotations

import multiprocessing
import os
import select
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from structseq.errors import ConfigError

Task = tuple


def peak_rss_mib() -> float:
    """This process's peak resident memory (VmHWM), MiB: what each task reports."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def cpu_seconds() -> float:
    """CPU time of this process so far, user + system, all threads: the work a task did, whatever the load."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def reset_peak() -> None:
    """Start a new peak-memory window for this process (Linux: `5` to /proc/self/clear_refs resets VmHWM), so a
    pool worker's `peak_rss_mib` is the current task's, not its biggest since it started."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass


def run_task(fn: Callable, args: Task):
    """A task in a worker process: its own peak-memory window, then the stage function."""
    reset_peak()
    return fn(*args)


def _single_thread() -> None:
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(name, "1")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _watch(parent: int) -> None:
    """Block until process `parent` ends (a pidfd on Linux 5.3+, else a poll twice a second), then end this one."""
    try:
        fd = os.pidfd_open(parent)
    except (AttributeError, OSError):  # no pidfd (old kernel, not Linux), or the parent is already gone
        while _alive(parent):
            time.sleep(0.5)
    else:
        select.select([fd], [], [])
    os._exit(1)  # from this thread: ends the worker at once, whatever task it runs


def _worker_start(parent: int) -> None:
    """Initializer of a local pool worker: single-threaded numerics, and a daemon thread that ends the worker
    when the coordinator `parent` ends (no orphan keeps computing, or holds the forkserver and tracker alive)."""
    _single_thread()
    threading.Thread(target=_watch, args=(parent,), name="structseq-parent-watch", daemon=True).start()


class InlineEngine:
    """Every task in this process, in order (`--engine inline`: debugging, tests; no process to start)."""

    name = "inline"
    workers = 1

    def map(self, fn: Callable, tasks: Sequence[Task], resources: dict | None = None) -> Iterator[tuple[int, object]]:
        for i, args in enumerate(tasks):
            yield i, fn(*args)

    def close(self) -> None:
        """Nothing to release: the inline engine starts no process (the engines share one interface)."""


class LocalEngine:
    """A pool of `workers` processes; each stage's results in completion order."""

    name = "local"

    def __init__(self, workers: int):
        if workers < 1:
            raise ConfigError(f"workers must be >= 1, got {workers}")
        self.workers = workers
        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(["structseq.compose.sharded"])
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable, tasks: Sequence[Task], resources: dict | None = None) -> Iterator[tuple[int, object]]:
        if not tasks:
            return
        if self._pool is None:  # one pool for the whole build: workers start once
            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=self._context, initializer=_worker_start, initargs=(os.getpid(),)
            )
        pending = {self._pool.submit(run_task, fn, args): i for i, args in enumerate(tasks)}
        try:
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield pending.pop(future), future.result()
        finally:
            for future in pending:
                future.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
