"""K training runs at once on one machine (`structseq train-many`): seeds or configs side by side, one process
each, pinned to its own CPU cores (issue 45).

Why processes and not models batched with torch.func: on the one GPU measured so far an update is bound by the
host's kernel launches (tens of milliseconds of small kernels), so the device is mostly idle and K processes,
each launching from its own cores, overlap on it. That serves every architecture, configs that differ in
anything (batches, shapes, Dangle's data-dependent rows), resumption and checkpoints as one run has them, where
vmapped models would need one shape and one config. The cost: a CUDA context per process (about 0.5 GiB).

Each run is `structseq train CONFIG --out OUT/NAME --seed N` (NAME = the config's stem and the seed), or `--resume`
where OUT/NAME already holds a checkpoint: the same command continues every run (chunks ended by SIGTERM, which
is passed on to every run: each finishes its update, saves and exits). Its output goes to OUT/NAME.log;
OUT/many.json records each run's command, cores, exit status, updates before and after and wall seconds, and the
aggregate updates a minute.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from structseq.errors import StructseqError
from structseq.outputs import atomic_write


def plan_runs(configs: Sequence[Path], seeds: Sequence[int]) -> list[tuple[str, Path, int]]:
    """(name, config, seed) of every config × seed, names unique (a config stem used twice is an error)."""
    stems = [Path(c).stem for c in configs]
    if len(set(stems)) < len(stems):
        raise StructseqError(f"train-many: two configs share a file name ({', '.join(stems)}); runs are named by it")
    return [(f"{Path(c).stem}-seed{s}", Path(c), s) for c in configs for s in seeds]


def core_sets(k: int, cores: Sequence[int], per_run: int | None = None) -> list[list[int]]:
    """Disjoint core lists for k runs out of `cores` (default: an equal share each, at least one; with fewer
    cores than runs, runs share them round-robin)."""
    cores = sorted(cores)
    per = per_run or max(1, len(cores) // k)
    return [[cores[(i * per + j) % len(cores)] for j in range(per)] for i in range(k)]


def last_step(run: Path) -> int:
    """The last update a run logged (metrics.jsonl), 0 before its first line."""
    path = run / "metrics.jsonl"
    step = 0
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                step = max(step, int(json.loads(line).get("step", 0)))
            except (ValueError, AttributeError):
                continue
    return step


def train_many(
    configs: Sequence[Path],
    seeds: Sequence[int],
    out: Path,
    overrides: Sequence[str] = (),
    cores_per_run: int | None = None,
    data_root: Path | None = None,
) -> dict:
    """Train (or continue) every config × seed at once, one pinned process each; returns the summary written to
    OUT/many.json. Exit status of the whole: the worst of the runs'."""
    runs = plan_runs(configs, seeds)
    out.mkdir(parents=True, exist_ok=True)
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count()))
    cores = core_sets(len(runs), available, cores_per_run)
    procs, records = [], []
    for (name, config, seed), mine in zip(runs, cores):
        run = out / name
        if (run / "checkpoints" / "last.pt").exists():
            cmd = [sys.executable, "-m", "structseq", "train", "--resume", str(run), "--quiet"]
            cmd += ["--set", f"train.threads={len(mine)}"]
        else:
            cmd = [sys.executable, "-m", "structseq", "train", str(config), "--out", str(run), "--seed", str(seed)]
            cmd += ["--quiet", *(a for o in overrides for a in ("--set", o)), "--set", f"train.threads={len(mine)}"]
        if data_root is not None:
            cmd += ["--data-root", str(data_root)]
        env = dict(os.environ, OMP_NUM_THREADS=str(len(mine)), MKL_NUM_THREADS=str(len(mine)))
        pin = (lambda c=mine: os.sched_setaffinity(0, c)) if hasattr(os, "sched_setaffinity") else None
        log = open(out / f"{name}.log", "ab")  # noqa: SIM115 - closed when the run ends
        records.append(
            {
                "name": name,
                "config": str(config),
                "seed": seed,
                "cores": mine,
                "command": cmd,
                "steps_before": last_step(run),
            }
        )
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=pin), log))
    previous = {
        s: signal.signal(s, lambda signum, frame: [p.send_signal(signum) for p, _ in procs])
        for s in (signal.SIGTERM, signal.SIGINT)
    }
    t0 = time.perf_counter()
    try:
        for rec, (p, log) in zip(records, procs):
            rec["exit"] = p.wait()
            rec["seconds"] = round(time.perf_counter() - t0, 1)
            log.close()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    wall = time.perf_counter() - t0
    for rec in records:
        rec["steps_after"] = last_step(out / rec["name"])
        rec["updates_per_min"] = round((rec["steps_after"] - rec["steps_before"]) / wall * 60, 1)
    summary = {
        "runs": records,
        "k": len(runs),
        "wall_s": round(wall, 1),
        "aggregate_updates_per_min": round(sum(r["updates_per_min"] for r in records), 1),
        "exit": max(abs(r["exit"]) for r in records),
    }
    atomic_write(out / "many.json", json.dumps(summary, indent=1) + "\n")
    return summary
