"""`train.device`: which device a run (or a loaded model) uses; `train.threads`: how many CPU threads."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

from structseq.errors import ConfigError

#: torch's own thread count when this module was first imported: the most `train.threads: 0` gives (a count an
#: earlier call set in this process is not a ceiling for the next run)
TORCH_DEFAULT_THREADS = torch.get_num_threads()
#: how long `busy_cpus` watches /proc/stat
SAMPLE_S = 0.2


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


def read_proc(path: str) -> str:
    """A /proc file's text (tests replace this function with a fake /proc)."""
    return Path(path).read_text()


def _cpu_times(text: str, cpus: Iterable[int]) -> dict[int, tuple[int, int]]:
    """/proc/stat's `cpuN` lines for `cpus`: (busy, total) jiffies, busy = all but idle and iowait."""
    wanted, out = set(cpus), {}
    for line in text.splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in wanted:
            ticks = [int(x) for x in fields[:8]]  # user nice system idle iowait irq softirq steal (guest is in user)
            out[int(name[3:])] = (sum(ticks) - ticks[3] - ticks[4], sum(ticks))
    return out


def busy_cpus(cpus: Iterable[int], sample_s: float = SAMPLE_S, sleep: Callable[[float], None] = time.sleep):
    """How many of `cpus` other processes keep busy now: the CPU time spent on them over `sample_s` seconds
    of /proc/stat (this process sleeps meanwhile), in CPUs; else the running tasks of /proc/loadavg's 4th field
    less this one; None where neither can be read. Unlike the load average, a job that ended a moment ago counts
    nothing (the 1-minute average still counted it: a run started right after another got too few threads)."""
    cpus = list(cpus)
    try:
        before = _cpu_times(read_proc("/proc/stat"), cpus)
        sleep(sample_s)
        after = _cpu_times(read_proc("/proc/stat"), cpus)
        spans = [(after[c][0] - before[c][0], after[c][1] - before[c][1]) for c in cpus if c in before and c in after]
        if spans and all(total > 0 for _, total in spans):
            return sum(busy / total for busy, total in spans)
    except (OSError, ValueError, IndexError):
        pass
    try:  # "0.52 0.58 0.59 3/185 9218": 3 tasks running now, this one among them
        return float(max(0, int(read_proc("/proc/loadavg").split()[3].split("/")[0]) - 1))
    except (OSError, ValueError, IndexError):
        return None


def set_threads(requested: int | None, key: str = "train.threads", *, hint: bool = True) -> int:
    """torch's CPU threads: `requested`, or (0 / None) as many of this process's CPUs as other processes leave
    free now (`busy_cpus`: a short sample, not the last minute's load average), at least 1 and at most torch's
    default (`TORCH_DEFAULT_THREADS`). Spin-waiting threads on a busy machine cost far more than they give (a
    40-update run: 84 s at two threads, 15 s at one, the same losses), so a machine whose every CPU is busy gets
    a one-line hint naming `key` when stderr is a terminal, unless `hint` is False (a quiet command): a pipe's
    or file's stderr carries only errors, one line each, which scripts read. Returns the threads set."""
    import os
    import sys

    if requested:
        torch.set_num_threads(requested)
        return requested
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux: torch's own choice
        return torch.get_num_threads()
    busy = busy_cpus(cpus)
    if busy is None:
        return torch.get_num_threads()
    free = max(1, min(TORCH_DEFAULT_THREADS, len(cpus) - int(busy + 0.5)))
    if busy + 0.5 >= len(cpus) and hint and sys.stderr.isatty():
        print(
            f"structseq: this machine is busy ({busy:.1f} of {len(cpus)} CPUs in use): using {free} torch "
            f"thread{'s' if free > 1 else ''} (set {key} to choose)",
            file=sys.stderr,
            flush=True,
        )
    torch.set_num_threads(free)
    return free
