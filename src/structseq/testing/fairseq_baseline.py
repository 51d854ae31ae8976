"""fairseq side of the training-throughput comparison (fairseq 0.12 transformer on SCAN, CPU); its command
line is `benchmarks/fairseq_baseline.py`, and `benchmarks/bench_train.py` (--only fairseq) and
`benchmarks/bench_decode_fairseq.py` import it from here (issue 46: benchmarks import the package, not each
other).

Runs with the main project's Python (standard library only); fairseq itself runs in its own virtual
environment (`structseq.testing.fairseq_venv`), created on first use.

Timing: fairseq logs one JSON record per update (``--log-format json --log-interval 1``).
Each record is stamped here with ``time.perf_counter()`` as it arrives on the pipe
(fairseq's logging handler flushes per record). The measured window runs from the record
of update ``warmup`` to the record of the last update, so it covers updates
``warmup+1 .. updates`` (forward, backward, optimizer step, loading the next batch and
logging). Target tokens/s = sum of those updates' ``ntokens`` (fairseq's ``wpb`` with a
log interval of 1: non-pad target tokens, EOS included) / that time. fairseq's own ``wps``
(a meter reset after each log record) is reported alongside.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from structseq.paths import data_root
from structseq.testing.fairseq_venv import FAIRSEQ_REQ, VENV_BIN, WORK, ensure_venv, fairseq_env, log

DEFAULT_SPLIT = "scan/simple_split/tasks_train_simple.txt"
SRC_LANG, TGT_LANG = "in", "out"

#: Training recipe (fairseq's examples/translation IWSLT'14 de-en recipe, minus validation
#: and checkpointing). Everything not listed is a fairseq 0.12 default.
RECIPE = {
    "arch": "transformer_iwslt_de_en",
    "optimizer": "adam",
    "adam_betas": "(0.9, 0.98)",
    "adam_eps": 1e-8,
    "clip_norm": 0.0,
    "lr": 5e-4,
    "lr_scheduler": "inverse_sqrt",
    "warmup_updates": 4000,
    "dropout": 0.3,
    "weight_decay": 0.0001,
    "criterion": "label_smoothed_cross_entropy",
    "label_smoothing": 0.1,
}


# --------------------------------------------------------------------------- data


def read_scan(path: Path) -> list[tuple[str, str]]:
    pairs = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            if not line.startswith("IN:") or " OUT:" not in line:
                raise ValueError(f"{path}:{lineno}: not 'IN: ... OUT: ...': {line[:80]!r}")
            src, tgt = line[3:].split(" OUT:", 1)
            pairs.append((src.strip(), tgt.strip()))
    return pairs


def prepare_data(split: str | os.PathLike = DEFAULT_SPLIT, threads: int = 2) -> Path:
    """SCAN file -> raw parallel text -> fairseq-preprocess binaries; returns the data-bin dir.

    ``split`` is a path relative to the data root ($STRUCTSEQ_DATA, default ../shared/data)
    or an absolute path. Cached under benchmarks/work/, keyed by the file's content hash.
    """
    ensure_venv()
    src_file = Path(split)
    if not src_file.is_absolute():
        src_file = data_root().resolve() / src_file
    if not src_file.is_file():
        raise FileNotFoundError(f"SCAN split not found: {src_file} (set STRUCTSEQ_DATA)")
    digest = hashlib.sha256(src_file.read_bytes()).hexdigest()[:16]
    name = src_file.stem
    raw_dir = WORK / "raw" / name
    bin_dir = WORK / "data-bin" / name
    stamp = bin_dir / "SOURCE.json"
    if stamp.exists():
        try:
            if json.loads(stamp.read_text()).get("sha256_16") == digest:
                return bin_dir
        except ValueError:
            pass
    pairs = read_scan(src_file)
    raw_dir.mkdir(parents=True, exist_ok=True)
    with (
        open(raw_dir / f"train.{SRC_LANG}", "w", encoding="utf-8") as fs,
        open(raw_dir / f"train.{TGT_LANG}", "w", encoding="utf-8") as ft,
    ):
        for s, t in pairs:
            fs.write(s + "\n")
            ft.write(t + "\n")
    if bin_dir.exists():
        shutil.rmtree(bin_dir)
    log(f"fairseq-preprocess {src_file} ({len(pairs)} pairs) -> {bin_dir}")
    subprocess.run(
        [
            str(VENV_BIN / "fairseq-preprocess"),
            "--source-lang",
            SRC_LANG,
            "--target-lang",
            TGT_LANG,
            "--trainpref",
            str(raw_dir / "train"),
            "--destdir",
            str(bin_dir),
            "--workers",
            "1",
        ],
        check=True,
        env=fairseq_env(threads),
        stdout=subprocess.DEVNULL,
    )
    stamp.write_text(json.dumps({"source": str(src_file), "sha256_16": digest, "pairs": len(pairs)}, indent=1))
    return bin_dir


# --------------------------------------------------------------------------- training


def train_command(data_bin: Path, updates: int, max_tokens: int, seed: int, num_workers: int = 0) -> list[str]:
    r = RECIPE
    return [
        str(VENV_BIN / "fairseq-train"),
        str(data_bin),
        "--task",
        "translation",
        "--source-lang",
        SRC_LANG,
        "--target-lang",
        TGT_LANG,
        "--arch",
        r["arch"],
        "--optimizer",
        r["optimizer"],
        "--adam-betas",
        r["adam_betas"],
        "--adam-eps",
        str(r["adam_eps"]),
        "--clip-norm",
        str(r["clip_norm"]),
        "--lr",
        str(r["lr"]),
        "--lr-scheduler",
        r["lr_scheduler"],
        "--warmup-updates",
        str(r["warmup_updates"]),
        "--dropout",
        str(r["dropout"]),
        "--weight-decay",
        str(r["weight_decay"]),
        "--criterion",
        r["criterion"],
        "--label-smoothing",
        str(r["label_smoothing"]),
        "--max-tokens",
        str(max_tokens),
        "--max-update",
        str(updates),
        "--seed",
        str(seed),
        "--disable-validation",
        "--no-save",
        "--cpu",
        "--num-workers",
        str(num_workers),
        "--log-format",
        "json",
        "--log-interval",
        "1",
    ]


def _cpu_seconds(pid: int) -> float | None:
    """user+system CPU seconds of a live process (all its threads), from /proc; else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _parse_record(line: str) -> tuple[str, dict] | None:
    """'<date> | INFO | train_inner | {json}' -> ('train_inner', {...})."""
    parts = line.split(" | ", 3)
    if len(parts) != 4 or not parts[3].startswith("{"):
        return None
    try:
        return parts[2].strip(), json.loads(parts[3])
    except ValueError:
        return None


def _read_updates(proc: subprocess.Popen, t_start: float, echo: bool) -> tuple[list[str], list[dict]]:
    """fairseq-train's output lines, and per `train_inner` record the update, stamped as it arrives."""
    raw_lines: list[str] = []
    per_update: list[dict] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        now = time.perf_counter()
        cpu = _cpu_seconds(proc.pid)
        line = line.rstrip("\n")
        raw_lines.append(line)
        if echo:
            print(line, file=sys.stderr, flush=True)
        rec = _parse_record(line)
        if rec and rec[0] == "train_inner":
            stats = rec[1]
            per_update.append(
                {
                    "update": int(float(stats["num_updates"])),
                    "t": now - t_start,
                    "cpu_s": cpu,
                    "ntokens": float(stats["wpb"]),  # log interval 1: this update's ntokens
                    "nsentences": float(stats["bsz"]),
                    "wps": float(stats["wps"]),
                    "loss": float(stats["loss"]),
                    "lr": float(stats["lr"]),
                }
            )
    return raw_lines, per_update


def run_fairseq(
    updates: int = 20,
    max_tokens: int = 3500,
    seed: int = 1,
    threads: int = 2,
    *,
    warmup: int = 5,
    split: str | os.PathLike = DEFAULT_SPLIT,
    num_workers: int = 0,
    echo: bool = False,
) -> dict:
    """Train fairseq's transformer_iwslt_de_en on SCAN for ``updates`` updates on CPU.

    Returns wall time and target tokens/s over updates ``warmup+1 .. updates`` (the first
    ``warmup`` updates are excluded), fairseq's own wps, per-update records and raw logs.
    """
    if updates < 2:
        raise ValueError("need at least 2 updates (one warm-up, one measured)")
    warmup = max(1, min(warmup, updates - 1))
    data_bin = prepare_data(split, threads)
    cmd = train_command(data_bin, updates, max_tokens, seed, num_workers)
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    t_start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        env=fairseq_env(threads),
        cwd=str(WORK),
    )
    raw_lines, per_update = _read_updates(proc, t_start, echo)
    rc = proc.wait()
    total_wall = time.perf_counter() - t_start
    if rc != 0:
        tail = "\n".join(raw_lines[-40:])
        raise RuntimeError(f"fairseq-train exited with {rc}:\n{tail}")
    if len(per_update) < updates:
        raise RuntimeError(f"parsed {len(per_update)} train_inner records, expected {updates}")
    per_update = per_update[:updates]
    by_update = {r["update"]: r for r in per_update}
    measured = [by_update[u] for u in range(warmup + 1, updates + 1)]
    wall = by_update[updates]["t"] - by_update[warmup]["t"]
    ntok = sum(r["ntokens"] for r in measured)
    nsent = sum(r["nsentences"] for r in measured)
    cpu0, cpu1 = by_update[warmup]["cpu_s"], by_update[updates]["cpu_s"]
    cpu = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    fairseq_time = sum(r["ntokens"] / r["wps"] for r in measured if r["wps"] > 0)
    return {
        "framework": "fairseq",
        "fairseq_version": FAIRSEQ_REQ,
        "arch": RECIPE["arch"],
        "updates": updates,
        "warmup_updates": warmup,
        "measured_updates": len(measured),
        "max_tokens": max_tokens,
        "seed": seed,
        "threads": threads,
        "num_workers": num_workers,
        "wall_time_s": wall,
        "target_tokens": ntok,
        "sentences": nsent,
        "target_tokens_per_s": ntok / wall,
        "sentences_per_s": nsent / wall,
        # CPU seconds the fairseq process used in the window; cpu_s / wall_time_s ~ cores it
        # actually got. With threads=1 tokens per CPU-second is fairly robust to other load
        # on the machine; with >1 thread on an oversubscribed machine OpenMP spin-waiting
        # inflates cpu_s and wall time collapses (compare runs only under the same load).
        "cpu_s": cpu,
        "cores_used": cpu / wall if cpu is not None else None,
        "target_tokens_per_cpu_s": ntok / cpu if cpu else None,
        "load_avg_before": load_before,
        "s_per_update": wall / len(measured),
        "mean_target_tokens_per_batch": ntok / len(measured),
        "mean_sentences_per_batch": nsent / len(measured),
        # fairseq's own view: per-update wps meter (reset after each log record)
        "fairseq_time_s": fairseq_time,
        "fairseq_wps": ntok / fairseq_time if fairseq_time else None,
        "fairseq_wps_per_update_mean": sum(r["wps"] for r in measured) / len(measured),
        "process_wall_s": total_wall,
        "startup_s": per_update[0]["t"],
        "per_update": per_update,
        "recipe": RECIPE,
        "command": cmd,
        "log_lines": raw_lines,
    }


# --------------------------------------------------------------------------- batching


_BATCH_SNIPPET = r"""
import json, sys, numpy as np
from fairseq.data import Dictionary, data_utils, LanguagePairDataset
d, max_tokens, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sd = Dictionary.load(f"{d}/dict.in.txt"); td = Dictionary.load(f"{d}/dict.out.txt")
src = data_utils.load_indexed_dataset(f"{d}/train.in-out.in", sd)
tgt = data_utils.load_indexed_dataset(f"{d}/train.in-out.out", td)
# as TranslationTask.load_dataset + FairseqTask.get_batch_iterator + EpochBatchIterator do:
ds = LanguagePairDataset(src, src.sizes, sd, tgt, tgt.sizes, td, shuffle=True)
with data_utils.numpy_seed(seed):
    idx = ds.ordered_indices()
batches = list(ds.batch_by_size(idx, max_tokens=max_tokens, max_sentences=None,
                                required_batch_size_multiple=8))
with data_utils.numpy_seed(seed + 1):   # epoch 1: batch order shuffled with seed + epoch
    np.random.shuffle(batches)
rows = []
for b in batches:
    s, t = ds.src_sizes[b], ds.tgt_sizes[b]
    rows.append((len(b), int(t.sum()), int(s.sum()), int(len(b) * t.max()),
                 int(len(b) * s.max()), int(len(b) * max(s.max(), t.max()))))
a = np.array(rows)
q = lambda c: {k: float(v) for k, v in zip(("min", "p10", "median", "mean", "p90", "max"),
    (a[:, c].min(), np.percentile(a[:, c], 10), np.median(a[:, c]), a[:, c].mean(),
     np.percentile(a[:, c], 90), a[:, c].max()))}
print(json.dumps({"stats": {
    "max_tokens": max_tokens, "seed": seed, "batches_per_epoch": len(batches),
    "sentences_per_epoch": int(a[:, 0].sum()), "target_tokens_per_epoch": int(a[:, 1].sum()),
    "sentences": q(0), "target_tokens": q(1), "source_tokens": q(2),
    "padded_target_tokens": q(3), "padded_source_tokens": q(4),
    "max_len_times_sentences": q(5),
    "src_len_incl_eos": [int(ds.src_sizes.min()), int(ds.src_sizes.max())],
    "tgt_len_incl_eos": [int(ds.tgt_sizes.min()), int(ds.tgt_sizes.max())],
    "src_vocab": len(sd), "tgt_vocab": len(td)},
    "batches": [[int(i) for i in b] for b in batches]}))
"""


def fairseq_batches(max_tokens: int = 3500, seed: int = 1, split: str | os.PathLike = DEFAULT_SPLIT) -> dict:
    """fairseq's own --max-tokens batching of the split for epoch 1, in training order.

    Returns {"stats": summary, "batches": [[example index, ...], ...]}; example indices are
    0-based positions of the (non-empty) lines of the SCAN file. Update k of ``run_fairseq``
    with the same max_tokens/seed trains on batches[k-1] (checked against fairseq's logged
    bsz/wpb). Within a batch fairseq's collater reorders by source length (descending).
    """
    data_bin = prepare_data(split)
    out = subprocess.run(
        [str(VENV_BIN / "python"), "-c", _BATCH_SNIPPET, str(data_bin), str(max_tokens), str(seed)],
        capture_output=True,
        text=True,
        env=fairseq_env(1),
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def batch_stats(max_tokens: int = 3500, seed: int = 1, split: str | os.PathLike = DEFAULT_SPLIT) -> dict:
    """One epoch of fairseq's --max-tokens batching of the split, summarised."""
    return fairseq_batches(max_tokens, seed, split)["stats"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--updates", type=int, default=20)
    p.add_argument("--max-tokens", type=int, default=3500)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--warmup", type=int, default=5, help="leading updates excluded from timing")
    p.add_argument(
        "--split", default=DEFAULT_SPLIT, help="SCAN file, relative to $STRUCTSEQ_DATA (default ../shared/data)"
    )
    p.add_argument(
        "--num-workers", type=int, default=0, help="fairseq data-loader workers (0: load in the training process)"
    )
    p.add_argument("--no-logs", action="store_true", help="leave fairseq's raw log lines out of the printed JSON")
    p.add_argument("--echo", action="store_true", help="stream fairseq's log to stderr")
    p.add_argument("--batch-stats", action="store_true", help="only print fairseq's batching statistics for one epoch")
    p.add_argument(
        "--dump-batches",
        metavar="PATH",
        help="only write fairseq's epoch-1 batches (SCAN line indices, training "
        "order) and their statistics to PATH as JSON",
    )
    a = p.parse_args(argv)
    if a.batch_stats or a.dump_batches:
        res = fairseq_batches(a.max_tokens, a.seed, a.split)
        if a.dump_batches:
            Path(a.dump_batches).write_text(json.dumps(res))
            log(f"wrote {len(res['batches'])} batches to {a.dump_batches}")
        print(json.dumps(res["stats"], indent=1))
        return 0
    res = run_fairseq(
        a.updates,
        a.max_tokens,
        a.seed,
        a.threads,
        warmup=a.warmup,
        split=a.split,
        num_workers=a.num_workers,
        echo=a.echo,
    )
    if a.no_logs:
        res["log_lines"] = f"{len(res['log_lines'])} lines (left out: --no-logs)"
    print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
