"""The LSTM seq2seq (Akyürek & Andreas 2021) before and after the decoder-loop restructuring of issue 13.

    python benchmarks/bench_lstm.py --rounds 3 -o results/perf/bench_lstm.json

`reference` is `structseq.models.lstm_reference.LSTMSeq2SeqReference` (the per-step formulation: nn.LSTM called
on one position at a time, attention projection of h_t, combine at every step), `fast` is
`structseq.models.lstm.LSTMSeq2Seq`; they share parameters and state dict, so a worker builds the configured
Trainer and switches the model's class. Every measurement is a fresh subprocess with one thread (clean peak
memory); reference and fast alternate A B A B for `--rounds` rounds; medians and the median of the per-round
ratios fast / reference are reported, with the load average before and after.

- training: the shipped config's own batches (same seed, so the same batches for both), `--warmup` updates, then
  `--updates` timed updates: target tokens per second of wall time and of process CPU time (the latter is less
  disturbed when other jobs share the cores), peak RSS;
- decoding: the first `--decode-sentences` training sources, greedy and beam 5, batches of 64, </s>
  suppressed so every sentence decodes `--decode-len` tokens (same work for both, weights untrained).

`--impls fast fast-bf16` compares the restructured loop in fp32 with the same loop under CPU bfloat16 autocast
(what a `train.bf16` on CPU would do; not offered, see README); any config can be given, e.g. a Transformer's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [
    "configs/scan-jump/lstm-cpu.yaml",
    "configs/scan-jump/lstm-cpu-short.yaml",
    "configs/scan-around-right/lstm-cpu.yaml",
    "configs/cogs/lstm-cpu-short.yaml",
    "configs/cogs/lstm-cpu.yaml",
    "configs/tatoeba-en-zh/lstm-cpu-short.yaml",
    "configs/scan-jump/lstm.yaml",
]
IMPLS = ("reference", "fast", "fast-bf16")


def _trainer(config: str, out: str, overrides: list[str]):
    from structseq.config import load_config
    from structseq.train.loop import Trainer

    cfg = load_config(
        str(ROOT / config), ["train.threads=1", "train.valid_every=0", "train.log_every=1000000", *overrides]
    )
    return Trainer(cfg, out, show_progress=False)


def _use(model, impl: str):
    from structseq.testing.oracles.lstm_reference import LSTMSeq2SeqReference

    if impl == "reference":
        model.__class__ = LSTMSeq2SeqReference
    return model


def worker_train(impl: str, config: str, warmup: int, updates: int, overrides: list[str]) -> dict:
    import torch

    with tempfile.TemporaryDirectory() as out:
        t = _trainer(config, out, overrides)
        _use(t.model, impl)
        if impl == "fast-bf16":
            t.autocast = lambda: torch.autocast(device_type="cpu", dtype=torch.bfloat16)
        for _ in range(warmup):
            t.step()
        tokens, wall, cpu = 0, time.perf_counter(), time.process_time()
        for _ in range(updates):
            tokens += t.step().target_tokens
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "target_tokens": tokens,
        "tok_s": tokens / wall,
        "cpu_tok_s": tokens / cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def worker_decode(impl: str, config: str, sentences: int, out_len: int, beam: int) -> dict:
    import torch

    from structseq.decode.search import beam_search
    from structseq.testing.bench import NoEos  # </s> suppressed: every sentence decodes out_len tokens

    with tempfile.TemporaryDirectory() as out:
        t = _trainer(config, out, [])
        model = _use(t.model, impl).eval()
        examples = t.data.train[:sentences]
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(0, len(examples), 64):
            ex = examples[i : i + 64]
            b = t.task.batch(ex, t.data.vocabs)
            with torch.no_grad():
                beam_search(
                    NoEos(model), b, beam, torch.full((len(ex),), out_len), len_penalty=0.0 if beam == 1 else 1.0
                )
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "sent_s": len(examples) / wall,
        "cpu_sent_s": len(examples) / cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def run(kind: str, *args) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, __file__, "--worker", kind, json.dumps(args)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if r.returncode:
        raise RuntimeError(f"worker {kind} {args} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def compare(kind: str, rounds: int, *args, key: str, impls: tuple[str, str] = ("reference", "fast")) -> dict:
    """A B A B over `rounds`; ratios B / A (for the default pair, fast / reference)."""
    a, b = impls
    got = {impl: [] for impl in impls}
    for _ in range(rounds):
        for impl in impls:
            got[impl].append(run(kind, impl, *args))
    ratios = [f[key] / r[key] for r, f in zip(got[a], got[b])]
    cpu_key = "cpu_" + key
    cpu_ratios = [f[cpu_key] / r[cpu_key] for r, f in zip(got[a], got[b])]
    out = {
        "impls": list(impls),
        "rounds": got,
        "ratio_median": statistics.median(ratios),
        "ratios": ratios,
        "cpu_ratio_median": statistics.median(cpu_ratios),
        "cpu_ratios": cpu_ratios,
    }
    for impl in impls:
        out[f"{impl}_median"] = statistics.median(r[key] for r in got[impl])
        out[f"{impl}_peak_rss_mb"] = max(r["peak_rss_mb"] for r in got[impl])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", nargs="+", default=CONFIGS)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--updates", type=int, default=6)
    ap.add_argument("--big-updates", type=int, default=2, help="timed updates of the 2x512 config (512 sentences each)")
    ap.add_argument("--decode-config", default="configs/scan-jump/lstm-cpu.yaml")
    ap.add_argument("--decode-sentences", type=int, default=128)
    ap.add_argument("--decode-len", type=int, default=30)
    ap.add_argument("--skip-decode", action="store_true")
    ap.add_argument(
        "--impls",
        nargs=2,
        default=["reference", "fast"],
        choices=IMPLS,
        metavar="IMPL",
        help=f"the two implementations compared, A then B (ratio B / A; choices {', '.join(IMPLS)})",
    )
    ap.add_argument("-o", "--output", type=Path)
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, wargs = args.worker[0], json.loads(args.worker[1])
        import torch

        torch.set_num_threads(1)
        print(json.dumps({"train": worker_train, "decode": worker_decode}[kind](*wargs)))
        return
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    result = {
        "commit": commit,
        "threads": 1,
        "rounds": args.rounds,
        "warmup": args.warmup,
        "updates": args.updates,
        "load_before": os.getloadavg(),
        "cpu_count": os.cpu_count(),
        "train": {},
        "decode": {},
    }
    for config in args.configs:
        big = config.endswith("/lstm.yaml")
        updates = args.big_updates if big else args.updates
        r = compare(
            "train", args.rounds, config, 1 if big else args.warmup, updates, [], key="tok_s", impls=tuple(args.impls)
        )
        result["train"][config] = {"updates": updates, **r}
        a, b = args.impls
        print(
            f"train {config}: {a} {r[a + '_median']:.0f} tok/s, {b} {r[b + '_median']:.0f} tok/s, "
            f"{b}/{a} {r['ratio_median']:.2f} (CPU time {r['cpu_ratio_median']:.2f}), "
            f"rounds {[round(x, 2) for x in r['ratios']]}",
            flush=True,
        )
    if not args.skip_decode:
        for beam in (1, 5):
            r = compare(
                "decode",
                args.rounds,
                args.decode_config,
                args.decode_sentences,
                args.decode_len,
                beam,
                key="sent_s",
                impls=tuple(args.impls),
            )
            result["decode"][f"beam{beam}"] = {
                "config": args.decode_config,
                "sentences": args.decode_sentences,
                "output_tokens": args.decode_len,
                **r,
            }
            a, b = args.impls
            print(
                f"decode beam {beam}: {a} {r[a + '_median']:.1f} sent/s, {b} {r[b + '_median']:.1f} "
                f"sent/s, {b}/{a} {r['ratio_median']:.2f} (CPU time {r['cpu_ratio_median']:.2f})",
                flush=True,
            )
    result["load_after"] = os.getloadavg()
    result["time"] = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"load average before {result['load_before']}, after {result['load_after']}")
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
