"""A/B training throughput of two checkouts on one device, alternating A B A B in one command (issue 45).

    python benchmarks/bench_ab.py --base .device-base --out OUT/ab.tar.gz [--rounds 2] [--set KEY=VALUE ...]
    python benchmarks/bench_ab.py --base DIR --out /tmp/ab.tar.gz --cpu-smoke           # seconds, on the CPU

A is `--base` (a folder holding an older commit's `src/`, `benchmarks/` and `configs/`, e.g. `git archive
d15a89c src benchmarks configs | tar -x -C .device-base`), run with its own `benchmarks/bench_gpu.py` over its own sources and its
own defaults; B is this checkout with `--set` (default: the fast path, `optim.num_buckets=4
optim.static_shapes=true`, so `train.compile: auto` compiles on CUDA; `train.tf32` is on by default). Each run is
a fresh process (`bench_gpu.py --out ab/{a,b}ROUND`, time-limited by --run-s) over the same models
(`--only`), warm-up updates enough for the compiled side to meet its batch shapes (--warmup). The ratios come from
`structseq report gpu ab --a ab/b1 ab/b2 --b ab/a1 ab/a2` (medians of each side; fast path / base), printed at the end; the folder
`ab/` is packed into the one file --out (a device call brings back at most 8 files).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAST = ["optim.num_buckets=4", "optim.static_shapes=true"]
MODELS = ["cogs/transformer", "cogs/dangle", "cogs/rdangle-sep-o4", "cogs/rdangle-sep-o1"]


def run_side(root: Path, out: Path, args, extra: list[str], limit: float) -> int:
    cmd = [sys.executable, str(root / "benchmarks" / "bench_gpu.py"), "--out", str(out), "--only", *args.only]
    cmd += ["--warmup", str(args.warmup), "--updates", str(args.updates), "--decode-sentences", "4", *extra]
    if args.cpu_smoke:
        cmd.append("--cpu-smoke")
    env = dict(os.environ, PYTHONPATH=str(root / "src"), PYTHONUNBUFFERED="1")
    print(f"[bench_ab] {' '.join(cmd)}", flush=True)
    try:
        return subprocess.run(cmd, env=env, timeout=limit).returncode
    except subprocess.TimeoutExpired:
        print(f"[bench_ab] {out.name}: stopped at its {limit:.0f}s limit (what it measured is kept)", flush=True)
        return 124


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", type=Path, required=True, help="folder with the older src/ and benchmarks/")
    p.add_argument("--out", type=Path, required=True, help="the .tar.gz of the runs' folders")
    p.add_argument("--label-a", default="d15a89c")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--only", nargs="*", default=MODELS)
    p.add_argument("--set", nargs="*", default=FAST, help="side B's overrides")
    p.add_argument("--warmup", type=int, default=16)
    p.add_argument("--updates", type=int, default=30)
    p.add_argument("--run-s", type=float, default=110.0, help="time limit of each side's run")
    p.add_argument("--run-s-b", type=float, default=None, help="side B's limit (it compiles; default --run-s)")
    p.add_argument("--budget-s", type=float, default=480.0, help="start no round after this many seconds")
    p.add_argument("--cpu-smoke", action="store_true")
    args = p.parse_args(argv)
    if not (args.base / "benchmarks" / "bench_gpu.py").exists():
        print(f"[bench_ab] {args.base} holds no benchmarks/bench_gpu.py: no A/B", file=sys.stderr)
        return 2
    if args.cpu_smoke:
        args.warmup, args.updates = 1, 2
    work = Path(tempfile.mkdtemp(prefix="bench_ab-")) / "ab"
    work.mkdir()
    t0, sides, worst = time.perf_counter(), {"a": [], "b": []}, 0
    for r in range(1, args.rounds + 1):
        if time.perf_counter() - t0 > args.budget_s:
            print(f"[bench_ab] budget spent: round {r} not run", flush=True)
            break
        sides_args = (
            ("a", args.base, [], args.run_s),
            ("b", HERE.parent, ["--set", *args.set], args.run_s_b or args.run_s),
        )
        for side, root, extra, limit in sides_args:
            rc = run_side(root.resolve(), work / f"{side}{r}", args, extra, limit)
            worst = max(worst, rc)
            if (work / f"{side}{r}" / "train.json").exists():
                sides[side].append(work / f"{side}{r}")
    if sides["a"] and sides["b"]:
        # the fast path first: its column over d15a89c's is the speed-up
        table = [sys.executable, "-m", "structseq", "report", "gpu", "ab", "--a", *map(str, sides["b"])]
        table += ["--b", *map(str, sides["a"]), "--label-a", "fast path", "--label-b", args.label_a]
        subprocess.run(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(args.out, "w:gz") as tar:
        tar.add(work, arcname="ab")
    shutil.rmtree(work.parent, ignore_errors=True)
    return worst


if __name__ == "__main__":
    sys.exit(main())
