"""Operators per training update, per architecture: the CPU's proxy for a GPU's kernel launches (issue 45).

    python benchmarks/count_ops.py -o results/perf/ops_after.json
    python benchmarks/count_ops.py --src /tmp/structseq-d15a89c/src -o results/perf/ops_before.json
    python benchmarks/count_ops.py --cpu-smoke -o /tmp/ops.json        # tiny data, seconds (the test suite)

Each model of `bench_gpu.py`'s list (their shipped configs, COGS batches of their own token budget) is built at a
tiny width (widths change no operator count; batch shapes do, so the data and the token budget are the config's),
trains `--warmup` updates, then `--updates` updates under a `TorchDispatchMode` that counts every ATen operator
the dispatcher runs (forward, backward and optimiser step: what the autograd engine dispatches too); views and
aliases (`OpOverload.is_view`, `detach`) are counted apart, since they launch no kernel. Reported per model: the
mean operators per update (all, and without views), per target token, and the ten most frequent. `--src` runs
the same counting over another checkout's sources (a fresh process per model), so before and after are counted
on the same batches; `--set` adds overrides to every model (e.g. the new code's switches); `--as-accelerator`
counts the work a GPU gets where a model sizes it by device (Dangle's chunks of 32 target steps, not 8).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: name -> (config, overrides): bench_gpu's models plus R-Dangle_shr and the classifier supertagger
MODELS = {
    "cogs/transformer": ("configs/cogs/transformer.yaml", ()),
    "cogs/dangle": ("configs/cogs/dangle.yaml", ()),
    "cogs/rdangle-shr-o4": ("configs/cogs/rdangle-shr.yaml", ("model.interval=4",)),
    "cogs/rdangle-sep-o1": ("configs/cogs/rdangle-sep.yaml", ("model.interval=1",)),
    "cogs/rdangle-sep-o4": ("configs/cogs/rdangle-sep.yaml", ("model.interval=4",)),
    "cogs/lstm-lex-simple": ("configs/cogs/lstm-lex-simple.yaml", ()),
    "tlgbank-light/supertag-tree": ("configs/tlgbank-light/tree-cpu.yaml", ()),
    "tlgbank-light/supertag-classifier": ("configs/tlgbank-light/classifier-cpu.yaml", ()),
}
TINY = {  # only the keys a model's schema has are set
    "d_model": 16,
    "n_heads": 2,
    "ffn_dim": 32,
    "embed_dim": 16,
    "hidden_dim": 16,
    "node_dim": 8,
    "node_heads": 2,
    "state_heads": 2,
}
TINY_ENCODER = {"word_dim": 8, "char_dim": 4, "char_filters": 4, "hidden": 8}


def worker(spec: dict) -> None:
    """One model's count, in a fresh process (`count_ops.py --worker SPEC`): prints one JSON line. Run as this
    file, so with `--src` (PYTHONPATH) the package is the other checkout's and this file is still this one."""
    import tempfile
    from collections import Counter

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from structseq.train.loop import Trainer

    torch.set_num_threads(1)

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops, self.views = Counter(), 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.is_view or func.__name__.startswith(("detach", "alias")):
                self.views += 1
            else:
                self.ops[str(func.overloadpacket.__name__)] += 1
            return func(*args, **(kwargs or {}))

    cfg = build_config(spec)
    if spec["accelerator"]:  # the chunking a GPU gets (models/dangle.py), where the sources have one
        from structseq.models.dangle import RDangleSeq2Seq

        RDangleSeq2Seq.AUTO_CHUNK_STEPS = getattr(
            RDangleSeq2Seq, "AUTO_CHUNK_STEPS_ACCELERATOR", RDangleSeq2Seq.AUTO_CHUNK_STEPS
        )
    t = Trainer(cfg, tempfile.mkdtemp(prefix="count-ops-"), data_root=spec["data_root"], show_progress=False)
    # `--src` may be a checkout that predates Trainer.step (d15a89c): its private _update returned (loss, target
    # tokens) too, so [1] reads both (as bench_commits.py's worker)
    step = getattr(t, "step", None) or t._update
    for _ in range(spec["warmup"]):
        step()
    counter, tokens = Count(), 0
    with counter:
        for _ in range(spec["updates"]):
            tokens += step()[1]
    n = spec["updates"]
    ops = sum(counter.ops.values())
    print(
        json.dumps(
            {
                "ops_per_update": ops / n,
                "views_per_update": counter.views / n,
                "target_tokens": tokens / n,
                "ops_per_target_token": ops / max(tokens, 1),
                "top": counter.ops.most_common(10),
            }
        )
    )


def build_config(spec: dict):
    """The model's config at a tiny width, on the CPU, never validating (called in the worker)."""
    from structseq.config import apply_overrides, config_from_dict
    from structseq.yamlio import load_yaml

    path = HERE.parent / spec["config"]
    base = load_yaml(path.read_text(), spec["config"])
    schema = config_from_dict(apply_overrides(base, list(spec["overrides"]))).to_dict()["model"]
    sets = [f"model.{k}={v}" for k, v in TINY.items() if k in schema]
    sets += [f"model.encoder.{k}={v}" for k, v in TINY_ENCODER.items() if k in (schema.get("encoder") or {})]
    sets += ["train.device=cpu", "train.valid_every=0", "train.max_steps=1000000", "train.threads=1"]
    if spec["smoke"]:
        sets += ["data.max_train_examples=64", "optim.accumulate=1"]
    cfg = apply_overrides(base, sets + list(spec["set"]) + list(spec["overrides"]))
    return config_from_dict(cfg)


def count(name: str, args) -> dict:
    config, overrides = MODELS[name]
    spec = {
        "config": config,
        "overrides": overrides,
        "set": args.set,
        "smoke": args.cpu_smoke,
        "warmup": args.warmup,
        "updates": args.updates,
        "data_root": args.data_root,
        "accelerator": args.as_accelerator,
    }
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    if args.src:
        env["PYTHONPATH"] = str(Path(args.src).resolve())
    r = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
        capture_output=True,
        text=True,
        env=env,
    )
    if r.returncode:
        return {"model": name, "error": (r.stderr or r.stdout).strip().splitlines()[-1:]}
    return {"model": name, "config": config, "set": [*overrides, *args.set], **json.loads(r.stdout.splitlines()[-1])}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--out", type=Path, required=True)
    p.add_argument("--src", help="count over this checkout's src/ instead of this one's")
    p.add_argument("--only", nargs="*", help="models whose name contains one of these")
    p.add_argument("--set", nargs="*", default=[], help="overrides for every model (key=value)")
    p.add_argument("--updates", type=int, default=4)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--data-root", default=None)
    p.add_argument("--cpu-smoke", action="store_true", help="64 training examples, one update")
    p.add_argument(
        "--as-accelerator", action="store_true", help="the models' accelerator settings (Dangle: 32-step chunks)"
    )
    p.add_argument("--label", default=None, help="what this count measures (default: the sources' commit)")
    args = p.parse_args(argv)
    if args.cpu_smoke:
        args.updates, args.warmup = 1, 0
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=args.src or HERE, capture_output=True, text=True
    ).stdout.strip()
    rows = []
    for name in MODELS:
        if args.only and not any(s in name for s in args.only):
            continue
        t = time.perf_counter()
        rows.append({**count(name, args), "seconds": round(time.perf_counter() - t, 1)})
        print(json.dumps({k: v for k, v in rows[-1].items() if k != "top"}), flush=True)
    result = {
        "label": args.label or commit or "unknown",
        "commit": commit or None,
        "command": " ".join(["python", *sys.argv]),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
    }
    from structseq.outputs import atomic_write

    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(args.out, json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(json.loads(sys.argv[2]))
    else:
        main()
