"""Where incremental decoding spends its time: torch.profiler over `Run.decode_examples` of a trained run.

    .venv/bin/python benchmarks/profile_decode.py benchmarks/work/decode/structseq-u100 --beam 5 \\
        --sentences 64 -o results/perf/profile_decode_beam5.json

Decodes the first `--sentences` sources of a SCAN-format test file (default: SCAN simple test) with the run's
model, `--batch` sentences a batch, maximum length `--max-len`, one warm-up call on 8 sentences, then profiles
one call and writes the operators' self CPU time grouped as in `profile_train_step.py` (GEMMs, attention
kernels, copies and gathers, ...) with the top operators and the load average before and after. Shares are of
profiled time; the profiler's per-call cost inflates the many small operators. One search step is split into
the model's incremental step (`model.step`, timed around each call) and the search loop's own work around it
(the rest of the call: choosing, finished hypotheses, reordering the state), each per step in ms; the same call
is also timed unprofiled (`unprofiled`: wall and process CPU seconds), since the profiler's cost is not spread
evenly. `--set` changes the run's decode settings; `--plain` switches every search speed-up off
(`structseq.decode.speedups`), the baseline for their effect.
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
    p.add_argument("--plain", action="store_true", help="every search speed-up off (structseq.decode.speedups)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a decode setting, e.g. decode.x=1")
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
    if args.plain:
        from structseq.decode import speedups

        speedups.off().__enter__()  # for the whole process
    load_before = os.getloadavg()
    run = api.load_run(args.run, device="cpu")
    d = run.task.cfg.decode
    d.max_len_a, d.max_len_b, d.batch_size, d.len_penalty = 0.0, args.max_len, args.batch, 1.0
    for item in args.set:
        key, _, value = item.partition("=")
        setattr(d, key.removeprefix("decode."), json.loads(value))
    from structseq.paths import data_root

    with open(args.data or data_root() / "scan/simple_split/tasks_test_simple.txt", encoding="utf-8") as f:
        sources = [line.split(" OUT: ")[0].removeprefix("IN: ").strip() for line in f][: args.sentences]
    examples = [Example.from_text(s) for s in sources]
    run.decode_examples(examples[:8], beam=args.beam)
    c, t = time.process_time(), time.perf_counter()
    run.decode_examples(examples, beam=args.beam)
    unprofiled = {"wall_s": time.perf_counter() - t, "process_cpu_s": time.process_time() - c}
    model, step_s = run.model, [0.0, 0]
    plain_step = model.step

    def timed_step(prev, state):  # the model's share of each search step
        t0 = time.perf_counter()
        out = plain_step(prev, state)
        step_s[0] += time.perf_counter() - t0
        step_s[1] += 1
        return out

    model.step = timed_step
    c, t = time.process_time(), time.perf_counter()
    run.decode_examples(examples, beam=args.beam)
    timed = {"wall_s": time.perf_counter() - t, "process_cpu_s": time.process_time() - c}
    steps, model_s = step_s[1], step_s[0]
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
        "decode_settings": args.set,
        "plain": args.plain,
        "wall_s_profiled": wall,
        "unprofiled": unprofiled,
        "per_step": {
            "steps": steps,
            "ms": 1000 * timed["wall_s"] / steps,
            "model_step_ms": 1000 * model_s / steps,
            "search_loop_ms": 1000 * (timed["wall_s"] - model_s) / steps,
            "process_cpu_ms": 1000 * timed["process_cpu_s"] / steps,
        },
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
    ps = result["per_step"]
    print(
        f"{ps['steps']} steps, {ps['ms']:.2f} ms a step: model {ps['model_step_ms']:.2f}, search loop "
        f"{ps['search_loop_ms']:.2f}; unprofiled {unprofiled['wall_s']:.2f} s, {unprofiled['process_cpu_s']:.2f} CPU s"
    )
    for g, share in result["groups_share"].items():
        print(f"{g:20s} {share:6.1%}")
    for o in result["top_ops"][:5]:
        print(f"  {o['op']:50s} {o['share']:6.1%}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
