"""Is `torch.compile` (inductor, CPU) worth it for training here? Eager vs compiled, side by side (issue 13).

    .venv/bin/python benchmarks/bench_compile.py --rounds 3 --updates 8 -o results/perf/bench_compile.json

The `bench_train.py --only fairseq` model (fairseq's `transformer_iwslt_de_en` size) on SCAN simple batches of
3,500 tokens, 2 threads. Each measurement is a fresh process that builds the trainer, optionally wraps the
model in `torch.compile(dynamic=True)` (the batches vary in shape), runs `--warmup` updates (for the compiled
model these include the cold compile, timed separately) and times `--updates` more. Eager and compiled
alternate A B A B; reported: steady-state target tokens/s, the cold-start seconds (first `--warmup` updates),
the per-round ratio compiled / eager and the break-even number of updates, with the load average before and
after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from structseq.testing.bench import fairseq_transformer_config

HERE = Path(__file__).resolve().parent
#: the worker's config (JSON, given on its command line: the worker imports only the package)
CONFIG = json.dumps(fairseq_transformer_config(3500))

WORKER = r"""
import json, shutil, sys, tempfile, time, torch
from structseq.config import config_from_dict
from structseq.train.loop import Trainer
mode, threads, warmup, updates = sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(threads)
out = tempfile.mkdtemp(prefix="bench-compile-")
c = json.loads(sys.argv[1])
c.setdefault("train", {})["threads"] = threads  # pinned: the Trainer's own count would read the machine
t = Trainer(config_from_dict(c), out, show_progress=False)
if mode == "compile":
    t.ddp_model = torch.compile(t.model, dynamic=True)
t0 = time.perf_counter()
for _ in range(warmup):
    t.step()
cold = time.perf_counter() - t0
t0, n = time.perf_counter(), 0
for _ in range(updates):
    n += t.step().target_tokens
dt = time.perf_counter() - t0
shutil.rmtree(out, ignore_errors=True)
print(json.dumps({"mode": mode, "cold_s": cold, "steady_s": dt, "tokens": n, "tokens_per_s": n / dt,
                  "s_per_update": dt / updates}))
"""


def measure(mode: str, args) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))
    r = subprocess.run(
        [sys.executable, "-c", WORKER, CONFIG, mode, str(args.threads), str(args.warmup), str(args.updates)],
        capture_output=True,
        text=True,
        env=env,
    )
    if r.returncode != 0:
        raise RuntimeError(f"{mode} worker failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--updates", type=int, default=8, help="timed updates after the warm-up")
    p.add_argument("--warmup", type=int, default=3, help="untimed updates (the compile happens here)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("-o", "--output", default=str(HERE / "work" / "bench_compile.json"))
    args = p.parse_args(argv)
    load_before = os.getloadavg()
    runs = {"eager": [], "compile": []}
    for r in range(args.rounds):
        for mode in ("eager", "compile"):
            runs[mode].append(measure(mode, args))
        print(
            f"round {r + 1}: eager {runs['eager'][-1]['tokens_per_s']:.0f} tok/s, compiled "
            f"{runs['compile'][-1]['tokens_per_s']:.0f} tok/s (cold {runs['compile'][-1]['cold_s']:.0f} s vs "
            f"{runs['eager'][-1]['cold_s']:.0f} s)",
            file=sys.stderr,
        )
    ratios = [c["tokens_per_s"] / e["tokens_per_s"] for e, c in zip(runs["eager"], runs["compile"])]
    e_upd = statistics.median(x["s_per_update"] for x in runs["eager"])
    c_upd = statistics.median(x["s_per_update"] for x in runs["compile"])
    extra_cold = statistics.median(c["cold_s"] - e["cold_s"] for e, c in zip(runs["eager"], runs["compile"]))
    result = {
        "threads": args.threads,
        "warmup": args.warmup,
        "updates": args.updates,
        "rounds": args.rounds,
        "median_tokens_per_s": {m: statistics.median(x["tokens_per_s"] for x in v) for m, v in runs.items()},
        "round_ratios_compiled_over_eager": ratios,
        "ratio_median": statistics.median(ratios),
        "extra_cold_start_s": extra_cold,
        "break_even_updates": extra_cold / (e_upd - c_upd) if e_upd > c_upd else None,
        "runs": runs,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "torch": __import__("torch").__version__,
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=1))
    print(
        f"compiled / eager {result['ratio_median']:.2f}x, cold start +{extra_cold:.0f} s; wrote {args.output}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
