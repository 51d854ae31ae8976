"""Train and evaluate a list of configs x seeds; append one JSON line per (run, split) to a results file.

    python scripts/reproduce.py configs/scan-jump/lstm-cpu.yaml configs/cogs/transformer-cpu.yaml \
        --seeds 1 2 3 --out results/foundation.jsonl --runs runs/repro --jobs 2

Each record has the config, seed, split, every metric, the training wall time and the machine. A run
already recorded in the results file is skipped, a finished training is evaluated without retraining,
and an interrupted one resumes from its last checkpoint, so the script can be restarted at any time.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def run_name(config: str, seed: int, overrides: list[str] = ()) -> str:
    tag = "".join(f"-{o.split('.')[-1].replace('=', '')}" for o in overrides)  # e.g. -interval4 -max_steps500
    return f"{Path(config).parent.name}-{Path(config).stem}{tag}-s{seed}"


def one(config: str, seed: int, runs: str, out: str, overrides: list[str], name: str | None = None) -> str:
    """Train (or resume) one run and append one JSON line per test split to `out`. The decoding settings of
    `config` + `overrides` apply when the run is evaluated, also to a run trained before they changed."""
    from structseq import api
    from structseq.config import load_config
    from structseq.train.checkpoint import load_checkpoint

    cfg = load_config(config, overrides)
    cfg.train.seed = seed
    name = name or run_name(config, seed, overrides)
    run_dir = Path(runs) / name
    last = run_dir / "checkpoints" / "last.pt"
    t0 = time.time()
    if last.exists():
        step = load_checkpoint(last)["progress"]["step"]
        if step < cfg.train.max_steps:
            api.resume(run_dir, show_progress=False)
    else:
        api.train(cfg, run_dir, show_progress=False)
    train_s = time.time() - t0
    lines = []
    for split in cfg.data.test:
        t1 = time.time()
        run = api.load_run(run_dir)
        run.config.decode = cfg.decode
        m = run.evaluate(split)
        rec = {"config": config, "overrides": overrides, "seed": seed, "run_dir": str(run_dir), "split": split,
               "train_wall_s": round(train_s, 1), "eval_wall_s": round(time.time() - t1, 1),
               "steps": cfg.train.max_steps, "machine": f"{platform.node()} {platform.processor()}",
               "git": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
               "metrics": {k: v for k, v in m.items() if k not in ("predictions",)}}
        lines.append(json.dumps(rec))
    with open(out, "a") as f:
        f.write("\n".join(lines) + "\n")
    return f"{name}: " + ", ".join(
        f"{json.loads(x)['split']} EM {json.loads(x)['metrics']['exact_match']['score']:.4f}" for x in lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("configs", nargs="+")
    p.add_argument("--seeds", type=int, nargs="+", default=[1])
    p.add_argument("--out", default="results/foundation.jsonl")
    p.add_argument("--runs", default="runs/repro")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--set", dest="overrides", action="append", default=[])
    a = p.parse_args(argv)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if Path(a.out).exists():  # restartable: skip (config, seed) pairs already recorded
        for line in open(a.out):
            if line.strip():
                r = json.loads(line)
                done.add((r["config"], r["seed"], tuple(r.get("overrides", []))))
    jobs = [(c, s) for c in a.configs for s in a.seeds if (c, s, tuple(a.overrides)) not in done]
    with ProcessPoolExecutor(a.jobs) as pool:
        futures = [pool.submit(one, c, s, a.runs, a.out, a.overrides) for c, s in jobs]
        for f in futures:
            print(f.result(), flush=True)


if __name__ == "__main__":
    sys.exit(main())
