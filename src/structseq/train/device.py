"""`train.device`: which device a run (or a loaded model) uses."""

from __future__ import annotations

import torch

from structseq.errors import ConfigError


def resolve_device(name: str) -> torch.device:
    """`train.device`: auto (CUDA when available) | cpu | cuda | cuda:N."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"'train.device': unknown device '{name}'; choices: auto, cpu, cuda, cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"'train.device' is '{name}' but no CUDA device is available; use auto or cpu")
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"'train.device': unsupported device '{name}'; choices: auto, cpu, cuda, cuda:N")
    return device


def set_threads(requested: int | None, key: str = "train.threads", *, hint: bool = True) -> int:
    """torch's CPU threads: `requested`, or (0 / None) as many as this process's CPUs that other processes
    leave free (the 1-minute load average), at least 1 and at most torch's default. Spin-waiting threads on a
    busy machine cost far more than they give (a 40-update run: 84 s at two threads, 15 s at one, the same
    losses), so a busy machine gets a one-line hint naming `key` when stderr is a terminal, unless `hint` is
    False (a quiet command): a pipe's or file's stderr carries only errors, one line each, which scripts read.
    Returns the threads set."""
    import os
    import sys

    if requested:
        torch.set_num_threads(requested)
        return requested
    try:
        cpus = len(os.sched_getaffinity(0))
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not Linux / no load average: torch's own choice
        return torch.get_num_threads()
    free = max(1, min(torch.get_num_threads(), cpus - int(load + 0.5) + 1))
    if load > cpus and hint and sys.stderr.isatty():
        print(
            f"structseq: this machine is busy (load {load:.1f} on {cpus} CPUs): using {free} torch "
            f"thread{'s' if free > 1 else ''} (set {key} to choose)",
            file=sys.stderr,
            flush=True,
        )
    torch.set_num_threads(free)
    return free
