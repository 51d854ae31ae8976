"""Context-aware decoders vs the sequential baseline as the context grows (issue 11).

For each context length (default 50 / 200 / 800 tokens) and each decoder variant, on the *same* random
batches: training throughput (target tokens/s over fwd + bwd + Adam steps), greedy decoding throughput
(sentences/s) and peak memory. Each (variant, length) runs in its own process so peak memory is its own:
peak RSS growth over the process's state after building the model (CPU), or torch's peak allocated
memory (CUDA).

    python benchmarks/bench_context.py                       # CPU, d 64, the CI-sized model
    python benchmarks/bench_context.py --device cuda --d-model 512 --batch 32 --out results/context/bench.json

On a shared, loaded machine the numbers are indicative only: the script records os.getloadavg() before
and after.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

VARIANTS = ("sequential", "concatenate", "alternate", "interleave", "doc-nmt")


def measure(variant: str, ctx_len: int, args) -> dict:
    import torch

    from structseq.config import config_from_dict
    from structseq.data.vocab import Vocab
    from structseq.decode.search import greedy
    from structseq.models import build_model
    from structseq.models.context import SEP

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    device = torch.device(args.device)
    vocab = Vocab.build([[f"w{i}" for i in range(args.vocab)] + [SEP]])
    cfg = config_from_dict(
        {
            "task": "context-seq2seq",
            "model": {
                "arch": "context-transformer",
                "decoder": variant,
                "d_model": args.d_model,
                "n_heads": 4,
                "ffn_dim": 2 * args.d_model,
                "encoder_layers": 2,
                "decoder_layers": 4,
                "source_layers": [1, 4],
                "context_layers": [2, 3],
                "dropout": 0.0,
            },
        }
    )
    model = build_model(cfg.model, {"src": vocab, "tgt": vocab}, task="context-seq2seq").to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(1)  # the same batches for every variant

    def ids(n):
        return torch.randint(4, len(vocab) - 1, (args.batch, n), generator=g)

    B = args.batch
    src = torch.cat([ids(args.src_len), torch.full((B, 1), 2)], 1).to(device)
    ctx = torch.cat([ids(ctx_len), torch.full((B, 1), 2)], 1).to(device)
    tgt = ids(args.tgt_len)
    batch = {
        "src": src,
        "ctx": ctx,
        "tgt_in": torch.cat([torch.ones(B, 1, dtype=torch.long), tgt], 1).to(device),
        "tgt_out": torch.cat([tgt, torch.full((B, 1), 2)], 1).to(device),
    }
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()

    def train_step():
        lp = model(batch)
        loss = -lp.gather(-1, batch["tgt_out"][..., None]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    model.train()
    train_step()
    sync()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        train_step()
    sync()
    train_s = time.perf_counter() - t0
    model.eval()
    max_len = torch.full((B,), args.tgt_len + 2, device=device)
    greedy(model, {"src": src, "ctx": ctx}, max_len)
    sync()
    t0 = time.perf_counter()
    for _ in range(args.decode_reps):
        greedy(model, {"src": src, "ctx": ctx}, max_len)
    sync()
    decode_s = time.perf_counter() - t0
    out = {
        "variant": variant,
        "context_tokens": ctx_len,
        "train_target_tokens_per_s": args.steps * B * (args.tgt_len + 1) / train_s,
        "decode_sentences_per_s": args.decode_reps * B / decode_s,
        "peak_rss_growth_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base_rss) / 1024,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    if device.type == "cuda":
        out["peak_cuda_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", type=int, nargs="+", default=[50, 200, 800])
    p.add_argument("--variants", nargs="+", default=list(VARIANTS))
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--src-len", type=int, default=10)
    p.add_argument("--tgt-len", type=int, default=10)
    p.add_argument("--vocab", type=int, default=200)
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--decode-reps", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure every (length, variant) cell this many times, the variants alternating within each "
        "round; the table gives medians, and ratios as the median of the per-round ratios",
    )
    p.add_argument("--out", default=None, help="write the rows as JSON here")
    p.add_argument("--one", nargs=2, metavar=("VARIANT", "LENGTH"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]), args)))
        return
    load_before = os.getloadavg()
    passthrough = [a for a in (argv if argv is not None else sys.argv[1:])]
    drop = {"--out", "--lengths", "--variants", "--rounds"}
    kept, skip = [], False
    for a in passthrough:  # every option but the ones the parent handles
        if a in drop:
            skip = True
            continue
        if skip and not a.startswith("--"):
            continue
        skip = False
        kept.append(a)
    measured: dict[tuple[int, str], list[dict]] = {}
    for k in range(args.rounds):
        for n in args.lengths:
            for v in args.variants:
                res = subprocess.run(
                    [sys.executable, __file__, *kept, "--one", v, str(n)], capture_output=True, text=True
                )
                if res.returncode:
                    raise SystemExit(res.stderr)
                r = json.loads(res.stdout.strip().splitlines()[-1])
                measured.setdefault((n, v), []).append(r)
                print(
                    f"round {k + 1} ctx {n:4d} {v:12s} train {r['train_target_tokens_per_s']:8.0f} tgt tok/s  "
                    f"decode {r['decode_sentences_per_s']:7.1f} sent/s  peak +{r['peak_rss_growth_mib']:.0f} MiB"
                    + (f" cuda {r['peak_cuda_mib']:.0f} MiB" if "peak_cuda_mib" in r else ""),
                    flush=True,
                )
    rows = []
    for (n, v), rs in measured.items():
        row = {"variant": v, "context_tokens": n, "rounds": rs, "parameters": rs[0]["parameters"]}
        for key in ("train_target_tokens_per_s", "decode_sentences_per_s", "peak_rss_growth_mib", "peak_cuda_mib"):
            if key in rs[0]:
                row[key] = statistics.median(r[key] for r in rs)
        seq = measured.get((n, "sequential"))
        if seq:  # relative to sequential on the same batches, round by round
            for key, name in (("train_target_tokens_per_s", "train"), ("decode_sentences_per_s", "decode")):
                ratios = [r[key] / s[key] for r, s in zip(rs, seq)]
                row[f"{name}_speed_vs_sequential_rounds"] = ratios
                row[f"{name}_speed_vs_sequential"] = statistics.median(ratios)
        rows.append(row)
    summary = {
        "rows": rows,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
        "settings": {k: v for k, v in vars(args).items() if k not in ("one", "out")},
        "cpu_count": os.cpu_count(),
        "command": "python benchmarks/bench_context.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=1)
    print(f"load average before {load_before}, after {summary['loadavg_after']}")


if __name__ == "__main__":
    main()
