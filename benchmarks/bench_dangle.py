"""R-Dangle efficiency: training cost vs re-encoding interval, training formulations, decoding speed.

    .venv/bin/python benchmarks/bench_dangle.py                      # everything (about 15 min on 2 cores)
    .venv/bin/python benchmarks/bench_dangle.py --updates 4 --intervals 1 4 0

All in one run, on the same COGS training batches (fixed sentences per batch, same seed, so every model
sees identical batches), each measurement in a fresh subprocess (clean peak RSS, fixed threads):
- `intervals`: R-Dangle_sep training s/update, target tokens/s and peak RSS for each interval o
  (0 = infinite: one encoding at the first step), beside the plain Transformer of the same size
  (the value encoder shares its top layers with the key encoder, so both have the same number of
  distinct encoder layers); also Dangle (rdangle-shr, o = 1).
- `formulations`: at equal model size and weights, our batched all-points training against (a) the
  per-step formulation of Dangle's authors (one full re-encode + decode per target position) and (b)
  the batch-copy formulation of R-Dangle's authors (every point re-runs everything on its own copy),
  see `structseq.models.dangle_reference`; the log-probabilities are checked equal first.
- `decode`: greedy and beam-5 sentences/s at a fixed output length.
Writes JSON (benchmarks/work/bench_dangle.json) and the plot benchmarks/dangle_interval_cost.png.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "work"

SIZES = {  # medium: the default; small: the shipped `*-cpu.yaml` configs (d 128, 2 heads, 2 decoder layers)
    "medium": {"d_model": 256, "n_heads": 4, "ffn_dim": 512, "decoder_layers": 3, "encoder_layers": 3},
    "small": {"d_model": 128, "n_heads": 2, "ffn_dim": 256, "decoder_layers": 2, "encoder_layers": 2},
}


def models(size: str) -> tuple[dict, dict, dict]:
    """Transformer, R-Dangle_sep and Dangle of one size: the value encoder shares its top layer with the key
    encoder, so R-Dangle_sep has as many distinct encoder layers as the Transformer."""
    d = {**SIZES[size], "dropout": 0.1, "positions": "relative", "max_relative": 16}
    n = d["encoder_layers"]
    transformer = {"arch": "transformer", **d}
    sep = {
        "arch": "rdangle-sep",
        **d,
        "encoder_layers": n - 1,
        "fusion_layers": 1,
        "post_fusion_layers": 1,
        "share_post_fusion": True,
    }
    shr = {
        "arch": "rdangle-shr",
        **{k: v for k, v in d.items() if k != "encoder_layers"},
        "fusion_layers": 1,
        "post_fusion_layers": n - 1,
    }  # R-Dangle_shr has no value encoder
    return transformer, sep, shr


TRANSFORMER, SEP, SHR = models("medium")


def config(model: dict, batch_size: int, seed: int = 1) -> str:
    return json.dumps(
        {
            "data": {"dataset": "cogs", "valid": "dev"},
            "model": model,
            "optim": {
                "lr": 5e-4,
                "schedule": "inverse_sqrt",
                "warmup": 4000,
                "max_tokens": None,
                "batch_size": batch_size,
                "label_smoothing": 0.1,
            },
            "train": {"seed": seed, "max_steps": 10**6, "valid_every": 0},
        }
    )


# --------------------------------------------------------------------------- workers (subprocess side)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _trainer(cfg_json: str, threads: int):
    import shutil

    import torch

    from structseq.config import config_from_dict
    from structseq.train.loop import Trainer

    torch.set_num_threads(threads)
    out = WORK / f"bench-dangle-run-{os.getpid()}"
    shutil.rmtree(out, ignore_errors=True)
    cfg = json.loads(cfg_json)
    cfg.setdefault("train", {})["threads"] = threads  # pinned: the Trainer's own count would read the machine
    return Trainer(config_from_dict(cfg), out, show_progress=False), out


def _use_formulation(model, formulation: str) -> None:
    from structseq.testing.oracles import dangle_reference as ref

    if formulation == "per_step":
        model.forward = lambda batch: ref.per_step_log_probs(model, batch["src"], batch["tgt_in"])
    elif formulation == "batch_copy":
        model.forward = lambda batch: ref.batch_copy_log_probs(model, batch["src"], batch["tgt_in"])
    elif formulation != "batched":
        raise ValueError(formulation)


def worker_train(cfg_json: str, threads: int, updates: int, warmup: int, formulation: str = "batched") -> dict:
    import shutil

    trainer, out = _trainer(cfg_json, threads)
    _use_formulation(trainer.model, formulation)
    flops = None
    if formulation == "batched":  # FLOPs of one forward+backward of the first timed batch (not applied)
        from structseq.testing.bench import count_flops

        flops = count_flops(trainer)[0]
    base = _rss_mb()
    times, tokens = [], []
    for _ in range(updates):
        t = time.perf_counter()
        ntok = trainer.step().target_tokens
        times.append(time.perf_counter() - t)
        tokens.append(ntok)
    shutil.rmtree(out, ignore_errors=True)
    m_t, m_tok = sum(times[warmup:]), sum(tokens[warmup:])
    out = {
        "formulation": formulation,
        "updates": updates,
        "warmup": warmup,
        "s_per_update": m_t / (updates - warmup),
        "target_tokens_per_s": m_tok / m_t,
        "peak_rss_mb": _rss_mb(),
        "rss_before_training_mb": base,
        "parameters": trainer.model.num_parameters(),
    }
    if flops is not None:
        from structseq.testing.bench import matmul_gflops

        # every batch has the same number of sentences; FLOPs per target token from the counted batch
        out.update(
            {
                "flops_first_batch": flops,
                "target_tokens_first_batch": tokens[0],
                "flops_per_target_token": flops / tokens[0],
                "flops_per_s": flops / tokens[0] * m_tok / m_t,
                "matmul_flops_per_s_same_process": matmul_gflops(threads)["gflops_best"] * 1e9,
            }
        )
        out["mfu"] = out["flops_per_s"] / out["matmul_flops_per_s_same_process"]
    return out


def worker_agree(cfg_json: str, threads: int) -> dict:
    """Max |log p| difference between our batched forward and both reference formulations (eval mode)."""
    import shutil

    import torch

    from structseq.testing.oracles import dangle_reference as ref

    trainer, out = _trainer(cfg_json, threads)
    model = trainer.model.eval()
    b = trainer.batches.next(trainer.progress, trainer.dist)
    real = b.tgt_out.ne(0)
    with torch.no_grad():
        ours = model(b)
        diffs = {
            name: float((ours - fn(model, b.src, b.tgt_in))[real].abs().max())
            for name, fn in (("per_step", ref.per_step_log_probs), ("batch_copy", ref.batch_copy_log_probs))
        }
    shutil.rmtree(out, ignore_errors=True)
    return {"max_abs_logprob_diff": diffs}


def worker_decode(cfg_json: str, threads: int, n_sent: int, beam: int, out_len: int) -> dict:
    import shutil

    import torch

    from structseq.data.batching import collate
    from structseq.decode.search import beam_search
    from structseq.testing.bench import NoEos  # </s> suppressed: every setting decodes exactly out_len tokens

    trainer, out = _trainer(cfg_json, threads)
    model = trainer.model.eval()

    ex = trainer.data.train[:n_sent]
    t = time.perf_counter()
    for i in range(0, len(ex), 32):
        part = ex[i : i + 32]
        b = collate(part, range(len(part)), trainer.data.src_vocab, None)
        with torch.no_grad():
            beam_search(NoEos(model), b, beam, torch.full((len(part),), out_len), len_penalty=0.0)
    dt = time.perf_counter() - t
    shutil.rmtree(out, ignore_errors=True)
    return {"sentences": len(ex), "beam": beam, "output_tokens": out_len, "sentences_per_s": len(ex) / dt}


# --------------------------------------------------------------------------- driver


def run_worker(kind: str, *args, threads: int) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    r = subprocess.run(
        [sys.executable, __file__, "--worker", kind, json.dumps(args)], capture_output=True, text=True, env=env
    )
    if r.returncode != 0:
        raise RuntimeError(f"worker {kind} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def section_intervals(args) -> dict:
    out = {
        "transformer": run_worker(
            "train", config(TRANSFORMER, args.batch_size), args.threads, args.updates, args.warmup, threads=args.threads
        )
    }
    log(f"transformer: {out['transformer']['s_per_update']:.2f} s/update")
    out["dangle (shr, o=1)"] = run_worker(
        "train",
        config({**SHR, "interval": 1}, args.batch_size),
        args.threads,
        args.updates,
        args.warmup,
        threads=args.threads,
    )
    for o in args.intervals:
        r = run_worker(
            "train",
            config({**SEP, "interval": o}, args.batch_size),
            args.threads,
            args.updates,
            args.warmup,
            threads=args.threads,
        )
        out[f"rdangle-sep o={o or 'inf'}"] = r
        log(f"rdangle-sep o={o or 'inf'}: {r['s_per_update']:.2f} s/update, peak RSS {r['peak_rss_mb']:.0f} MB")
    base = out["transformer"]["s_per_update"]
    t = out["transformer"]
    for r in out.values():
        r["cost_vs_transformer"] = r["s_per_update"] / base
        # time per token relative to the Transformer = (FLOPs per token ratio: the arithmetic) x (FLOP
        # throughput ratio: the overhead, 1 when the model computes as efficiently as the Transformer)
        r["flops_per_token_vs_transformer"] = r["flops_per_target_token"] / t["flops_per_target_token"]
        r["flop_throughput_vs_transformer"] = r["flops_per_s"] / t["flops_per_s"]
        log(
            f"  FLOPs/token x{r['flops_per_token_vs_transformer']:.1f}, "
            f"FLOP/s x{r['flop_throughput_vs_transformer']:.2f} of the Transformer's, MFU {r['mfu']:.2f}"
        )
    return out


def section_formulations(args) -> dict:
    out = {}
    for o in args.formulation_intervals:
        c = config({**SEP, "interval": o}, args.batch_size)
        res = {"agreement": run_worker("agree", c, args.threads, threads=args.threads)}
        for f in ("batched", "per_step", "batch_copy"):
            res[f] = run_worker("train", c, args.threads, args.formulation_updates, 1, f, threads=args.threads)
        for f in ("per_step", "batch_copy"):
            res[f"speedup_over_{f}"] = res[f]["s_per_update"] / res["batched"]["s_per_update"]
        out[f"o={o}"] = res
        log(
            f"o={o}: batched {res['batched']['s_per_update']:.2f} s, per-step x{res['speedup_over_per_step']:.2f}, "
            f"batch-copy x{res['speedup_over_batch_copy']:.2f}, agreement {res['agreement']['max_abs_logprob_diff']}"
        )
    return out


def section_decode(args) -> dict:
    out = {}
    models = {"transformer": TRANSFORMER, **{f"rdangle-sep o={o or 'inf'}": {**SEP, "interval": o} for o in (1, 4, 0)}}
    for name, m in models.items():
        out[name] = {
            f"beam{k}": run_worker(
                "decode", config(m, args.batch_size), args.threads, args.decode_sentences, k, 30, threads=args.threads
            )
            for k in (1, 5)
        }
        log(
            f"decode {name}: greedy {out[name]['beam1']['sentences_per_s']:.1f} sent/s, "
            f"beam5 {out[name]['beam5']['sentences_per_s']:.1f} sent/s"
        )
    return out


def plot(intervals: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [(k.split("o=")[1], v) for k, v in intervals.items() if k.startswith("rdangle-sep")]
    labels = [p for p, _ in pts]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.plot(labels, [v["s_per_update"] for _, v in pts], "o-", label="R-Dangle$_{sep}$ s/update")
    ax.axhline(intervals["transformer"]["s_per_update"], color="grey", ls="--", label="Transformer (same size)")
    ax.set_xlabel("re-encoding interval o")
    ax.set_ylabel("training time per update (s)")
    ax2 = ax.twinx()
    ax2.plot(labels, [v["peak_rss_mb"] for _, v in pts], "s:", color="tab:red", label="peak RSS (MB)")
    ax2.set_ylabel("peak RSS (MB)", color="tab:red")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=8, loc="upper right")
    ax.set_title("Training cost vs interval (COGS batches, CPU)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        kind, a = sys.argv[2], json.loads(sys.argv[3])
        print(json.dumps({"train": worker_train, "agree": worker_agree, "decode": worker_decode}[kind](*a)))
        return
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["intervals", "formulations", "decode"])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--size", choices=list(SIZES), default="medium", help="model size (same for every model)")
    p.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    p.add_argument("--updates", type=int, default=8)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--intervals", type=int, nargs="+", default=[1, 2, 4, 8, 16, 0], help="0 = infinite")
    p.add_argument("--formulation-intervals", type=int, nargs="+", default=[1, 4])
    p.add_argument("--formulation-updates", type=int, default=3)
    p.add_argument("--decode-sentences", type=int, default=64)
    p.add_argument("-o", "--output", default=str(WORK / "bench_dangle.json"))
    p.add_argument("--plot", default=str(HERE / "dangle_interval_cost.png"))
    args = p.parse_args()
    global TRANSFORMER, SEP, SHR
    TRANSFORMER, SEP, SHR = models(args.size)
    WORK.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    result = {
        "machine": {"node": platform.node(), "cpus": os.cpu_count(), "load_avg_start": os.getloadavg()},
        "models": {"transformer": TRANSFORMER, "rdangle-sep": SEP, "dangle": SHR},
        "size": args.size,
        "batch_size": args.batch_size,
        "threads": args.threads,
    }
    if args.only in (None, "intervals"):
        result["intervals"] = section_intervals(args)
        plot(result["intervals"], Path(args.plot))
    if args.only in (None, "formulations"):
        result["formulations"] = section_formulations(args)
    if args.only in (None, "decode"):
        result["decode"] = section_decode(args)
    result["machine"]["load_avg_end"] = os.getloadavg()
    result["wall_s"] = time.time() - t0
    result["command"] = "python benchmarks/bench_dangle.py " + " ".join(sys.argv[1:])
    Path(args.output).write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
