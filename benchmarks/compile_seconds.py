"""Compile seconds per batch shape of the compiled training step (issue 53): a GPU lease's measurement.

    python benchmarks/compile_seconds.py configs/cogs/dangle.yaml --updates 40 -o OUT.json [--set KEY=VALUE ...]

Runs the config with the GPU's batching (`optim.num_buckets=16 optim.static_shapes=true`, `train.compile=on`)
twice, each in a fresh process sharing one inductor cache folder: `cold` (the folder empty) and `warm` (the
folder the cold run filled, as a later lease would find it if the scripts carried the cache). Each update is
timed (synchronised); an update whose batch shape is new carries that shape's compile, so a shape's compile
seconds are its first update's seconds less the median of the updates of known shapes. Reported per run: the
shapes met, their compile seconds, their sum, and the steady seconds an update. On a CPU the numbers are not
the GPU's (inductor's C++ kernels instead of Triton): a check that the script runs, not a measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WORKER = r"""
import json, sys, tempfile, time, torch
from structseq.config import config_from_dict
from structseq.train.loop import Trainer
spec = json.loads(sys.argv[1])
t = Trainer(config_from_dict(spec["config"]), tempfile.mkdtemp(prefix="compile-seconds-"), show_progress=False)
loss, seen, rows = t.task.loss, set(), []
def recording(model, batch, eps):
    rows[-1]["shape"] = [list(v.shape) for v in batch.values()]
    return loss(model, batch, eps)
t.task.loss = recording
sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
for _ in range(spec["updates"]):
    rows.append({})
    sync(); start = time.perf_counter()
    float(t.step().loss)
    sync(); rows[-1]["seconds"] = time.perf_counter() - start
print(json.dumps(rows))
"""


def run(spec: dict, cache: str) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
    out = subprocess.run([sys.executable, "-c", WORKER, json.dumps(spec)], env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the worker failed:\n{out.stderr[-3000:]}")
    rows = json.loads(out.stdout.strip().splitlines()[-1])
    seen, first, steady = set(), [], []
    for r in rows:
        key = json.dumps(r["shape"])
        (steady if key in seen else first).append(r)
        seen.add(key)
    base = statistics.median(r["seconds"] for r in steady) if steady else 0.0
    compile_s = [max(r["seconds"] - base, 0.0) for r in first]
    return {
        "shapes": len(first),
        "compile_seconds": compile_s,
        "compile_seconds_total": sum(compile_s),
        "steady_seconds_per_update": base,
        "updates": len(rows),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("config")
    p.add_argument("--updates", type=int, default=40)
    p.add_argument("--set", nargs="*", default=[], help="overrides, e.g. train.bf16=true")
    p.add_argument("-o", "--output", required=True, help="the record (refused if it exists)")
    args = p.parse_args(argv)
    out = Path(args.output)
    if out.exists():
        p.error(f"{out} exists; choose another -o")
    from structseq.config import load_config

    sets = ["optim.num_buckets=16", "optim.static_shapes=true", "train.compile=on", *args.set]
    cfg = load_config(args.config, sets)
    from dataclasses import asdict

    spec = {"config": asdict(cfg), "updates": args.updates}
    with tempfile.TemporaryDirectory(prefix="inductor-cache-") as cache:
        record = {"config": args.config, "set": sets, "cold": run(spec, cache), "warm": run(spec, cache)}
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(out)
    print(json.dumps({k: record[k]["compile_seconds_total"] for k in ("cold", "warm")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
