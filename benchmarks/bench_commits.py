"""Training (or decoding) throughput of two checkouts of structseq side by side (e.g. before and after a change).

    python benchmarks/bench_commits.py --old /path/to/old/checkout --rounds 5 -o results/core/bench_commits.json
    python benchmarks/bench_commits.py --old /path/to/old/checkout --decode RUN_DIR --beams 1 5 --sentences 1024

With `--decode RUN_DIR`, each measurement loads the trained run in that checkout and decodes the first
`--sentences` sources of its test split (`--split`) once after one warm-up batch, reporting sentences/s per beam
size; both checkouts decode the same run and the outputs are checked to be equal.

Each measurement is a fresh subprocess that imports structseq from one checkout's `src/` (PYTHONPATH), builds a
Trainer for a shipped config with one thread, runs `--warmup` updates, then times `--updates` updates. Old and new
alternate A B A B ... for `--rounds` rounds per config; medians and the median of the per-round ratios are
reported with the load average before and after, in wall-clock tokens/s and in tokens per CPU second of the
worker process (`time.process_time`: torch runs one thread, so that is the training thread's time; other
jobs on a shared machine move it much less than the wall clock). Both checkouts read configs and data from this checkout.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [
    "configs/scan-jump/transformer-cpu.yaml",
    "configs/scan-jump/lstm-cpu.yaml",
    "configs/scan-jump/rdangle-sep-cpu.yaml",
    "configs/scan-jump/dangle-cpu.yaml",
]

WORKER = r"""
import json, sys, tempfile, time, torch
from structseq.config import load_config
from structseq.train.loop import Trainer
torch.set_num_threads(1)
cfg = load_config(sys.argv[1], ["train.threads=1", "train.valid_every=0", "train.log_every=1000000"])
with tempfile.TemporaryDirectory() as out:
    t = Trainer(cfg, out, show_progress=False)
    # the old checkout this worker also runs in may predate Trainer.step: its private _update returned
    # (loss, target tokens) too, so [1] reads both
    step = getattr(t, "step", None) or t._update
    for _ in range(int(sys.argv[2])):
        step()
    tokens, start, cpu = 0, time.perf_counter(), time.process_time()
    for _ in range(int(sys.argv[3])):
        tokens += step()[1]
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"target_tokens_per_s": tokens / wall, "target_tokens_per_cpu_s": tokens / cpu}))
"""


DECODE_WORKER = r"""
import json, sys, time, torch
from structseq import api
torch.set_num_threads(1)
run = api.load_run(sys.argv[1], device="cpu")
_, _, examples = run.load_split(sys.argv[2])
examples = examples[: int(sys.argv[3])]
beam = int(sys.argv[4])
run.decode_examples(examples[: run.config.decode.batch_size], beam=beam)  # warm-up
start = time.perf_counter()
out = run.decode_examples(examples, beam=beam)
dt = time.perf_counter() - start
print(json.dumps({"sentences_per_s": len(examples) / dt, "outputs": hash(str(out))}))
"""


def measure_decode(src: Path, run_dir: str, split: str, sentences: int, beam: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    out = subprocess.run(
        [sys.executable, "-c", DECODE_WORKER, run_dir, split, str(sentences), str(beam)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(src: Path, config: str, warmup: int, updates: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", WORKER, str(ROOT / config), str(warmup), str(updates)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True, help="checkout of the baseline commit")
    ap.add_argument("--new", type=Path, default=ROOT, help="checkout to compare [default: this one]")
    ap.add_argument("--configs", nargs="+", default=CONFIGS)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--updates", type=int, default=20)
    ap.add_argument("--decode", metavar="RUN_DIR", help="time decoding this run instead of training")
    ap.add_argument("--split", default="test", help="split to decode with --decode")
    ap.add_argument("--sentences", type=int, default=1024, help="sources decoded per measurement")
    ap.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    ap.add_argument("-o", "--output", type=Path)
    args = ap.parse_args()
    load_before = os.getloadavg()
    commit = lambda p: subprocess.run(
        ["git", "-C", str(p), "rev-parse", "--short", "HEAD"],  # noqa: E731
        capture_output=True,
        text=True,
    ).stdout.strip()
    result = {
        "old": commit(args.old),
        "new": commit(args.new),
        "rounds": args.rounds,
        "updates": args.updates,
        "warmup": args.warmup,
        "load_before": load_before,
        "configs": {},
    }
    if args.decode:
        result.update(decode=args.decode, split=args.split, sentences=args.sentences, beams={})
        for beam in args.beams:
            old, new = [], []
            for _ in range(args.rounds):
                old.append(measure_decode(args.old / "src", args.decode, args.split, args.sentences, beam))
                new.append(measure_decode(args.new / "src", args.decode, args.split, args.sentences, beam))
            same = len({r["outputs"] for r in old + new}) == 1
            o, n = [r["sentences_per_s"] for r in old], [r["sentences_per_s"] for r in new]
            ratios = [b / a for a, b in zip(o, n)]
            result["beams"][str(beam)] = {
                "old_sent_s": o,
                "new_sent_s": n,
                "old_median": statistics.median(o),
                "new_median": statistics.median(n),
                "ratio_median": statistics.median(ratios),
                "same_outputs": same,
            }
            print(
                f"beam {beam}: old {statistics.median(o):.1f} sent/s, new {statistics.median(n):.1f} sent/s, "
                f"new/old {statistics.median(ratios):.3f} (rounds {[round(r, 3) for r in ratios]}), "
                f"outputs {'equal' if same else 'DIFFER'}",
                flush=True,
            )
        args.configs = []
    for config in args.configs:
        old, new = [], []
        for _ in range(args.rounds):
            old.append(measure(args.old / "src", config, args.warmup, args.updates))
            new.append(measure(args.new / "src", config, args.warmup, args.updates))
        # wall-clock throughput, and per CPU second of the worker process (one torch thread): the second barely moves with the load of
        # other jobs on a shared machine, the first does (each round's ratio then says more about the neighbours)
        cpu_old, cpu_new = [r["target_tokens_per_cpu_s"] for r in old], [r["target_tokens_per_cpu_s"] for r in new]
        old, new = [r["target_tokens_per_s"] for r in old], [r["target_tokens_per_s"] for r in new]
        ratios = [n / o for n, o in zip(new, old)]
        cpu_ratios = [n / o for n, o in zip(cpu_new, cpu_old)]
        result["configs"][config] = {
            "old_tok_s": old,
            "new_tok_s": new,
            "old_median": statistics.median(old),
            "new_median": statistics.median(new),
            "ratio_median": statistics.median(ratios),
            "old_tok_cpu_s": cpu_old,
            "new_tok_cpu_s": cpu_new,
            "cpu_ratio_median": statistics.median(cpu_ratios),
            "cpu_ratios": cpu_ratios,
        }
        print(
            f"{config}: old {statistics.median(old):.0f} tok/s, new {statistics.median(new):.0f} tok/s, "
            f"new/old {statistics.median(ratios):.3f} (rounds {[round(r, 3) for r in ratios]}); per CPU second "
            f"new/old {statistics.median(cpu_ratios):.3f} (rounds {[round(r, 3) for r in cpu_ratios]})",
            flush=True,
        )
    result["load_after"] = os.getloadavg()
    result["time"] = time.strftime("%Y-%m-%d %H:%M:%S")
    text = json.dumps(result, indent=1)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text + "\n")
    print(f"load average before {load_before}, after {result['load_after']}")


if __name__ == "__main__":
    main()
