"""Decoding speed against fairseq, side by side (issue 13, part 3): `fairseq-generate` vs structseq.

    .venv/bin/python benchmarks/bench_decode_fairseq.py --updates 100 --sentences 1024 --rounds 3 \
        -o results/perf/bench_decode_fairseq.json

1. Both toolkits train fairseq's `transformer_iwslt_de_en` (6+6 layers, d 512, 4 heads, FFN 1024, post-norm,
   sinusoidal positions, dropout 0.3, label smoothing 0.1, Adam (0.9, 0.98), inverse-sqrt schedule) on SCAN simple
   (train split) for `--updates` updates of `--max-tokens` padded tokens, each in its own toolkit, with one short
   warm-up (`--lr`, `--warmup`) so that a few hundred updates give a model whose outputs have realistic lengths.
   Both trainings are cached under benchmarks/work/decode/ (delete it to retrain).
2. The first `--sentences` source sentences of SCAN simple's test split are decoded by each toolkit, greedy and
   beam 5, maximum output length 60 (fairseq `--max-len-a 0 --max-len-b 60`, structseq `decode.max_len_a=0
   decode.max_len_b=60`), length penalty 1 in both, 2 threads, in two batch settings: each toolkit's default
   (fairseq-generate: 12,000 tokens; structseq: 128 sentences) and matched (128 sentences in both).
3. Rounds alternate A B A B; each measurement is a fresh process. Reported: sentences/s by each toolkit's own
   timer around generation only (fairseq's `Translated ... sentences/s` line, which excludes loading and
   printing; ours times `Run.decode_examples`, which also collates and detokenises), the process wall time and
   CPU seconds (user + system, all threads) with start-up (on a loaded machine the CPU seconds move much less
   than the wall clock), each toolkit's mean output length and exact match (so that the work compared is comparable), medians
   and the median of per-round ratios, and the load average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from structseq.testing import fairseq_baseline as fb

HERE = Path(__file__).resolve().parent

ROOT = HERE.parent
WORK = HERE / "work" / "decode"
TEST_SPLIT = "scan/simple_split/tasks_test_simple.txt"
MAX_LEN = 60
TRANSLATED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s \(([\d.]+) sentences/s")

OURS_WORKER = r"""
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[5]))
t0 = time.perf_counter()
from structseq import api
from structseq.data.example import Example
run = api.load_run(sys.argv[1], device="cpu")
d = run.task.cfg.decode
d.max_len_a, d.max_len_b, d.batch_size, d.len_penalty = 0.0, int(sys.argv[4]), int(sys.argv[3]), 1.0
sources = [l.rstrip("\n") for l in open(sys.argv[2], encoding="utf-8")]
examples = [Example.from_text(s) for s in sources]
t, c = time.perf_counter(), time.process_time()
hyps = run.decode_examples(examples, beam=int(sys.argv[6]))
dt, cpu = time.perf_counter() - t, time.process_time() - c
print(json.dumps({"gen_s": dt, "gen_cpu_s": cpu, "sentences": len(hyps), "startup_s": t - t0,
                  "hypotheses": [" ".join(h) for h in hyps]}))
"""


def log(msg: str) -> None:
    print(f"[bench_decode_fairseq] {msg}", file=sys.stderr, flush=True)


def _child_cpu() -> float:
    """CPU seconds (user + system) of the waited-for child processes so far: a child's is the difference."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _env(threads: int) -> dict:
    return dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))


# --------------------------------------------------------------------------- preparation (cached)


def prepare_test(n: int, threads: int) -> tuple[Path, Path, list[str]]:
    """The train data-bin (fairseq_baseline), a test data-bin with the train dictionaries, the raw references."""
    train_bin = fb.prepare_data(fb.DEFAULT_SPLIT, threads)
    pairs = fb.read_scan(fb.data_root() / TEST_SPLIT)[:n]
    raw = WORK / f"raw-test{n}"
    test_bin = WORK / f"data-bin-test{n}"
    raw.mkdir(parents=True, exist_ok=True)
    for lang, col in ((fb.SRC_LANG, 0), (fb.TGT_LANG, 1)):
        (raw / f"test.{lang}").write_text("".join(p[col] + "\n" for p in pairs), encoding="utf-8")
    if not (test_bin / f"test.{fb.SRC_LANG}-{fb.TGT_LANG}.{fb.SRC_LANG}.bin").exists():
        subprocess.run(
            [
                str(fb.VENV_BIN / "fairseq-preprocess"),
                "--source-lang",
                fb.SRC_LANG,
                "--target-lang",
                fb.TGT_LANG,
                "--testpref",
                str(raw / "test"),
                "--srcdict",
                str(train_bin / f"dict.{fb.SRC_LANG}.txt"),
                "--tgtdict",
                str(train_bin / f"dict.{fb.TGT_LANG}.txt"),
                "--destdir",
                str(test_bin),
                "--workers",
                "1",
            ],
            check=True,
            env=fb.fairseq_env(threads),
            stdout=subprocess.DEVNULL,
        )
    return train_bin, test_bin, [p[1] for p in pairs]


def train_fairseq(train_bin: Path, args) -> Path:
    ckpt_dir = WORK / f"fairseq-u{args.updates}"
    ckpt = ckpt_dir / "checkpoint_last.pt"
    if ckpt.exists():
        return ckpt
    log(f"fairseq-train {args.updates} updates -> {ckpt_dir}")
    cmd = fb.train_command(train_bin, args.updates, args.max_tokens, args.seed)
    drop = {"--no-save", "--log-interval"}
    out, skip = [], False
    for a in cmd:  # the benchmark recipe, but saving a checkpoint and with the short warm-up
        if skip:
            skip = False
            continue
        if a in drop:
            skip = a == "--log-interval"
            continue
        out.append(a)
    out[out.index("--lr") + 1] = str(args.lr)
    out[out.index("--warmup-updates") + 1] = str(args.warmup)
    out += ["--log-interval", "50", "--save-dir", str(ckpt_dir), "--no-epoch-checkpoints"]
    subprocess.run(out, check=True, env=fb.fairseq_env(args.threads), cwd=str(WORK), stdout=subprocess.DEVNULL)
    if not ckpt.exists():
        raise RuntimeError(f"fairseq-train wrote no {ckpt}")
    return ckpt


def train_ours(args) -> Path:
    run_dir = WORK / f"structseq-u{args.updates}"
    if (run_dir / "checkpoints" / "last.pt").exists():
        return run_dir
    log(f"structseq train {args.updates} updates -> {run_dir}")
    from structseq.testing.bench import fairseq_transformer_config

    cfg = fairseq_transformer_config(args.max_tokens)
    cfg["optim"].update(lr=args.lr, warmup=args.warmup)
    cfg["train"] = {
        "seed": args.seed,
        "max_steps": args.updates,
        "valid_every": 0,
        "threads": args.threads,
        "log_every": 50,
    }
    cfg_path = WORK / "structseq.json"
    cfg_path.write_text(json.dumps(cfg))
    subprocess.run(
        [sys.executable, "-m", "structseq", "train", str(cfg_path), "--out", str(run_dir)],
        check=True,
        env=_env(args.threads),
        stdout=subprocess.DEVNULL,
    )
    return run_dir


# --------------------------------------------------------------------------- measurements


def run_fairseq_generate(ckpt: Path, test_bin: Path, beam: int, batch: int | None, threads: int) -> dict:
    cmd = [
        str(fb.VENV_BIN / "fairseq-generate"),
        str(test_bin),
        "--path",
        str(ckpt),
        "--gen-subset",
        "test",
        "--source-lang",
        fb.SRC_LANG,
        "--target-lang",
        fb.TGT_LANG,
        "--cpu",
        "--beam",
        str(beam),
        "--nbest",
        "1",
        "--max-len-a",
        "0",
        "--max-len-b",
        str(MAX_LEN),
        "--lenpen",
        "1",
    ]
    cmd += ["--batch-size", str(batch)] if batch else []  # default: --max-tokens 12000 (fairseq-generate's own)
    t, c = time.perf_counter(), _child_cpu()
    r = subprocess.run(cmd, capture_output=True, text=True, env=fb.fairseq_env(threads), cwd=str(WORK))
    wall, cpu = time.perf_counter() - t, _child_cpu() - c
    if r.returncode != 0:
        raise RuntimeError(f"fairseq-generate failed:\n{r.stderr[-3000:]}")
    m = TRANSLATED.search(r.stdout + r.stderr)
    if not m:
        raise RuntimeError(f"no 'Translated ...' line in fairseq-generate's output:\n{r.stderr[-2000:]}")
    hyps: dict[int, str] = {}
    for line in r.stdout.splitlines():
        if line.startswith("H-"):
            idx, _score, text = line.split("\t", 2)
            hyps[int(idx[2:])] = text
    return {
        "gen_s": float(m.group(3)),
        "sentences_per_s": float(m.group(4)),
        "wall_s": wall,
        "process_cpu_s": cpu,
        "hypotheses": [hyps[i] for i in sorted(hyps)],
    }


def run_ours(run_dir: Path, sources: Path, beam: int, batch: int, threads: int) -> dict:
    t, c = time.perf_counter(), _child_cpu()
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            OURS_WORKER,
            str(run_dir),
            str(sources),
            str(batch),
            str(MAX_LEN),
            str(threads),
            str(beam),
        ],
        capture_output=True,
        text=True,
        env=_env(threads),
    )
    wall, cpu = time.perf_counter() - t, _child_cpu() - c
    if r.returncode != 0:
        raise RuntimeError(f"structseq worker failed:\n{r.stderr[-3000:]}")
    out = json.loads(r.stdout.strip().splitlines()[-1])
    return {**out, "sentences_per_s": out["sentences"] / out["gen_s"], "wall_s": wall, "process_cpu_s": cpu}


def quality(hyps: list[str], refs: list[str]) -> dict:
    return {
        "exact_match": sum(h == r for h, r in zip(hyps, refs)) / len(refs),
        "mean_output_tokens": statistics.mean(len(h.split()) for h in hyps),
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--updates", type=int, default=100, help="training updates of both models")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=50, help="linear warm-up updates (inverse-sqrt schedule after)")
    p.add_argument("--max-tokens", type=int, default=3500)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--sentences", type=int, default=1024, help="test sentences decoded per measurement")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    p.add_argument("--settings", nargs="+", default=["default", "matched"], choices=["default", "matched"])
    p.add_argument(
        "--train-only",
        choices=["both", "fairseq", "structseq"],
        help="prepare and train (both or one of) the models, measure nothing",
    )
    p.add_argument("-o", "--output", default=str(HERE / "work" / "bench_decode_fairseq.json"))
    args = p.parse_args(argv)

    WORK.mkdir(parents=True, exist_ok=True)
    train_bin, test_bin, refs = prepare_test(args.sentences, args.threads)
    if args.train_only:
        if args.train_only in ("both", "fairseq"):
            train_fairseq(train_bin, args)
        if args.train_only in ("both", "structseq"):
            train_ours(args)
        return
    ckpt, run_dir = train_fairseq(train_bin, args), train_ours(args)
    sources = WORK / f"raw-test{args.sentences}" / f"test.{fb.SRC_LANG}"
    load_before = os.getloadavg()
    rows = []
    for setting in args.settings:
        for beam in args.beams:
            f_batch, o_batch = (None, 128) if setting == "default" else (128, 128)
            f_runs, o_runs = [], []
            for r in range(args.rounds):
                f_runs.append(run_fairseq_generate(ckpt, test_bin, beam, f_batch, args.threads))
                o_runs.append(run_ours(run_dir, sources, beam, o_batch, args.threads))
                log(
                    f"{setting} beam {beam} round {r + 1}: fairseq {f_runs[-1]['sentences_per_s']:.1f} sent/s, "
                    f"structseq {o_runs[-1]['sentences_per_s']:.1f} sent/s"
                )
            ratios = [o["sentences_per_s"] / f["sentences_per_s"] for f, o in zip(f_runs, o_runs)]
            wall_ratios = [f["wall_s"] / o["wall_s"] for f, o in zip(f_runs, o_runs)]
            cpu_ratios = [f["process_cpu_s"] / o["process_cpu_s"] for f, o in zip(f_runs, o_runs)]
            rows.append(
                {
                    "setting": setting,
                    "beam": beam,
                    "batch": {"fairseq": f_batch or "max_tokens 12000", "structseq": o_batch},
                    "sentences_per_s": {
                        "fairseq": statistics.median(x["sentences_per_s"] for x in f_runs),
                        "structseq": statistics.median(x["sentences_per_s"] for x in o_runs),
                    },
                    "round_ratios": ratios,
                    "ratio_median_of_rounds": statistics.median(ratios),
                    "process_wall_s": {
                        "fairseq": statistics.median(x["wall_s"] for x in f_runs),
                        "structseq": statistics.median(x["wall_s"] for x in o_runs),
                    },
                    "process_wall_ratio_median": statistics.median(wall_ratios),
                    "process_cpu_s": {
                        "fairseq": statistics.median(x["process_cpu_s"] for x in f_runs),
                        "structseq": statistics.median(x["process_cpu_s"] for x in o_runs),
                    },
                    "process_cpu_ratio_median": statistics.median(cpu_ratios),
                    "structseq_generation_cpu_s": statistics.median(x["gen_cpu_s"] for x in o_runs),
                    "quality": {
                        "fairseq": quality(f_runs[0]["hypotheses"], refs),
                        "structseq": quality(o_runs[0]["hypotheses"], refs),
                    },
                }
            )
            log(f"{setting} beam {beam}: structseq / fairseq {rows[-1]['ratio_median_of_rounds']:.2f}x")
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    result = {
        "commit": commit.stdout.strip(),
        "updates": args.updates,
        "sentences": args.sentences,
        "max_len": MAX_LEN,
        "threads": args.threads,
        "rounds": args.rounds,
        "data": f"SCAN simple: train {fb.DEFAULT_SPLIT}, test {TEST_SPLIT}",
        "rows": rows,
        "loadavg_before": load_before,
        "loadavg_after": os.getloadavg(),
    }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=1))
    log(f"wrote {args.output}")


if __name__ == "__main__":
    main()
