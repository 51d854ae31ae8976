"""A/B training throughput of an older checkout against this one's fast path, on one device, in one command
(issue 45; issue 53: one model per process, every batch shape warmed up, an eager-TF32 arm beside the compiled).

    python benchmarks/bench_ab.py --base .device-base --out OUT/ab.tar.gz [--rounds 2] [--budget-s 250]
    python benchmarks/bench_ab.py --base DIR --out /tmp/ab.tar.gz --cpu-smoke           # the CPU, tiny models

Arms, alternating in every round (A, eager, compiled, A, eager, compiled, ...), each a fresh process per model
(`bench_gpu.py --out ab/ARM-MODEL-ROUND --only MODEL`):
- `a`: `--base` (a folder holding an older commit's `src/`, `benchmarks/` and `configs/`, e.g. `git archive
  d15a89c src benchmarks configs | tar -x -C .device-base`), its own `bench_gpu.py` over its own sources and
  defaults (`--warmup` updates);
- `eager`: this checkout, the fast path's batching (`--set`, default `optim.num_buckets=4 optim.static_shapes=true`)
  with `train.compile=off` (TF32 on, the default): what the fast path gives without compiling;
- `compiled`: the same with `train.compile=on` (on CUDA: inductor, CUDA graphs per shape; `--cpu-smoke`: the
  eager backend, dynamo's capture without AOTAutograd or code generation).
This checkout's arms warm up until every batch shape of an epoch has run (`--warmup-shapes`): what is timed
never compiles. Each run's limit is its share of `--budget-s` (a compiled run twice an eager one's); a run that
reaches its limit keeps what it measured. At the end a table of target tokens/s and s/update per model, precision
and arm (medians over the rounds) with each arm's ratio to `a` is printed and kept as `ab/summary.json`; the
folder `ab/` is packed into the one file --out (a device call brings back at most 8 files). With --cpu-smoke the
numbers are a tiny model's on the CPU, not measurements, and the table says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAST = ["optim.num_buckets=4", "optim.static_shapes=true"]
MODELS = ["cogs/transformer", "cogs/dangle"]
ARMS = ("a", "eager", "compiled")
WEIGHT = {"a": 1, "eager": 1, "compiled": 2}  # shares of the budget: compiling takes longer


def arm_args(arm: str, args) -> list[str]:
    if arm == "a":
        return ["--warmup", str(args.warmup)]
    sets = [*args.set, f"train.compile={'off' if arm == 'eager' else 'on'}"]
    if arm == "compiled" and args.cpu_smoke:  # dynamo's capture alone: the plumbing, in seconds a shape
        sets.append("train.compile_backend=eager")
    return ["--warmup", str(args.warmup), "--warmup-shapes", "--set", *sets]


def run(root: Path, out: Path, model: str, extra: list[str], args, limit: float) -> int:
    cmd = [sys.executable, str(root / "benchmarks" / "bench_gpu.py"), "--out", str(out), "--only", model]
    cmd += ["--updates", str(args.updates), "--decode-sentences", "4", "--budget-s", str(int(limit * 0.8)), *extra]
    if args.cpu_smoke:
        cmd.append("--cpu-smoke")
    env = dict(os.environ, PYTHONPATH=str(root / "src"), PYTHONUNBUFFERED="1")
    print(f"[bench_ab] {' '.join(cmd)} (limit {limit:.0f}s)", flush=True)
    try:
        return subprocess.run(cmd, env=env, timeout=limit).returncode
    except subprocess.TimeoutExpired:
        print(f"[bench_ab] {out.name}: stopped at its {limit:.0f}s limit (what it measured is kept)", flush=True)
        return 124


def summary(work: Path, models: list[str], smoke: bool) -> dict:
    """Medians over rounds of tokens/s and s/update per (model, precision, arm), and each arm's ratio to a."""
    rows: dict[tuple, dict[str, list]] = {}
    for path in sorted(work.glob("*/train.json")):
        arm = path.parent.name.split("-", 1)[0]
        for row in json.loads(path.read_text())["rows"]:
            if "target_tokens_per_s" in row:
                cell = rows.setdefault((row["model"], row["precision"]), {}).setdefault(arm, [])
                cell.append((row["target_tokens_per_s"], row["s_per_update"], row.get("warmup_s"), row.get("shapes")))
    table = []
    for (model, precision), arms in sorted(rows.items(), key=lambda kv: (models.index(kv[0][0]), kv[0][1])):
        line = {"model": model, "precision": precision}
        for arm in ARMS:
            if arm in arms:
                line[arm] = {
                    "tokens_per_s": statistics.median(t for t, *_ in arms[arm]),
                    "s_per_update": statistics.median(s for _, s, *_ in arms[arm]),
                    "runs": len(arms[arm]),
                    # round 1 compiles with an empty inductor cache, later rounds find it filled (device_ab.sh)
                    "warmup_s_by_round": [w for *_, w, _ in arms[arm]],
                    "shapes": arms[arm][0][3],
                }
        for arm in ARMS[1:]:
            if arm in line and "a" in line:
                line[f"{arm}_over_a"] = line[arm]["tokens_per_s"] / line["a"]["tokens_per_s"]
        table.append(line)
    return {"smoke": smoke, "note": "not measurements (--cpu-smoke)" if smoke else "medians over rounds", "rows": table}


def print_table(s: dict, label_a: str) -> None:
    print(f"\nA/B ({s['note']}): target tokens/s and s/update; ratios of tokens/s to {label_a}")
    print(
        f"| model | precision | {label_a} | eager TF32 | compiled | eager / a | compiled / a | compiled warm-up s by round |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for r in s["rows"]:
        cells = [
            f"{r[a]['tokens_per_s']:,.0f} tok/s, {r[a]['s_per_update']:.4f} s/update" if a in r else "-" for a in ARMS
        ]
        ratios = [f"{r[k]:.2f}" if k in r else "-" for k in ("eager_over_a", "compiled_over_a")]
        c = r.get("compiled", {})
        warm = ", ".join(f"{w:.0f}" for w in c.get("warmup_s_by_round", []) if w is not None) or "-"
        print(f"| {r['model']} | {r['precision']} | {' | '.join(cells)} | {' | '.join(ratios)} | {warm} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", type=Path, required=True, help="folder with the older src/ and benchmarks/")
    p.add_argument("--out", type=Path, required=True, help="the .tar.gz of the runs' folders")
    p.add_argument("--label-a", default="d15a89c")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--only", nargs="*", default=MODELS, help="models, one process each")
    p.add_argument("--arms", nargs="*", default=list(ARMS), choices=ARMS)
    p.add_argument("--set", nargs="*", default=FAST, help="this checkout's overrides (both of its arms)")
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--updates", type=int, default=30)
    p.add_argument("--budget-s", type=float, default=250.0, help="all runs together: each gets its share")
    p.add_argument("--cpu-smoke", action="store_true")
    args = p.parse_args(argv)
    if not (args.base / "benchmarks" / "bench_gpu.py").exists():
        print(f"[bench_ab] {args.base} holds no benchmarks/bench_gpu.py: no A/B", file=sys.stderr)
        return 2
    if args.out.exists():
        print(f"[bench_ab] {args.out} exists; choose another --out", file=sys.stderr)
        return 2
    if args.cpu_smoke:
        args.warmup, args.updates = 1, 2
    work = Path(tempfile.mkdtemp(prefix="bench_ab-")) / "ab"
    work.mkdir()
    unit = args.budget_s / (args.rounds * len(args.only) * sum(WEIGHT[a] for a in args.arms))
    t0, worst = time.monotonic(), 0
    for r in range(1, args.rounds + 1):
        for model in args.only:
            for arm in args.arms:
                left = args.budget_s - (time.monotonic() - t0)
                if left < 5:
                    print(f"[bench_ab] budget spent: {arm} {model} round {r} not run", flush=True)
                    continue
                root = args.base if arm == "a" else HERE.parent
                out = work / f"{arm}-{model.replace('/', '_')}-{r}"
                rc = run(root.resolve(), out, model, arm_args(arm, args), args, min(left, unit * WEIGHT[arm]))
                worst = max(worst, rc)
    s = summary(work, args.only, args.cpu_smoke)
    (work / "summary.json").write_text(json.dumps(s, indent=1) + "\n")
    print_table(s, args.label_a)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_name(args.out.name + ".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        tar.add(work, arcname="ab")
    os.replace(tmp, args.out)
    shutil.rmtree(work.parent, ignore_errors=True)
    return worst


if __name__ == "__main__":
    sys.exit(main())
