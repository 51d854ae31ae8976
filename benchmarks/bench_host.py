"""Host time of batch building and of one COGS Transformer update (issue 53 goal 3), on the CPU.

    python benchmarks/bench_host.py --out /tmp/host.json [--batches 200] [--updates 20] [--threads 2]
    python benchmarks/bench_host.py --out /tmp/host.json --smoke          # seconds: tiny counts, for the tests

Two measurements, both of the COGS Transformer's training config with the GPU's fast path
(`configs/cogs/transformer.yaml`, `optim.num_buckets=16 optim.static_shapes=true`, `train.device=cpu`):
- `pad`: milliseconds a tensor to build a batch (`task.collate`: `src`, `tgt_in`, `tgt_out`) with this tree's
  `pad_sequences` and with the row-at-a-time loop it replaced (issue 53: 0.7-2.9 ms a tensor), the same
  batches in the same order, both timed in this process (CPU seconds, `time.process_time`), best of 3 rounds;
- `update`: CPU seconds and wall seconds of one training update (`Trainer.step`: next batch, forward, backward,
  Adam) and of its host-side batch (`TrainingBatches.next`: collate, padding to the bucket's shape, copy to the
  device), over `--updates` updates after 2 warm-up ones.
The record names the machine, its load average before and after, the threads, the commit. On a shared machine
read CPU seconds, not wall seconds, and give the load beside any number; the numbers of `--smoke` are not
measurements. The JSON is written atomically and never over an existing file.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def machine_record() -> dict:
    import platform
    import subprocess

    import torch

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True).stdout.strip()
    return {
        "node": platform.node(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "commit": commit or None,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def row_loop_pad(seqs, pad=0):
    """The `pad_sequences` of da0ad07: a tensor filled a row at a time (the reference the numpy one replaced)."""
    import torch

    out = torch.full((len(seqs), max(len(s) for s in seqs)), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


def time_pad(trainer, batches, rounds: int = 3) -> dict:
    """ms a tensor of `task.collate` over `batches` (index lists) with each padding function, best of `rounds`."""
    from structseq.data import batching
    from structseq.tasks import seq2seq

    task, examples = trainer.task, trainer.batches.examples
    items = [[examples[i] for i in idx] for idx in batches]
    out = {}
    for name, pad in (("row_loop", row_loop_pad), ("numpy", batching.pad_sequences)):
        saved = (seq2seq.pad_sequences, batching.pad_sequences)
        seq2seq.pad_sequences = batching.pad_sequences = pad
        try:
            best, tensors = float("inf"), 0
            for _ in range(rounds):
                t, tensors = time.process_time(), 0
                for idx, its in zip(batches, items):
                    tensors += len(task.collate(its, idx))
                best = min(best, time.process_time() - t)
        finally:
            seq2seq.pad_sequences, batching.pad_sequences = saved
        out[name] = {"tensors": tensors, "cpu_s": best, "ms_per_tensor": best / tensors * 1e3}
    out["speedup"] = out["row_loop"]["ms_per_tensor"] / out["numpy"]["ms_per_tensor"]
    return out


def time_updates(trainer, updates: int) -> dict:
    for _ in range(2):  # warm-up
        trainer.step()
    c, w = time.process_time(), time.perf_counter()
    for _ in range(updates):
        trainer.step()
    cpu, wall = time.process_time() - c, time.perf_counter() - w
    progress = dataclasses.replace(trainer.progress)
    c = time.process_time()
    for _ in range(updates):
        trainer.batches.next(progress, trainer.dist)
    batch_cpu = time.process_time() - c
    return {
        "updates": updates,
        "cpu_s_per_update": cpu / updates,
        "wall_s_per_update": wall / updates,
        "batch_cpu_ms_per_update": batch_cpu / updates * 1e3,
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="the JSON record (a new file)")
    p.add_argument("--batches", type=int, default=200)
    p.add_argument("--updates", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data-root", default=None, help="[default: $STRUCTSEQ_DATA, ../shared/data]")
    p.add_argument("--smoke", action="store_true", help="tiny counts and a tiny model: the numbers mean nothing")
    args = p.parse_args(argv)
    if args.out.exists():
        print(f"bench_host: {args.out} exists; choose another --out", file=sys.stderr)
        return 2
    import torch

    from structseq.config import load_config
    from structseq.train.loop import Trainer

    torch.set_num_threads(args.threads)
    sets = ["optim.num_buckets=16", "optim.static_shapes=true", "train.device=cpu", "train.valid_every=0"]
    sets += [f"train.threads={args.threads}", "train.log_every=1000000"]
    if args.smoke:
        args.batches, args.updates = min(args.batches, 5), min(args.updates, 2)
        sets += ["model.d_model=16", "model.n_heads=2", "model.ffn_dim=32", "data.max_train_examples=300"]
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(HERE.parent / "configs" / "cogs" / "transformer.yaml", sets)
        trainer = Trainer(cfg, Path(tmp) / "run", data_root=args.data_root, show_progress=False)
        batches = [b for e in range(3) for b in trainer.batches.epoch(e)][: args.batches]
        pad = time_pad(trainer, batches)
        update = time_updates(trainer, args.updates)
    record = {
        "benchmark": "bench_host",
        "smoke": args.smoke,
        "note": "smoke: not a measurement" if args.smoke else "CPU seconds on this machine; give the load with them",
        "machine": {**machine_record(), "load_avg_before": list(load), "load_avg_after": list(os.getloadavg())},
        "threads": args.threads,
        "config": "configs/cogs/transformer.yaml " + " ".join(sets),
        "batches": len(batches),
        "pad": pad,
        "update": update,
    }
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    os.replace(tmp, args.out)
    print(
        f"pad: {pad['numpy']['ms_per_tensor']:.3f} ms a tensor (row loop {pad['row_loop']['ms_per_tensor']:.3f}, "
        f"{pad['speedup']:.1f}x); update: {update['cpu_s_per_update']:.3f} CPU s ({update['wall_s_per_update']:.3f} "
        f"wall), of it the batch {update['batch_cpu_ms_per_update']:.2f} CPU ms; load {load[0]:.1f} -> "
        f"{os.getloadavg()[0]:.1f}{' (smoke: not measurements)' if args.smoke else ''}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
