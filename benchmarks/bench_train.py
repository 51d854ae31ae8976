"""Training and decoding throughput of structseq models, model FLOP utilisation, and fairseq side by side.

    .venv/bin/python benchmarks/bench_train.py                 # everything, JSON to stdout + benchmarks/work/
    .venv/bin/python benchmarks/bench_train.py --only fairseq --repeats 3 --updates 20
    .venv/bin/python benchmarks/bench_train.py --only models --updates 10

Sections
- `matmul`: the machine's fp32 matmul throughput (2048^3 GEMMs), measured in the same run; the
  denominator of model FLOP utilisation (MFU = counted model FLOPs per second / matmul FLOPs per second).
- `models`: Transformer (d 512, FFN 1024, 4 heads, 6+6) and the 2x512 LSTM trained on COGS batches
  (Transformer: 4096-token budget; LSTM: 128 sentences): target tokens/s, peak RSS, FLOPs per update
  counted by torch's FlopCounterMode, MFU; decoding sentences/s for greedy and beam 5.
- `fairseq`: fairseq 0.12's `transformer_iwslt_de_en` against the same architecture in structseq,
  trained on the *same batches* (fairseq's own --max-tokens 3500 batches of SCAN simple, read out of
  fairseq) for the same number of updates, same optimiser, loss and dropout; runs alternate
  A B A B ... because this machine's speed drifts; medians and their ratio are reported.
Every measurement runs in a fresh subprocess (clean peak memory, fixed thread count).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from structseq.testing.bench import (
    FAIRSEQ_OPTIM,
    FAIRSEQ_TRANSFORMER,
    NoEos,
    bench_config,
    count_flops,
    fairseq_transformer_config,
    matmul_gflops,
)

HERE = Path(__file__).resolve().parent
WORK = HERE / "work"


# --------------------------------------------------------------------------- workers (subprocess side)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _trainer(overrides: list[str], threads: int, out: str):
    import shutil

    import torch

    from structseq.config import config_from_dict
    from structseq.train.loop import Trainer

    torch.set_num_threads(threads)
    cfg = json.loads(overrides[0])
    cfg.setdefault("train", {})["threads"] = threads  # pinned: the Trainer's own count would read the machine
    shutil.rmtree(out, ignore_errors=True)
    return Trainer(config_from_dict(cfg), out, show_progress=False)


def worker_train(cfg_json: str, threads: int, updates: int, warmup: int, plan: str | None = None) -> dict:
    """Time `updates` training updates (the first `warmup` excluded) of the configured model."""
    trainer = _trainer([cfg_json], threads, str(WORK / "bench-run"))
    if plan:  # train on a fixed list of batches (e.g. fairseq's own), in that order
        batches = json.loads(Path(plan).read_text())["batches"]
        trainer.batches.plan = batches
    base_rss = _rss_mb()
    flops, flops_tokens, non_pad = count_flops(trainer)
    times, tokens = [], []
    for i in range(updates):
        t = time.perf_counter()
        ntok = trainer.step().target_tokens
        times.append(time.perf_counter() - t)
        tokens.append(ntok)
    m_t, m_tok = sum(times[warmup:]), sum(tokens[warmup:])
    peak = matmul_gflops(threads)["gflops_best"] * 1e9  # same process, same threads, right after training
    return {
        "updates": updates,
        "warmup": warmup,
        "measured_s": m_t,
        "target_tokens": m_tok,
        "tokens_per_s": m_tok / m_t,
        "s_per_update": m_t / (updates - warmup),
        "flops_counted_batch": flops,
        "flops_per_target_token": flops / flops_tokens,
        "model_flops_per_s": flops / flops_tokens * m_tok / m_t,
        "matmul_flops_per_s_same_process": peak,
        "mfu": flops / flops_tokens * m_tok / m_t / peak,
        "non_padding_share": non_pad,
        "mfu_non_padding": flops / flops_tokens * m_tok / m_t / peak * non_pad,
        "peak_rss_mb": _rss_mb(),
        "rss_before_training_mb": base_rss,
        "parameters": trainer.model.num_parameters(),
    }


def worker_decode(cfg_json: str, threads: int, n_sent: int, beam: int, out_len: int) -> dict:
    """Sentences/s of greedy or beam search at a fixed output length (untrained weights never stop early)."""
    import torch

    from structseq.data.batching import collate
    from structseq.decode.search import beam_search, greedy

    trainer = _trainer([cfg_json], threads, str(WORK / "bench-run"))
    model = trainer.model.eval()
    ex = trainer.data.train[:n_sent]
    max_len = torch.full((len(ex),), out_len)
    base = _rss_mb()
    t = time.perf_counter()
    bs = 64
    for i in range(0, len(ex), bs):
        b = collate(ex[i : i + bs], range(len(ex[i : i + bs])), trainer.data.src_vocab, None)
        with torch.no_grad():
            # suppress </s> so every sentence decodes exactly out_len tokens: comparable work per setting
            hyp = (greedy if beam == 1 else beam_search)(
                NoEos(model), b, *(() if beam == 1 else (beam,)), max_len=max_len[: len(b.index)]
            )
    dt = time.perf_counter() - t
    return {
        "sentences": len(ex),
        "beam": beam,
        "output_tokens": out_len,
        "sentences_per_s": len(ex) / dt,
        "peak_rss_mb": _rss_mb(),
        "rss_before_mb": base,
        "example_len": len(hyp.tokens[0]),
    }


# --------------------------------------------------------------------------- driver


def run_worker(kind: str, *args, threads: int = 2) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    r = subprocess.run(
        [sys.executable, __file__, "--worker", kind, json.dumps(args), str(threads)],
        capture_output=True,
        text=True,
        env=env,
    )
    if r.returncode != 0:
        raise RuntimeError(f"worker {kind} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


LSTM = {"arch": "lstm", "embed_dim": 512, "hidden_dim": 512, "layers": 2, "dropout": 0.4}


def section_models(args) -> dict:
    out = {}
    t_cfg = json.dumps(bench_config("cogs", "dev", FAIRSEQ_TRANSFORMER, {**FAIRSEQ_OPTIM, "max_tokens": 4096}))
    l_cfg = json.dumps(
        bench_config(
            "cogs",
            "dev",
            LSTM,
            {
                "optimizer": "adam",
                "betas": [0.9, 0.998],
                "lr": 1.0,
                "schedule": "noam",
                "warmup": 4000,
                "clip_norm": 5.0,
                "max_tokens": None,
                "batch_size": 128,
            },
        )
    )
    for name, c in (("transformer_6+6_d512", t_cfg), ("lstm_2x512", l_cfg)):
        tr = run_worker("train", c, args.threads, args.updates, args.warmup, None, threads=args.threads)
        dec = {
            f"beam{k}": run_worker("decode", c, args.threads, args.decode_sentences, k, 30, threads=args.threads)
            for k in (1, 5)
        }
        out[name] = {"train": tr, "decode": dec}
        print(
            f"{name}: {tr['tokens_per_s']:.0f} target tok/s, MFU {tr['mfu']:.3f} "
            f"(over non-padding tokens {tr['mfu_non_padding']:.3f}), "
            f"greedy {dec['beam1']['sentences_per_s']:.1f} sent/s, beam5 {dec['beam5']['sentences_per_s']:.1f} sent/s",
            file=sys.stderr,
        )
    return out


def section_fairseq(args) -> dict:
    from structseq.testing import fairseq_baseline as fb

    fb.ensure_venv()
    plan_path = WORK / f"fairseq_batches_mt{args.max_tokens}_seed1.json"
    if not plan_path.exists():
        plan_path.write_text(json.dumps(fb.fairseq_batches(args.max_tokens, 1)))
    ours_cfg = json.dumps(fairseq_transformer_config(args.max_tokens))
    runs = {"fairseq": [], "structseq": []}
    for r in range(args.repeats):
        f = fb.run_fairseq(args.updates, args.max_tokens, 1, args.threads, warmup=args.warmup)
        runs["fairseq"].append({k: f[k] for k in f if k not in ("raw_log", "per_update", "raw_lines")})
        o = run_worker("train", ours_cfg, args.threads, args.updates, args.warmup, str(plan_path), threads=args.threads)
        runs["structseq"].append(o)
        print(
            f"round {r + 1}: fairseq {_tps(runs['fairseq'][-1]):.0f} tok/s, structseq {o['tokens_per_s']:.0f} tok/s",
            file=sys.stderr,
        )
    return {
        "updates": args.updates,
        "warmup_excluded": args.warmup,
        "max_tokens": args.max_tokens,
        "threads": args.threads,
        "data": "SCAN simple train, fairseq's own batches for both systems",
        **summarise_fairseq(runs),
        "runs": runs,
    }


def summarise_fairseq(runs: dict) -> dict:
    """Medians per system, and the median of per-round ratios: each round runs A then B back to back, so
    its ratio cancels the slow drift of this machine's speed better than a ratio of medians."""
    f = [_tps(x) for x in runs["fairseq"]]
    o = [x["tokens_per_s"] for x in runs["structseq"]]
    rounds = [b / a for a, b in zip(f, o)]
    return {
        "median_target_tokens_per_s": {"fairseq": statistics.median(f), "structseq": statistics.median(o)},
        "round_ratios_structseq_over_fairseq": rounds,
        "ratio_structseq_over_fairseq_median_of_rounds": statistics.median(rounds),
        "ratio_of_medians": statistics.median(o) / statistics.median(f),
    }


def _tps(fairseq_result: dict) -> float:
    for key in ("target_tokens_per_s", "tokens_per_s"):
        if key in fairseq_result:
            return float(fairseq_result[key])
    raise KeyError(f"no tokens/s in fairseq result: {sorted(fairseq_result)}")


def main(argv=None) -> None:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "--worker":
        kind, a = sys.argv[2], json.loads(sys.argv[3])
        fn = {"matmul": matmul_gflops, "train": worker_train, "decode": worker_decode}[kind]
        print(json.dumps(fn(*a)))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["models", "fairseq"], help="run one section (matmul always runs)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--updates", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=3500)
    p.add_argument("--decode-sentences", type=int, default=128)
    p.add_argument("-o", "--output", default=str(WORK / "bench_train.json"))
    args = p.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    args.matmul = run_worker("matmul", args.threads, threads=args.threads)
    result = {
        "machine": {"node": platform.node(), "cpus": os.cpu_count(), "load_avg_start": os.getloadavg()},
        "matmul_fp32": args.matmul,
    }
    if args.only in (None, "models"):
        result["models"] = section_models(args)
    if args.only in (None, "fairseq"):
        result["fairseq_comparison"] = section_fairseq(args)
    result["machine"]["load_avg_end"] = os.getloadavg()
    result["wall_s"] = time.time() - t0
    result["command"] = "python benchmarks/bench_train.py " + " ".join(sys.argv[1:])
    Path(args.output).write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
