"""K training processes on one device at once (issue 45's K runs; issue 53 goal 5's K-scaling call): the summed
updates a second of K = 1, 2, 4 copies of the COGS Transformer, each timed over the same window.

    python benchmarks/bench_kscale.py --out OUT/kscale.json [--ks 1 2 4] [--budget-s 120] [--compile off]
    python benchmarks/bench_kscale.py --out /tmp/kscale.json --cpu-smoke              # the CPU, tiny: seconds

For each K, K processes of `bench_gpu.py --only cogs/transformer` start together (the fast path's batching,
`optim.num_buckets=4 optim.static_shapes=true`, `train.compile` as --compile, fp32, 2 CPU threads each), warm up
over every batch shape, wait for each other (`--sync-dir`), then time updates for the same seconds. The record
has each process's updates a second, their sum, and the sum over K x the K = 1 rate (issue 45's goal: >= 0.8;
without MPS the processes take turns on the GPU). Each K gets its share of --budget-s. With --cpu-smoke the
numbers are a tiny model's on the CPU, not measurements, and the record says so. The JSON is written atomically
after every K and never over an existing file.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_k(k: int, args, work: Path, limit: float) -> dict:
    sync = work / f"sync-k{k}"
    window = max(2.0, limit / 4)
    sets = ["optim.num_buckets=4", "optim.static_shapes=true", f"train.compile={args.compile}", "train.threads=2"]
    procs = []
    for i in range(k):
        cmd = [
            sys.executable,
            str(HERE / "bench_gpu.py"),
            "--out",
            str(work / f"k{k}-{i}"),
            "--only",
            "cogs/transformer",
        ]
        cmd += ["--precisions", "fp32", "--warmup-shapes", "--updates", "1000000", "--max-update-s", str(window)]
        cmd += ["--decode-sentences", "1", "--sync-dir", str(sync), "--sync-n", str(k), "--set", *sets]
        cmd += ["--cpu-smoke"] if args.cpu_smoke else []
        procs.append(subprocess.Popen(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"}))
    end = time.monotonic() + limit
    for p in procs:
        try:
            p.wait(timeout=max(1.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.terminate()
            p.wait()
    rates = []
    for i in range(k):
        path = work / f"k{k}-{i}" / "train.json"
        rows = json.loads(path.read_text())["rows"] if path.exists() else []
        rates += [r["updates"] / r["seconds"] for r in rows if "seconds" in r]
    return {
        "k": k,
        "processes_timed": len(rates),
        "updates_per_s": rates,
        "sum_updates_per_s": sum(rates),
        "window_s": window,
        "limit_s": limit,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--ks", type=int, nargs="*", default=None, help="default 1 2 4 (1 2 with --cpu-smoke)")
    p.add_argument("--budget-s", type=float, default=120.0)
    p.add_argument("--compile", choices=["on", "off", "auto"], default="off")
    p.add_argument("--cpu-smoke", action="store_true")
    args = p.parse_args(argv)
    if args.out.exists():
        print(f"bench_kscale: {args.out} exists; choose another --out", file=sys.stderr)
        return 2
    args.ks = args.ks or ([1, 2] if args.cpu_smoke else [1, 2, 4])  # the smoke: 2 CPUs, the plumbing
    if args.cpu_smoke and args.compile == "on":
        args.compile = "off"  # inductor on a CPU compiles for minutes: the smoke checks the plumbing
    t0, record = time.monotonic(), {"smoke": args.cpu_smoke, "compile": args.compile, "ks": []}
    record["note"] = "not measurements (--cpu-smoke)" if args.cpu_smoke else "one device, processes at once"
    with tempfile.TemporaryDirectory() as tmp:
        for i, k in enumerate(args.ks):
            left = args.budget_s - (time.monotonic() - t0)
            limit = left * k / sum(args.ks[i:])  # a K's share grows with its processes' start-up
            if limit < 5:
                print(f"[bench_kscale] budget spent: K = {k} not run", flush=True)
                continue
            row = run_k(k, args, Path(tmp), limit)
            base = record["ks"][0]["sum_updates_per_s"] / record["ks"][0]["k"] if record["ks"] else None
            if base and row["processes_timed"] == k:
                row["sum_over_k_times_one"] = row["sum_updates_per_s"] / (k * base)
            record["ks"].append(row)
            tmp_out = args.out.with_name(args.out.name + ".tmp")
            tmp_out.write_text(json.dumps(record, indent=1) + "\n")
            os.replace(tmp_out, args.out)
            ratio = row.get("sum_over_k_times_one")
            print(
                f"[bench_kscale] K = {k}: {row['sum_updates_per_s']:.2f} updates/s summed over "
                f"{row['processes_timed']} of {k} processes"
                + (f", {ratio:.2f} of K x (K = 1)" if ratio else "")
                + (" (smoke: not a measurement)" if args.cpu_smoke else ""),
                flush=True,
            )
    complete = len(record["ks"]) == len(args.ks) and all(r["processes_timed"] == r["k"] for r in record["ks"])
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
