"""Tables of the compose corpus-scale benchmark (`benchmarks/bench_compose.py --scale`, issue 48).

    structseq report compose-scale results/compose/scale.jsonl                 # measured runs
    structseq report compose-scale results/compose/scale.jsonl --extrapolate   # 10^8 and 10^9, labelled

Stages are grouped so that the paths compare: read (text in), dictionary (vocabulary and n-gram atoms: the
in-memory `from_corpus`; sharded: ingest, vocabulary, encode, every count and DuckDB merge), degree, top-K.
Peak memory: the largest stage's peak of one process (the in-memory process; a sharded task's worker, of
which `workers` run at once, beside the coordinating process, whose peak is given after the slash); and, where
the run recorded it, the peak of the whole process tree sampled each second (PSS: pages shared by the workers
counted once), which is the figure a memory budget is about. Repeated runs of one setting are one row: the
run with the median wall time, and how many runs there were.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import typer

from .kinds import FORMAT
from .records import read_jsonl

GROUPS = {
    "read train": "read",
    "read pool": "read",
    "dictionary": "dictionary",
    "train ingest": "dictionary",
    "vocabulary": "dictionary",
    "train encode": "dictionary",
    "pool ingest": "read",
    "degree": "degree",
    "top-K": "top-K",
}


def group(stage: str) -> str:
    return GROUPS.get(stage, "dictionary" if stage.startswith(("count n=", "atoms n=")) else stage)


def summarise(record: dict) -> dict:
    seconds: dict[str, float] = {}
    for stage, value in record["stages"].items():
        seconds[group(stage)] = seconds.get(group(stage), 0.0) + value["seconds"]
    cpu = sum(v.get("cpu_seconds", 0.0) for v in record["stages"].values())
    peak = max(v["peak_rss_mib"] for v in record["stages"].values())
    return {
        "seconds": seconds,
        "total": sum(seconds.values()),
        "cpu": cpu,
        "peak": peak,
        "main": record.get("peak_rss_mib_main"),
        "resumed": sum(v.get("resumed", 0) for v in record["stages"].values()),
    }


def _label(record: dict) -> str:
    return {"memory": "in memory", "sharded": "sharded, local", "ray": "sharded, Ray"}.get(
        record["path"], record["path"]
    )


def _size(n: float) -> str:
    return f"{n:.0e}".replace("e+0", "e")


def _pool(record: dict) -> int:
    return record.get("pool_sentences", record["sentences"])


def _setting(record: dict) -> tuple:
    return (record["sentences"], _pool(record), record["path"] != "memory", record["path"], record["workers"],
            record["shards"] or 0)  # fmt: skip


def medians(records: list[dict]) -> list[tuple[dict, int]]:
    """(the run with the median total stage time, how many runs) per setting, in table order."""
    runs: dict[tuple, list[dict]] = {}
    for r in records:
        runs.setdefault(_setting(r), []).append(r)
    chosen = []
    for key in sorted(runs):
        ordered = sorted(runs[key], key=lambda r: summarise(r)["total"])
        chosen.append((ordered[(len(ordered) - 1) // 2], len(ordered)))
    return chosen


def table(records: list[dict]) -> str:
    """One row per setting (the median run); CPU per sentence counts training and pool sentences (both are
    read and scored)."""
    chosen = medians(records)
    baseline = {(r["sentences"], _pool(r)): summarise(r)["cpu"] for r, _ in chosen if r["path"] == "memory"}
    rows = [
        "| train + pool sentences | path | workers | shards | runs | read s | dictionary s | degree s | top-K s "
        "| wall s | CPU s | CPU µs/sentence | CPU vs in memory | peak MiB | tree peak MiB | atoms | load (1 min) |",
        "|" + "---|" * 17,
    ]
    for r, count in chosen:
        s = summarise(r)
        size = (r["sentences"], _pool(r))
        ratio = f"{s['cpu'] / baseline[size]:.2f}x" if size in baseline else "n/a"
        peak = f"{s['peak']:.0f}" + (f" / {s['main']:.0f}" if s["main"] else "")
        cells = [
            f"{_size(r['sentences'])} + {_size(_pool(r))}",
            _label(r) + (f" (resumed {s['resumed']} tasks: partial times)" if s["resumed"] else ""),
            str(r["workers"]),
            str(r["shards"] or "-"),
            str(count),
            *(f"{s['seconds'].get(k, 0.0):.1f}" for k in ("read", "dictionary", "degree", "top-K")),
            f"{s['total']:.1f}",
            f"{s['cpu']:.1f}",
            f"{1e6 * s['cpu'] / (r['sentences'] + _pool(r)):.1f}",
            ratio,
            peak,
            f"{r['peak_tree_pss_mib']:.0f}" if "peak_tree_pss_mib" in r else "-",
            f"{sum(r['atoms_per_n'].values()):,}",
            f"{r['load_before'][0]:.1f} → {r['load_after'][0]:.1f}",
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def extrapolate(records: list[dict]) -> str:
    """From the CPU seconds per sentence (training + pool) of each sharded path's largest run (the load inflates
    wall time, not CPU time): hours on W idle workers = CPU per sentence x sentences / W, assuming linear scaling
    in sentences and workers (labelled as an extrapolation where shown)."""
    largest: dict[tuple, dict] = {}
    for r in records:
        if r["path"] != "memory" and not summarise(r)["resumed"]:  # a resumed run's seconds are partial
            key = (r["path"], r["workers"])
            if key not in largest or r["sentences"] > largest[key]["sentences"]:
                largest[key] = r
    rows = [
        "| extrapolated from | path | CPU µs/sentence | 10^8 + 10^8, 2 workers (this machine, idle) "
        "| 10^9 + 10^9, 10 machines x 16 workers | 10^9 + 10^9, 100 machines x 16 workers |",
        "|---|---|---|---|---|---|",
    ]
    for (path, workers), r in sorted(largest.items()):
        per = summarise(r)["cpu"] / (r["sentences"] + _pool(r))
        hours = [per * n / w / 3600 for n, w in ((2e8, 2), (2e9, 160), (2e9, 1600))]
        cells = [f"{_size(r['sentences'])} + {_size(_pool(r))}, {workers} worker(s)", _label(r), f"{1e6 * per:.1f}"]
        rows.append("| " + " | ".join(cells + [f"{h:.2f} h" for h in hours]) + " |")
    return "\n".join(rows)


def command(
    records: Path = typer.Argument(..., help="records of the compose corpus-scale benchmark (JSON lines)"),
    extrapolate: bool = typer.Option(False, "--extrapolate", help="the 10^8 / 10^9 extrapolation instead"),
    format: str = FORMAT,
) -> argparse.Namespace:
    """The compose corpus-scale benchmark per stage (seconds, CPU seconds, memory), measured or extrapolated.

    Example: structseq report compose-scale results/compose-scale/records.jsonl"""
    return argparse.Namespace(**locals())


def render(args: argparse.Namespace) -> str:
    records = read_jsonl(args.records)
    return extrapolate(records) if args.extrapolate else table(records)
