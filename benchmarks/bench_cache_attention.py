"""Is attention over the decoding cache a slow kernel or memory traffic? (issue 13, matched greedy decoding)

    .venv/bin/python benchmarks/bench_cache_attention.py --rounds 3 -o results/perf/bench_cache_attention.json

One incremental decoding step's attention for the `transformer_iwslt_de_en` shapes of the fairseq decoding
benchmark (128 sentences, 4 heads of 128, one query position) over 10 / 30 / 60 cached positions read from a
60-position cache buffer, as `nn/attention.py`'s `KVCache` holds them: PyTorch's fused CPU kernel
(`F.scaled_dot_product_attention`, what structseq calls) against a plain `matmul`-softmax-`matmul`, an elementwise
formulation (multiply and sum over all sentences and heads at once, no per-head GEMV) and against the memory floor (summing the same keys and values: one read, no arithmetic worth counting), alternating per
round, medians over rounds, with the effective bandwidth. The attentions are checked equal (1e-5) first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--calls", type=int, default=50, help="calls per timing")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--lengths", type=int, nargs="+", default=[10, 30, 60])
    p.add_argument(
        "-o", "--output", default=str(Path(__file__).resolve().parent / "work" / "bench_cache_attention.json")
    )
    args = p.parse_args(argv)

    import torch
    import torch.nn.functional as F

    torch.set_num_threads(args.threads)
    load_before = os.getloadavg()
    B, H, dh, cap = args.batch, 4, 128, max(args.lengths)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, 1, dh, generator=g)
    k_buf, v_buf = torch.randn(B, H, cap, dh, generator=g), torch.randn(B, H, cap, dh, generator=g)

    rows = []
    for L in args.lengths:
        k, v = k_buf[:, :, :L], v_buf[:, :, :L]

        def fused():
            return F.scaled_dot_product_attention(q, k, v)

        def plain():
            return torch.matmul(torch.matmul(q, k.transpose(-1, -2)).mul_(dh**-0.5).softmax(-1), v)

        def elementwise():  # vectorised over every (sentence, head) instead of one tiny GEMV each
            w = (k * q).sum(-1, keepdim=True).mul_(dh**-0.5).softmax(-2)
            return (v * w).sum(-2, keepdim=True)

        def read():
            return k.sum() + v.sum()

        torch.testing.assert_close(fused(), plain(), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(fused(), elementwise(), atol=1e-5, rtol=1e-5)
        times: dict[str, list[float]] = {"fused": [], "plain": [], "elementwise": [], "read": []}
        for _ in range(args.rounds):
            for name, fn in (("fused", fused), ("plain", plain), ("elementwise", elementwise), ("read", read)):
                fn()
                t = time.perf_counter()
                for _ in range(args.calls):
                    fn()
                times[name].append((time.perf_counter() - t) / args.calls)
        kv_bytes = 2 * B * H * L * dh * 4
        med = {n: statistics.median(v) for n, v in times.items()}
        rows.append(
            {
                "cached_positions": L,
                "fused_ms": med["fused"] * 1e3,
                "plain_ms": med["plain"] * 1e3,
                "fused_over_plain": med["fused"] / med["plain"],
                "rounds_ratio": [a / b for a, b in zip(times["fused"], times["plain"])],
                "elementwise_ms": med["elementwise"] * 1e3,
                "fused_over_elementwise": med["fused"] / med["elementwise"],
                "read_ms": med["read"] * 1e3,
                "fused_over_read": med["fused"] / med["read"],
                "kv_mb": kv_bytes / 1e6,
                "fused_gb_s": kv_bytes / med["fused"] / 1e9,
                "read_gb_s": kv_bytes / med["read"] / 1e9,
            }
        )
        print(
            f"{L:3d} positions: fused {med['fused'] * 1e3:.2f} ms, plain {med['plain'] * 1e3:.2f} ms, "
            f"elementwise {med['elementwise'] * 1e3:.2f} ms; keys+values {kv_bytes / 1e6:.1f} MB read at "
            f"{kv_bytes / med['fused'] / 1e9:.1f} GB/s; reading them alone {med['read'] * 1e3:.2f} ms "
            f"({kv_bytes / med['read'] / 1e9:.1f} GB/s)"
        )
    out = {
        "batch": B,
        "heads": H,
        "head_dim": dh,
        "cache_capacity": cap,
        "threads": args.threads,
        "rounds": args.rounds,
        "calls": args.calls,
        "rows": rows,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
