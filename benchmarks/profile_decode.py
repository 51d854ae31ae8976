"""Where incremental decoding spends its time: torch.profiler over `Run.decode_examples` of a trained run.

    .venv/bin/python benchmarks/profile_decode.py benchmarks/work/decode/structseq-u100 --beam 5 \\
        --sentences 64 -o results/perf/profile_decode_beam5.json

Decodes the first `--sentences` sources of a SCAN-format test file (default: SCAN simple test) with the run's
model, `--batch` sentences a batch, maximum length `--max-len`, one warm-up call on 8 sentences, then profiles
one call and writes the operators' self CPU time grouped as in `profile_train_step.py` (GEMMs, attention
kernels, copies and gathers, ...) with the top operators and the load average before and after. Shares are of
profiled time; the profiler's per-call cost inflates the many small operators.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

GROUPS = {  # first match wins
    "gemm": ("aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear"),
    "attention": ("scaled_dot_product", "flash_attention"),
    "gathers and copies": ("index_select", "aten::copy_", "aten::cat", "gather"),
    "layer norm": ("layer_norm",),
    "search": ("topk", "log_softmax", "where", "nan_to_num"),
}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a run directory (structseq train -o RUN)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--sentences", type=int, default=64)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--max-len", type=int, default=60)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--data",
        help="a SCAN-format file (IN: ... OUT: ...); default: SCAN simple test under the data "
        "root ($STRUCTSEQ_DATA, else ../shared/data)",
    )
    p.add_argument("-o", "--output", default=str(HERE / "work" / "profile_decode.json"))
    args = p.parse_args(argv)

    import torch
    from torch.profiler import ProfilerActivity, profile

    from structseq import api
    from structseq.data.example import Example

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    run = api.load_run(args.run, device="cpu")
    d = run.task.cfg.decode
    d.max_len_a, d.max_len_b, d.batch_size, d.len_penalty = 0.0, args.max_len, args.batch, 1.0
    from structseq.paths import data_root

    with open(args.data or data_root() / "scan/simple_split/tasks_test_simple.txt", encoding="utf-8") as f:
        sources = [line.split(" OUT: ")[0].removeprefix("IN: ").strip() for line in f][: args.sentences]
    examples = [Example.from_text(s) for s in sources]
    run.decode_examples(examples[:8], beam=args.beam)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t = time.perf_counter()
        run.decode_examples(examples, beam=args.beam)
        wall = time.perf_counter() - t
    events = [(e.key, e.self_cpu_time_total / 1e6, e.count) for e in prof.key_averages()]
    total = sum(s for _, s, _ in events)
    groups: dict[str, float] = {}
    for name, s, _ in events:
        g = next((g for g, keys in GROUPS.items() if any(k in name for k in keys)), "other")
        groups[g] = groups.get(g, 0.0) + s
    result = {
        "run": args.run,
        "beam": args.beam,
        "sentences": len(examples),
        "batch": args.batch,
        "max_len": args.max_len,
        "threads": args.threads,
        "wall_s_profiled": wall,
        "groups_share": {g: s / total for g, s in sorted(groups.items(), key=lambda kv: -kv[1])},
        "top_ops": [
            {"op": n, "self_cpu_s": s, "share": s / total, "calls": c}
            for n, s, c in sorted(events, key=lambda e: -e[1])[:12]
        ],
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=1))
    for g, share in result["groups_share"].items():
        print(f"{g:20s} {share:6.1%}")
    for o in result["top_ops"][:5]:
        print(f"  {o['op']:50s} {o['share']:6.1%}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
