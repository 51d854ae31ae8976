"""Where a training step spends its time outside GEMMs, and how fast its GEMMs run (issue 13, parts 1-2).

    .venv/bin/python benchmarks/profile_train_step.py --updates 3 -o results/perf/profile_train_step.json
    .venv/bin/python benchmarks/profile_train_step.py --config configs/scan-jump/lstm-cpu.yaml --threads 1 \
        -o results/perf/profile_train_step_lstm.json

Without `--config` it builds the `bench_train.py --only fairseq` model (fairseq's `transformer_iwslt_de_en`
size) on SCAN simple batches of 3,500 tokens; with `--config` it trains that shipped config on its own batches.
Two warm-up updates, then `--updates` profiled updates (torch.profiler, shapes and FLOPs recorded). Reports:

- the operators' self CPU time in groups: GEMMs (mm, addmm, bmm), attention kernels, dropout masks
  (`bernoulli_`, or `uniform_` for structseq's `rand >= p` masks), layer norm, other elementwise work, the optimiser, and the rest; the top operators;
- the GEMMs' achieved FLOP rate against the peak of a 2048^3 fp32 GEMM (and bf16, for reference) measured in the
  same process right after, and what that implies: `ceiling_speedup_same_math` = step time / GEMM time, the
  speed-up if everything outside the GEMMs vanished and the GEMMs ran as they do (they are near peak when the
  ratio `gemm_rate_vs_peak` is near 1, so no fp32 formulation of the same arithmetic can go faster);
- the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

GROUPS = {  # first match wins
    "gemm": ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear"),
    "attention": ("scaled_dot_product", "flash_attention"),
    "dropout masks": ("aten::bernoulli", "aten::dropout", "aten::native_dropout", "aten::uniform_"),
    "layer norm": ("layer_norm",),
    "optimiser": ("adam", "Optimizer"),
    "loss": ("log_softmax", "nll_loss", "gather", "scatter"),
    "elementwise": (
        "aten::mul",
        "aten::add",
        "aten::div",
        "aten::sum",
        "aten::clamp",
        "threshold",
        "aten::relu",
        "aten::fill_",
        "aten::copy_",
        "aten::cat",
        "aten::sub",
        "aten::exp",
        "aten::where",
        "aten::masked_fill",
    ),
}


def group_of(name: str) -> str:
    for group, keys in GROUPS.items():
        if any(k.lower() in name.lower() for k in keys):
            return group
    return "other"


def _gemm_peak(torch, dtype, n: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of an n^3 GEMM in `dtype` with the current thread count (best of `repeats`)."""
    import time

    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--updates", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-tokens", type=int, default=3500)
    p.add_argument(
        "--config",
        help="profile this shipped config on its own batches instead of the fairseq-sized "
        "Transformer (e.g. configs/scan-jump/lstm-cpu.yaml)",
    )
    p.add_argument("-o", "--output", default=str(HERE / "work" / "profile_train_step.json"))
    args = p.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile

    from structseq.config import config_from_dict, load_config
    from structseq.testing.bench import fairseq_transformer_config
    from structseq.train.loop import Trainer

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    out_dir = tempfile.mkdtemp(prefix="profile-train-")
    try:
        if args.config:
            config = load_config(
                args.config, [f"train.threads={args.threads}", "train.valid_every=0", "train.log_every=1000000"]
            )
        else:
            config = config_from_dict(fairseq_transformer_config(args.max_tokens))
        trainer = Trainer(config, out_dir, show_progress=False)
        torch.set_num_threads(args.threads)
        for _ in range(2):
            trainer.step()
        with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
            for _ in range(args.updates):
                trainer.step()
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    averages = prof.key_averages()
    events = [(e.key, e.self_cpu_time_total / 1e6, e.count) for e in averages]
    gemm_s = sum(e.self_cpu_time_total for e in averages if group_of(e.key) == "gemm") / 1e6
    gemm_flops = sum(e.flops for e in averages if group_of(e.key) == "gemm")
    peak = {str(dt).removeprefix("torch."): _gemm_peak(torch, dt) for dt in (torch.float32, torch.bfloat16)}
    total = sum(t for _, t, _ in events)
    groups: dict[str, float] = {}
    for name, t, _ in events:
        groups[group_of(name)] = groups.get(group_of(name), 0.0) + t
    result = {
        "updates": args.updates,
        "threads": args.threads,
        "max_tokens": args.max_tokens,
        "self_cpu_s_total": total,
        "self_cpu_s_per_update": total / args.updates,
        "groups_share": {g: t / total for g, t in sorted(groups.items(), key=lambda kv: -kv[1])},
        "gemm_share": gemm_s / total,
        "gemm_gflop_s": gemm_flops / gemm_s / 1e9,
        "peak_gemm_gflop_s": peak,
        "gemm_rate_vs_peak": gemm_flops / gemm_s / 1e9 / peak["float32"],
        "ceiling_speedup_same_math": total / gemm_s,
        "config": args.config or "bench_train fairseq",
        "top_ops": [
            {"op": n, "self_cpu_s": t, "share": t / total, "calls": c}
            for n, t, c in sorted(events, key=lambda e: -e[1])[:15]
        ],
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=1))
    for g, share in result["groups_share"].items():
        print(f"{g:14s} {share:6.1%}")
    print(
        f"GEMMs run at {result['gemm_gflop_s']:.0f} GFLOP/s, {result['gemm_rate_vs_peak']:.2f} of a 2048^3 fp32 GEMM "
        f"({peak['float32']:.0f}; bf16 {peak['bfloat16']:.0f}); ceiling without the rest: "
        f"{result['ceiling_speedup_same_math']:.2f}x"
    )
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
