"""K training runs at once on one machine (`structseq train-many`): seeds or configs side by side, one process
each, pinned to its own CPU cores (issue 45).

Why processes and not models batched with torch.func: on the one GPU measured so far an update is bound by the
host's kernel launches (tens of milliseconds of small kernels), so the device is mostly idle and K processes,
each launching from its own cores, overlap on it. That serves every architecture, configs that differ in
anything (batches, shapes, Dangle's data-dependent rows), resumption and checkpoints as one run has them, where
vmapped models would need one shape and one config. The cost: a CUDA context per process (about 0.5 GiB).

Each run is `structseq train CONFIG --out OUT/NAME --seed N` (NAME = the config's stem and the seed), or `--resume`
where OUT/NAME already holds a checkpoint: the same command continues every run (chunks ended by SIGTERM, which
is passed on to every run: each finishes its update, saves and exits). A run continues only with the config it
was started with: a CONFIG or `--set` edited since is refused naming the keys that differ (a larger
`train.max_steps` extends the run; the runtime settings may change). Each run's full log (progress lines,
validations, the closing summary) goes to OUT/NAME.log; the console gets one line per run every `report_every`
seconds while it moves (its update, loss and last validation). OUT/many.json records each run's command, cores,
exit status, updates before and after and wall seconds, and the aggregate updates a minute.
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
from structseq.run.layout import checkpoint_file, metrics_file


def plan_runs(configs: Sequence[Path], seeds: Sequence[int]) -> list[tuple[str, Path, int]]:
    """(name, config, seed) of every config × seed, names unique (a config stem or a seed given twice, or no
    seed, is an error)."""
    stems = [Path(c).stem for c in configs]
    if len(set(stems)) < len(stems):
        raise StructseqError(f"train-many: two configs share a file name ({', '.join(stems)}); runs are named by it")
    if not seeds:
        raise StructseqError("train-many: --seeds names no seed; give e.g. --seeds 1,2,3")
    twice = sorted({s for s in seeds if list(seeds).count(s) > 1})
    if twice:
        raise StructseqError(f"train-many: --seeds gives seed {', '.join(map(str, twice))} twice; each seed is one run")
    return [(f"{Path(c).stem}-seed{s}", Path(c), s) for c in configs for s in seeds]


def core_sets(k: int, cores: Sequence[int], per_run: int | None = None) -> list[list[int]]:
    """Disjoint core lists for k runs out of `cores` (default: an equal share each, at least one; with fewer
    cores than runs, runs share them round-robin)."""
    cores = sorted(cores)
    per = per_run or max(1, len(cores) // k)
    return [[cores[(i * per + j) % len(cores)] for j in range(per)] for i in range(k)]


def last_step(run: Path) -> int:
    """The last update a run logged (metrics.jsonl), 0 before its first line."""
    path = metrics_file(run)
    step = 0
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                step = max(step, int(json.loads(line).get("step", 0)))
            except (ValueError, AttributeError):
                continue
    return step


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def continued(
    run: Path,
    config: Path,
    seed: int,
    overrides: Sequence[str],
    *,
    command: str = "train-many",
    out_option: str = "--out",
    free: Sequence[str] = (),
) -> tuple[list[str], int]:
    """How the run in `run` (with a last checkpoint) continues as `config` + `overrides` at `seed`: the `--set`
    it resumes with (a larger `train.max_steps` extends it) and its budget. Any other difference from the
    config it was started with is a StructseqError naming `command`, the run and the keys (`--resume` keeps the
    saved config: training on would silently ignore the edit); keys starting with one of `free` may differ."""
    from structseq.config import absolute_paths, config_from_dict, load_config
    from structseq.run.checkpoint import RUN_KEYS, load_checkpoint
    from structseq.run.resume import RUNTIME_SETTINGS

    wanted = _flat(absolute_paths(load_config(config, [*overrides, f"train.seed={seed}"])).to_dict())
    saved_cfg = config_from_dict(dict(load_checkpoint(checkpoint_file(run, "last"), RUN_KEYS)["config"]), saved=True)
    saved = _flat(saved_cfg.to_dict())
    differ = [
        k
        for k in sorted(set(wanted) | set(saved))
        if k not in RUNTIME_SETTINGS and not k.startswith(tuple(free)) and wanted.get(k) != saved.get(k)
    ]
    extend = wanted["train.max_steps"] > saved["train.max_steps"]
    differ = [k for k in differ if not (k == "train.max_steps" and extend)]
    if differ:
        shown = "; ".join(f"{k} {saved.get(k)!r} -> {wanted.get(k)!r}" for k in differ[:4])
        more = f" (and {len(differ) - 4} more)" if len(differ) > 4 else ""
        raise StructseqError(
            f"{command}: {run} was started with another config ({shown}{more}); it would continue with its "
            f"saved one: give another {out_option}, or remove the run to start it over"
        )
    return ([f"train.max_steps={wanted['train.max_steps']}"] if extend else []), wanted["train.max_steps"]


def progress_line(name: str, records: Sequence[dict], max_steps: int | None) -> str | None:
    """One console line for a run from its new metrics.jsonl records: its update, loss and last validation
    (`validation_line`'s numbers); None when there is none."""
    train = [r for r in records if "loss" in r]
    valid = [r for r in records if any(k.startswith("valid_") for k in r)]
    if not train and not valid:
        return None
    step = max(int(r.get("step", 0)) for r in records)
    parts = [f"{name}: update {step:,}" + (f"/{max_steps:,}" if max_steps else "")]
    if train:
        parts.append(f"loss {train[-1]['loss']:.4g}")
    if valid:
        v = valid[-1]
        parts += [f"{k} {x:.4g}" for k, x in v.items() if k.startswith("valid_") and isinstance(x, (int, float))]
    return " | ".join(parts)


class _Tail:
    """The records a run's metrics.jsonl gained since the last `read` (whole lines only)."""

    def __init__(self, path: Path):
        self.path, self.offset = path, path.stat().st_size if path.exists() else 0

    def read(self) -> list[dict]:
        try:
            with open(self.path, "rb") as f:
                if f.seek(0, os.SEEK_END) < self.offset:  # cut back to a resumed run's checkpoint
                    self.offset = f.tell()
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        whole = data[: data.rfind(b"\n") + 1]
        self.offset += len(whole)
        out = []
        for line in whole.decode("utf-8", "replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
        return out


def train_many(
    configs: Sequence[Path],
    seeds: Sequence[int],
    out: Path,
    overrides: Sequence[str] = (),
    cores_per_run: int | None = None,
    data_root: Path | None = None,
    report_every: float = 10.0,
    echo=print,
) -> dict:
    """Train (or continue) every config × seed at once, one pinned process each; returns the summary written to
    OUT/many.json. Exit status of the whole: the worst of the runs'. Every `report_every` seconds (0: never)
    `echo` gets one line per run that moved (`progress_line`)."""
    runs = plan_runs(configs, seeds)
    plans = []
    for name, config, seed in runs:  # every run checked before any starts
        run = out / name
        resumed = checkpoint_file(run, "last").exists()
        extra, budget = continued(run, config, seed, overrides) if resumed else ([], None)
        plans.append((resumed, extra, budget))
    out.mkdir(parents=True, exist_ok=True)
    available = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count()))
    cores = core_sets(len(runs), available, cores_per_run)
    procs, records, tails, budgets = [], [], [], []
    for (name, config, seed), mine, (resumed, extra, budget) in zip(runs, cores, plans):
        run = out / name
        if resumed:
            cmd = [sys.executable, "-m", "structseq", "train", "--resume", str(run)]
            cmd += [*(a for o in extra for a in ("--set", o)), "--set", f"train.threads={len(mine)}"]
        else:
            from structseq.config import load_config

            budget = load_config(config, list(overrides)).train.max_steps
            cmd = [sys.executable, "-m", "structseq", "train", str(config), "--out", str(run), "--seed", str(seed)]
            cmd += [*(a for o in overrides for a in ("--set", o)), "--set", f"train.threads={len(mine)}"]
        tails.append(_Tail(metrics_file(run)))
        budgets.append(budget)
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
        last = t0
        while report_every and any(p.poll() is None for p, _ in procs):
            time.sleep(0.2)
            done = all(p.poll() is not None for p, _ in procs)
            if done or time.perf_counter() - last >= report_every:
                last = time.perf_counter()
                for rec, tail, budget in zip(records, tails, budgets):
                    line = progress_line(rec["name"], tail.read(), budget)
                    if line:
                        echo(line)
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
