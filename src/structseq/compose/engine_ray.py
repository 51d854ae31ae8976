"""The Ray backend (`--engine ray`, the `scale` extra): the same stage functions as Ray Data map tasks.

Ray schedules the tasks over a cluster's machines (`address`: a running cluster; none: a local one of `workers`
CPUs) and, where a stage asks for them, its GPUs; structseq itself keeps no scheduler and no protocol. Every
node reads and writes the work folder, so on several machines it must be a shared file system (NFS, a mounted
bucket); structseq must be importable on every node (the same environment, or a Ray runtime_env).

The local cluster (no `address`) listens on the loopback interface only: Ray has no authentication, so a cluster
reachable from the network lets anyone who reaches it run code as this user. Ray binds its servers (GCS, raylet,
workers, runtime-env agent) to 127.0.0.1 only when this node's address is 127.0.0.1, and on Linux it turns
`_node_ip_address="127.0.0.1"` into the machine's address unless `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` (the
switch of Ray's single-machine mode), which is set while the cluster starts (`_loopback`); its daemons keep it.
A real cluster is the user's to secure (docs/compose-scale.md: a private network, a firewall).
"""

from __future__ import annotations

import json
import os
import pickle
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial

from structseq.compose.engines import Task, run_task
from structseq.errors import ConfigError

#: the environment under which a local cluster starts: Ray's single-machine mode, its servers on loopback
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
#: ray.init's arguments for a local cluster of `workers` CPUs (started under `_loopback`)
LOCAL = {"_node_ip_address": "127.0.0.1", "include_dashboard": False}


@contextmanager
def _loopback():
    """Ray's single-machine mode while a local cluster starts: the environment its daemons inherit, and Ray's
    constant read from it at import (Ray may be imported already)."""
    from ray._private import ray_constants

    before = {k: os.environ.get(k) for k in LOOPBACK_ENV}
    constant = ray_constants.ENABLE_RAY_CLUSTER
    os.environ.update(LOOPBACK_ENV)
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = constant
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


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
            quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
            if address:
                ray.init(address=address, **quiet)
            else:
                with _loopback():
                    ray.init(num_cpus=workers, **{**quiet, **LOCAL})
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
