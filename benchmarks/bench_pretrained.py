"""R-Dangle on a pretrained backbone: training cost against the plain backbone, peak memory, decoding speed.

    .venv/bin/python benchmarks/bench_pretrained.py                     # small random BART, COGS batches
    .venv/bin/python benchmarks/bench_pretrained.py --cpu-smoke         # seconds: tiny model, short batches

One random BART (no download: built with transformers and saved to a temporary folder), fine-tuned as the plain
backbone (`arch: hf-seq2seq`) and as R-Dangle_shr on it (`arch: rdangle-pretrained`) at intervals 1, 2, 4, 8
and inf (0: one encoding, at the first step), on the same training batches: COGS training sentences (a
word-level tokenizer over COGS's words, so pieces are words) when the data is present, else synthetic
sentences of COGS's lengths (source 2-22 words, mean 7.5; target about 5.8 x the source, mean 44). Each variant
is measured in a fresh subprocess (clean peak RSS; `--cpu-smoke`: in this process, RSS not isolated):
- training: seconds per update (forward, backward, Adam step; median after warm-up), target tokens/s;
- peak RSS of the process after training;
- decoding: greedy sentences/s over the first `--decode-sentences` sentences;
and the ratios to the plain backbone, measured in the same run. Writes JSON (benchmarks/work/bench_pretrained.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from structseq.testing.bench import NoEos

HERE = Path(__file__).resolve().parent
WORK = HERE / "work"

SIZES = {  # small: BART-base's shape (6 + 6 layers, FFN 4d) at width 256; tiny: the smoke test's
    "small": {
        "d_model": 256,
        "layers": 6,
        "encoder_attention_heads": 4,
        "decoder_attention_heads": 4,
        "encoder_ffn_dim": 1024,
        "decoder_ffn_dim": 1024,
        "fusion_layers": 2,
    },
    "tiny": {
        "d_model": 32,
        "layers": 2,
        "encoder_attention_heads": 2,
        "decoder_attention_heads": 2,
        "encoder_ffn_dim": 64,
        "decoder_ffn_dim": 64,
        "fusion_layers": 1,
    },
}


# ---------------------------------------------------------------- data and the base checkpoint


def sentences(n: int, smoke: bool, data_root=None) -> tuple[list[tuple[str, str]], str]:
    """n (source, target) pairs and where they come from: COGS training sentences when available (not in smoke
    mode), else synthetic sentences of COGS's lengths over a 50-word vocabulary (smoke: at most 6 source words)."""
    rng = random.Random(1)
    if not smoke:
        try:
            from structseq.data.registry import load_dataset

            train = load_dataset("cogs", "train", data_root)
            return [(e.source_text, e.target_text) for e in rng.sample(train, n)], "cogs-train"
        except Exception as e:  # no data here: synthetic lengths
            print(f"COGS not available ({type(e).__name__}); synthetic sentences of COGS's lengths", file=sys.stderr)
    words = [f"w{i}" for i in range(50)]
    out = []
    for _ in range(n):
        s = rng.randint(2, 6 if smoke else 22)
        t = max(1, round(s * (2.0 if smoke else 5.8) + rng.gauss(0, 2)))
        out.append((" ".join(rng.choices(words, k=s)), " ".join(rng.choices(words, k=t))))
    return out, "synthetic"


def make_base(folder: Path, pairs, size: str) -> Path:
    from structseq.testing.hf_tiny import tiny_bart

    words = sorted({w for s, t in pairs for w in (*s.split(), *t.split())})
    shape = {k: v for k, v in SIZES[size].items() if k not in ("d_model", "layers", "fusion_layers")}
    return tiny_bart(
        folder,
        words,
        d_model=SIZES[size]["d_model"],
        layers=SIZES[size]["layers"],
        dropout=0.1,
        seed=1,
        max_position_embeddings=1024,
        **shape,
    )


def model_config(base: Path, size: str, interval: int | None) -> dict:
    """The plain backbone (interval None) or R-Dangle on it at `interval`."""
    if interval is None:
        return {"arch": "hf-seq2seq", "pretrained": str(base)}
    k1 = SIZES[size]["fusion_layers"]
    return {
        "arch": "rdangle-pretrained",
        "pretrained": str(base),
        "interval": interval,
        "fusion_layers": k1,
        "post_fusion_layers": SIZES[size]["layers"] - k1,
    }


# ---------------------------------------------------------------- one measurement (a worker)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class FixedLength(NoEos):
    """The model with its </s> winning only where search forces it at the length limit (`NoEos`), so that every
    variant decodes the same number of steps (a random backbone would otherwise stop at different, arbitrary
    lengths); what else the decoding loop reads (parameters, search_interface, sentence_state, output_limit) is
    the model's, forwarded by name: a catch-all `__getattr__` recursed without end where `model` was not set yet
    (copy, pickle) and hid a misspelt name behind the model's."""

    autoregressive = True

    def parameters(self):
        return self.model.parameters()

    @property
    def search_interface(self) -> str | None:
        return self.model.search_interface

    @property
    def sentence_state(self) -> frozenset[str]:
        from structseq.models.base import sentence_state

        return sentence_state(self.model)

    def output_limit(self, inputs):
        from structseq.models.base import output_limit

        return output_limit(self.model, inputs)


def _train(task, model, batches, spec: dict, device) -> list[tuple[float, int]]:
    """(seconds, target tokens) of each timed update (after `warmup` untimed ones)."""
    import contextlib

    import torch

    opt = torch.optim.Adam(model.parameters(), lr=1e-5)
    bf16 = torch.autocast("cuda", dtype=torch.bfloat16) if spec["bf16"] else contextlib.nullcontext()
    times = []
    for u in range(spec["warmup"] + spec["updates"]):
        batch = task.to_device(batches[u % len(batches)], device)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with bf16:
            loss, _, n = task.loss(model, batch, 0.1)
        (loss / n).backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if u >= spec["warmup"]:
            times.append((time.perf_counter() - start, batch.num_tokens))
    return times


def measure(spec: dict) -> dict:
    """Train `spec["updates"]` updates on fixed batches, then decode greedily to a fixed length; timings and peak
    memory (the process's RSS; on a GPU also the device's peak allocation)."""
    import torch

    from structseq.config import config_from_dict
    from structseq.data.example import Example
    from structseq.models import build_model
    from structseq.tasks import get_task

    torch.set_num_threads(spec["threads"])
    torch.manual_seed(1)
    device = torch.device(spec["device"])
    cfg = config_from_dict(
        {
            "task": "hf-seq2seq",
            "model": spec["model"],
            "decode": {"max_len_a": 0.0, "max_len_b": spec["decode_len"], "batch_size": 32},
        }
    )
    task = get_task(cfg)
    examples = [Example.from_text(s, t) for s, t in spec["pairs"]]
    vocabs = task.build_vocabs(examples)
    model = build_model(cfg.model, vocabs, task="hf-seq2seq").to(device).train()
    B = spec["batch"]
    batches = [task.batch(examples[i : i + B], vocabs) for i in range(0, len(examples) - B + 1, B)]
    times = _train(task, model, batches, spec, device)
    model.eval()
    decode = examples[: spec["decode_sentences"]]
    start = time.perf_counter()
    task.predict(FixedLength(model, task.ids.eos), decode, vocabs, beam=1)
    decode_s = time.perf_counter() - start
    out = {
        "s_per_update": statistics.median(t for t, _ in times),
        "target_tokens_per_s": sum(n for _, n in times) / sum(t for t, _ in times),
        "peak_rss_mb": _rss_mb(),
        "decode_sentences_per_s": len(decode) / decode_s,
        "parameters": sum(p.numel() for p in model.parameters()),
    }
    if device.type == "cuda":
        out["peak_gpu_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return out


def run_measure(spec: dict, isolated: bool) -> dict:
    if not isolated:
        return measure(spec)
    r = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(spec)],
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": str(spec["threads"])},
    )
    if r.returncode:
        raise RuntimeError(f"worker failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- the run


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpu-smoke", action="store_true", help="tiny model, short synthetic batches, in-process: seconds")
    p.add_argument("--size", choices=sorted(SIZES), default=None, help="backbone size (default small; smoke: tiny)")
    p.add_argument("--intervals", type=int, nargs="+", default=[1, 2, 4, 8, 0], help="0 = inf (one encoding)")
    p.add_argument("--updates", type=int, default=None, help="timed updates per variant (default 5; smoke: 2)")
    p.add_argument("--batch", type=int, default=None, help="sentences per batch (default 32; smoke: 4)")
    p.add_argument("--decode-sentences", type=int, default=None, help="sentences decoded (default 64; smoke: 4)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu | cuda (record the device with the numbers)")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast in training (GPUs)")
    p.add_argument(
        "--decode-length",
        type=int,
        default=None,
        help="output pieces every sentence decodes (default: the sentences' mean target length)",
    )
    p.add_argument("--data-root", default=None)
    p.add_argument("--out", type=Path, default=WORK / "bench_pretrained.json")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        print(json.dumps(measure(json.loads(a.worker))))
        return {}
    smoke = a.cpu_smoke
    size = a.size or ("tiny" if smoke else "small")
    updates, batch = a.updates or (2 if smoke else 5), a.batch or (4 if smoke else 32)
    n_dec = a.decode_sentences or (4 if smoke else 64)
    pairs, data = sentences(max(batch * (updates + 1), n_dec), smoke, a.data_root)
    # every sentence decodes the same length: BART's <s>, then the mean target (pieces are words here)
    decode_len = a.decode_length or round(statistics.mean(len(t.split()) for _, t in pairs)) + 1
    loadavg = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = make_base(Path(tmp) / "base", pairs, size)
        for interval in [None, *a.intervals]:
            spec = {
                "model": model_config(base, size, interval),
                "pairs": pairs,
                "batch": batch,
                "updates": updates,
                "warmup": 1,
                "threads": a.threads,
                "decode_sentences": n_dec,
                "decode_len": decode_len,
                "device": a.device,
                "bf16": a.bf16,
            }
            r = run_measure(spec, isolated=not smoke)
            rows.append(
                {
                    "variant": "backbone" if interval is None else "rdangle",
                    "interval": None if interval is None else (interval or "inf"),
                    **r,
                }
            )
            print(
                f"{rows[-1]['variant']:9} interval {rows[-1]['interval']!s:>4}: {r['s_per_update']:.3f} s/update, "
                f"{r['peak_rss_mb']:.0f} MB, {r['decode_sentences_per_s']:.1f} sent/s",
                file=sys.stderr,
            )
    plain = rows[0]
    for r in rows:
        r["train_time_vs_backbone"] = r["s_per_update"] / plain["s_per_update"]
        r["decode_speed_vs_backbone"] = r["decode_sentences_per_s"] / plain["decode_sentences_per_s"]
    report = {
        "rows": rows,
        "settings": {
            "size": size,
            **SIZES[size],
            "batch": batch,
            "updates": updates,
            "decode_sentences": n_dec,
            "decode_length": decode_len,
            "threads": a.threads,
            "device": a.device,
            "bf16": a.bf16,
            "smoke": smoke,
            "isolated_rss": not smoke,
            "data": data,
            "mean_target_words": statistics.mean(len(t.split()) for _, t in pairs),
        },
        "machine": {"platform": platform.platform(), "processor": platform.processor(), "cpus": os.cpu_count()},
        "loadavg_before": list(loadavg),
    }
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(report, indent=1) + "\n")
    return report


if __name__ == "__main__":
    main()
