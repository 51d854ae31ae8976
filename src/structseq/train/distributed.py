"""Data-parallel training under `torchrun` with PyTorch DDP (gloo on CPUs, NCCL on GPUs).

    torchrun --nproc-per-node 2 -m structseq train CONFIG -o RUN_DIR

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK (and, across machines, the rendezvous given by its
`--nnodes --node-rank --rdzv-endpoint` flags); a plain `structseq train` is a world of one and never
touches torch.distributed. Each rank takes the shard `idx[rank::world]` of every global token-budget
batch, so the global batches, and the data order, are those of one process.
"""

from __future__ import annotations

import atexit
import os
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass
class DistContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def shard(self, index: list[int]) -> list[int]:
        return index[self.rank :: self.world_size] if self.world_size > 1 else index

    def _reduce(self, value: float, op=None) -> float:
        if self.world_size == 1:
            return value
        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=op or dist.ReduceOp.SUM)
        return t.item()

    def sum_int(self, n: int) -> int:
        return n if self.world_size == 1 else int(round(self._reduce(float(n))))

    def sum_float(self, x: float) -> float:
        return self._reduce(x)

    def any(self, flag: bool) -> bool:
        """True on every rank when it is true on one (e.g. Ctrl-C reached a single process)."""
        return bool(flag) if self.world_size == 1 else self._reduce(float(flag), dist.ReduceOp.MAX) > 0

    def wrap(self, model: nn.Module) -> nn.Module:
        if self.world_size == 1:
            return model
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.local_rank] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)

    def no_sync(self, model: nn.Module):
        """Skip the gradient all-reduce (all but the last accumulated batch of an update)."""
        return model.no_sync() if self.world_size > 1 else nullcontext()


_CONTEXT: DistContext | None = None


def _shutdown() -> None:
    """Destroy the process group before the interpreter exits: left to the interpreter's teardown, gloo's
    threads can be destroyed while joinable, and the process aborts ("terminate called without an active
    exception") after a finished run, so torchrun reports a failure (pytorch/pytorch#190489)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def context() -> DistContext:
    """The process group of this run, initialised on first use when launched by torchrun."""
    global _CONTEXT
    if _CONTEXT is not None:
        return _CONTEXT
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        _CONTEXT = DistContext()
        return _CONTEXT
    local = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available() and os.environ.get("STRUCTSEQ_DDP_BACKEND", "") != "gloo"
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if cuda else "gloo")
        atexit.register(_shutdown)
    device = torch.device(f"cuda:{local}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    _CONTEXT = DistContext(dist.get_rank(), dist.get_world_size(), local, device)
    return _CONTEXT
