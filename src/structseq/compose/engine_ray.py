"""The Ray backend (`--engine ray`, the `scale` extra): the same stage functions as Ray Data map tasks.

Ray schedules the tasks over a cluster's machines (`address`: a running cluster; none: a local one of `workers`
CPUs) and, where a stage asks for them, its GPUs; structseq itself keeps no scheduler and no protocol. Every
node reads and writes the work folder, so on several machines it must be a shared file system (NFS, a mounted
bucket); structseq must be importable on every node (the same environment, or a Ray runtime_env).
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable, Iterator, Sequence
from functools import partial

from structseq.compose.engines import Task, run_task
from structseq.errors import ConfigError


def _apply(fn: Callable, row: dict) -> dict:
    return {"i": row["i"], "record": json.dumps(run_task(fn, pickle.loads(row["args"])))}


class RayEngine:
    """Ray Data `map` over the stage's tasks, `workers` at a time, one block per task."""

    name = "ray"

    def __init__(self, workers: int, address: str | None = None):
        try:
            import ray
        except ImportError:
            raise ConfigError("--engine ray needs Ray: pip install 'structseq[scale]'") from None
        self.workers = workers
        self._started = False
        if not ray.is_initialized():
            options = {"address": address} if address else {"num_cpus": workers}
            ray.init(**options, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
            self._started = True

    def map(self, fn: Callable, tasks: Sequence[Task], resources: dict | None = None) -> Iterator[tuple[int, object]]:
        if not tasks:
            return
        import ray.data

        context = ray.data.DataContext.get_current()
        context.enable_progress_bars = False
        context.print_on_execution_start = False
        # arguments pickled: Arrow blocks cannot hold tuples of mixed types
        items = [{"i": i, "args": pickle.dumps(args)} for i, args in enumerate(tasks)]
        dataset = ray.data.from_items(items, override_num_blocks=len(items))
        mapped = dataset.map(
            partial(_apply, fn), concurrency=min(self.workers, len(tasks)), **(resources or {"num_cpus": 1})
        )
        for row in mapped.iter_rows():
            yield int(row["i"]), json.loads(row["record"])

    def close(self) -> None:
        if self._started:
            import ray

            ray.shutdown()
