"""Lexicon learners: time and peak memory on COGS and Tatoeba en-zh, and our IBM EM against C++ aligners.

    python benchmarks/bench_lexicon.py --setup          # once: venv with systran-align + eflomal
    python benchmarks/bench_lexicon.py [--part learners|compare|all] [--repeats 3] [-o FILE]

Part "learners": every learner on COGS train (24,155 pairs) and tatoeba-en-zh train (19,222 pairs), each
run in a fresh subprocess; `peak_mb` is the rise of the process' peak RSS (VmHWM) over its RSS after the
data is loaded, `seconds` the best of `--repeats` runs.

Part "compare": 15,000 SCAN around_right training pairs, both directions, 5 iterations, in one run:
ours (`align` forward + reverse + intersection, numpy, one thread) against `systran-align` (fast_align's
code: training, then its Aligner over the corpus) and `eflomal` (Gibbs-sampled IBM1, 1 sampler, links in
both directions + our intersection). The C++ tools live in a separate venv under benchmarks/work/
(never a package dependency) and run with OMP_NUM_THREADS=1 unless `--threads` says otherwise.
Link agreement with the C++ tools is reported as a sanity figure, not a test: systran-align's
probability files keep no alignment settings and its Aligner symmetrises with its own heuristic
(between intersection and union); after Model 1 training its links look diagonal-biased, unlike
fast_align's own Model 1 Viterbi output, which is what ours reproduces (tests/lexicon/test_ibm.py checks
it against a loop transcription of fast_align's training).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORK = HERE / "work"
VENV = WORK / "align-venv"
VENV_PY = VENV / "bin" / "python"
ALIGNER_PACKAGES = ("systran-align==3.5.0", "eflomal==2.0.0")
DATASETS = ("cogs", "tatoeba-en-zh")
SCAN_FILE = "scan/template_split/tasks_train_template_around_right.txt"
SCAN_PAIRS = 15000
ITERATIONS = 5


def _status_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def child(method: str, dataset: str) -> None:
    """Run one learner once in this (fresh) process and print a JSON line."""
    from structseq.data.registry import load_dataset
    from structseq.registry import LEARNERS

    examples = load_dataset(dataset, split="train")
    base = _status_kb("VmRSS")
    start = time.perf_counter()
    lexicon = LEARNERS[method](examples)
    seconds = time.perf_counter() - start
    print(
        json.dumps(
            {
                "seconds": seconds,
                "peak_mb": (_status_kb("VmHWM") - base) / 1024,
                "rss_peak_mb": _status_kb("VmHWM") / 1024,
                "pairs": len(examples),
                "entries": lexicon.num_entries,
                "sources": len(lexicon),
            }
        )
    )


def run_learners(repeats: int) -> list[dict]:
    from structseq.registry import LEARNERS

    rows = []
    for dataset in DATASETS:
        for method in LEARNERS:
            runs = []
            for _ in range(repeats):
                out = subprocess.run(
                    [sys.executable, __file__, "--child", method, dataset], check=True, capture_output=True, text=True
                )
                runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
            best = min(runs, key=lambda r: r["seconds"])
            row = {
                "dataset": dataset,
                "method": method,
                **best,
                "seconds_all": [round(r["seconds"], 3) for r in runs],
                "peak_mb": max(r["peak_mb"] for r in runs),
            }
            print(
                f"{dataset:14s} {method:9s} {row['seconds']:7.2f}s  +{row['peak_mb']:7.1f} MB  "
                f"{row['entries']} entries",
                file=sys.stderr,
            )
            rows.append(row)
    return rows


# Runs inside the aligner venv: reads a job from argv[1], prints timings and links as JSON.
ALIGNER_SCRIPT = r"""
import json, sys, time
job = json.load(open(sys.argv[1]))
out = {}
if job["tool"] == "systran-align":
    import systran_align
    t0 = time.perf_counter()
    systran_align.generate_alignment_probabilities(job["joint"], job["fwd"], job["rev"],
        iterations=job["iterations"], favor_diagonal=job["diagonal"], optimize_tension=job["diagonal"])
    t1 = time.perf_counter()
    aligner = systran_align.Aligner(job["fwd"], job["rev"])
    src = [l.split() for l in open(job["src"], encoding="utf-8").read().splitlines()]
    tgt = [l.split() for l in open(job["tgt"], encoding="utf-8").read().splitlines()]
    res = aligner.align_batch(src, tgt)
    t2 = time.perf_counter()
    out = {"train_seconds": t1 - t0, "align_seconds": t2 - t1, "links": [r["alignments"] for r in res]}
else:
    import eflomal
    t0 = time.perf_counter()
    aligner = eflomal.Aligner(model=1, n_iterations=(job["iterations"], 0, 0), n_samplers=1)
    with open(job["src"], encoding="utf-8") as s, open(job["tgt"], encoding="utf-8") as t:
        aligner.align(s, t, links_filename_fwd=job["fwd"], links_filename_rev=job["rev"], quiet=True)
    t1 = time.perf_counter()
    read = lambda p: [[tuple(map(int, a.split("-"))) for a in l.split()] for l in open(p).read().splitlines()]
    out = {"train_seconds": t1 - t0, "align_seconds": 0.0, "fwd": read(job["fwd"]), "rev": read(job["rev"])}
print(json.dumps(out))
"""


def setup() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    if not VENV_PY.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run([str(VENV_PY), "-m", "pip", "install", "-q", *ALIGNER_PACKAGES], check=True)
    print(f"aligners installed in {VENV}", file=sys.stderr)


def _keys(corpus, links_per_pair) -> object:
    import numpy as np

    num_tgt = len(corpus.tgt_ids)
    keys = [
        (corpus.src_off[k] + i) * num_tgt + corpus.tgt_off[k] + j
        for k, links in enumerate(links_per_pair)
        for i, j in links
    ]
    return np.unique(np.asarray(keys, dtype=np.int64))


def run_compare(repeats: int, threads: int) -> dict:
    import numpy as np

    from structseq.lexicon.corpus import Corpus
    from structseq.lexicon.ibm import align, symmetrise
    from structseq.paths import data_root

    lines = (data_root() / SCAN_FILE).read_text(encoding="utf-8").splitlines()[:SCAN_PAIRS]
    pairs = [tuple(line[len("IN: ") :].split(" OUT: ")) for line in lines]
    result: dict = {"pairs": len(pairs), "iterations": ITERATIONS, "threads_cpp": threads, "models": {}}
    if not VENV_PY.exists():
        result["skipped"] = f"no aligner venv at {VENV}; run with --setup"
    WORK.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        tmp = Path(tmp)
        (tmp / "joint.txt").write_text("".join(f"{s} ||| {t}\n" for s, t in pairs), encoding="utf-8")
        (tmp / "src.txt").write_text("".join(f"{s}\n" for s, _ in pairs), encoding="utf-8")
        (tmp / "tgt.txt").write_text("".join(f"{t}\n" for _, t in pairs), encoding="utf-8")
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}

        def tool(name: str, diagonal: bool) -> dict:
            job = {
                "tool": name,
                "joint": str(tmp / "joint.txt"),
                "src": str(tmp / "src.txt"),
                "tgt": str(tmp / "tgt.txt"),
                "fwd": str(tmp / "fwd"),
                "rev": str(tmp / "rev"),
                "iterations": ITERATIONS,
                "diagonal": diagonal,
            }
            (tmp / "job.json").write_text(json.dumps(job))
            best = None
            for _ in range(repeats):
                out = subprocess.run(
                    [str(VENV_PY), "-c", ALIGNER_SCRIPT, str(tmp / "job.json")],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                )
                res = json.loads(out.stdout.strip().splitlines()[-1])
                res["seconds"] = res["train_seconds"] + res["align_seconds"]
                if best is None or res["seconds"] < best["seconds"]:
                    best = res
            return best

        for model, diagonal in (("model1", False), ("model2_diagonal", True)):
            runs = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                corpus = Corpus.from_data(pairs)
                opts = {"iterations": ITERATIONS, "diagonal": diagonal, "optimize_tension": diagonal}
                fwd, rev = align(corpus, **opts), align(corpus.swapped(), **opts)
                ours_links = symmetrise(corpus, fwd, rev, "intersect")
                runs.append(time.perf_counter() - t0)
            row = {
                "ours": {
                    "seconds": min(runs),
                    "seconds_all": [round(r, 3) for r in runs],
                    "intersect_links": int(len(ours_links)),
                    "settings": "numpy EM, forward+reverse, Viterbi, intersection",
                }
            }
            if VENV_PY.exists():
                sa = tool("systran-align", diagonal)
                theirs = _keys(corpus, sa["links"])
                union = symmetrise(corpus, fwd, rev, "union")
                row["systran-align"] = {
                    "seconds": sa["seconds"],
                    "train_seconds": sa["train_seconds"],
                    "align_seconds": sa["align_seconds"],
                    "links": int(len(theirs)),
                    "their_links_in_our_intersection": float(np.isin(theirs, ours_links).mean()),
                    "their_links_in_our_union": float(np.isin(theirs, union).mean()),
                    "settings": f"generate_alignment_probabilities(iterations={ITERATIONS}, favor_diagonal="
                    f"{diagonal}, optimize_tension={diagonal}) + Aligner.align_batch",
                }
                row["ratio_ours_over_systran"] = row["ours"]["seconds"] / sa["seconds"]
                if not diagonal:  # eflomal has no fast_align-style diagonal prior; compare on Model 1 only
                    ef = tool("eflomal", False)
                    ef_links = np.intersect1d(_keys(corpus, ef["fwd"]), _keys(corpus, ef["rev"]))
                    row["eflomal"] = {
                        "seconds": ef["seconds"],
                        "intersect_links": int(len(ef_links)),
                        "its_links_in_our_intersection": float(np.isin(ef_links, ours_links).mean()),
                        "settings": f"model=1 (IBM1, Gibbs), n_iterations=({ITERATIONS}, 0, 0), "
                        "n_samplers=1, fwd+rev links, intersection by us",
                    }
                    row["ratio_ours_over_eflomal"] = row["ours"]["seconds"] / ef["seconds"]
            result["models"][model] = row
            summary = "  ".join(f"{k} {v['seconds']:.2f}s" for k, v in row.items() if isinstance(v, dict))
            print(f"scan {model:16s} {summary}", file=sys.stderr)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("learners", "compare", "all"), default="all")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="OMP_NUM_THREADS for the C++ aligners")
    parser.add_argument("--setup", action="store_true", help="create the aligner venv and exit")
    parser.add_argument("-o", "--output", type=Path, default=WORK / "bench_lexicon.json")
    parser.add_argument("--child", nargs=2, metavar=("METHOD", "DATASET"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.setup:
        setup()
        return
    report: dict = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load_avg_start": os.getloadavg()}
    }
    if args.part in ("learners", "all"):
        report["learners"] = run_learners(args.repeats)
    if args.part in ("compare", "all"):
        report["compare_scan"] = run_compare(args.repeats, args.threads)
    report["machine"]["load_avg_end"] = os.getloadavg()
    text = json.dumps(report, indent=2)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
