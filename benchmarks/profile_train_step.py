"""Where a Transformer training step spends its time outside GEMMs (issue 13, part 2).

    .venv/bin/python benchmarks/profile_train_step.py --updates 3 -o results/perf/profile_train_step.json

Builds the `bench_train.py --only fairseq` model (fairseq's `transformer_iwslt_de_en` size) on SCAN simple
batches of 3,500 tokens, runs two warm-up updates, then profiles `--updates` updates with torch.profiler and
groups the operators' self CPU time: GEMMs (mm, addmm, bmm), attention kernels, dropout masks (bernoulli),
layer norm, other elementwise work, the optimiser, and the rest. Writes the groups, the top operators and the
load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

GROUPS = {  # first match wins
    "gemm": ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear"),
    "attention": ("scaled_dot_product", "flash_attention"),
    "dropout masks": ("aten::bernoulli", "aten::dropout", "aten::native_dropout"),
    "layer norm": ("layer_norm",),
    "optimiser": ("adam", "Optimizer"),
    "loss": ("log_softmax", "nll_loss", "gather", "scatter"),
    "elementwise": ("aten::mul", "aten::add", "aten::div", "aten::sum", "aten::clamp", "threshold", "aten::relu",
                    "aten::fill_", "aten::copy_", "aten::cat", "aten::sub", "aten::exp", "aten::where",
                    "aten::masked_fill"),
}


def group_of(name: str) -> str:
    for group, keys in GROUPS.items():
        if any(k.lower() in name.lower() for k in keys):
            return group
    return "other"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--updates", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=3500)
    p.add_argument("-o", "--output", default=str(HERE / "work" / "profile_train_step.json"))
    args = p.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile

    from bench_train import FAIRSEQ_OPTIM, TRANSFORMER, cfg
    from structseq.config import config_from_dict
    from structseq.train.loop import Trainer

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    out_dir = tempfile.mkdtemp(prefix="profile-train-")
    try:
        c = json.loads(cfg("scan-simple", "test", TRANSFORMER, {**FAIRSEQ_OPTIM, "max_tokens": args.max_tokens}))
        trainer = Trainer(config_from_dict(c), out_dir, show_progress=False)
        for _ in range(2):
            trainer._update()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.updates):
                trainer._update()
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    events = [(e.key, e.self_cpu_time_total / 1e6, e.count) for e in prof.key_averages()]
    total = sum(t for _, t, _ in events)
    groups: dict[str, float] = {}
    for name, t, _ in events:
        groups[group_of(name)] = groups.get(group_of(name), 0.0) + t
    result = {"updates": args.updates, "threads": args.threads, "max_tokens": args.max_tokens,
              "self_cpu_s_total": total, "self_cpu_s_per_update": total / args.updates,
              "groups_share": {g: t / total for g, t in sorted(groups.items(), key=lambda kv: -kv[1])},
              "top_ops": [{"op": n, "self_cpu_s": t, "share": t / total, "calls": c}
                          for n, t, c in sorted(events, key=lambda e: -e[1])[:15]],
              "loadavg_before": load_before, "loadavg_after": os.getloadavg()}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=1))
    for g, share in result["groups_share"].items():
        print(f"{g:14s} {share:6.1%}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
