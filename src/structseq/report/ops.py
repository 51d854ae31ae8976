"""Tables of issue 45's CPU records: operators per update, and how batches are composed.

    structseq report ops ops 'd15a89c=results/perf/ops_before.json' 'now=results/perf/ops_after.json' ...
    structseq report ops buckets results/perf/bench_buckets.json

`ops`: per model, the dispatched operators per training update (views left out) of each labelled record
(`benchmarks/count_ops.py`), and the first record over each later one; a model a record lacks is left blank.
`buckets`: `benchmarks/bench_buckets.py`'s batch composition per dataset, token budget and batching rule.
"""

from __future__ import annotations

import argparse
from typing import Literal

import typer

from .kinds import FORMAT
from .records import read_json, read_labelled


def ops(specs: list[str]) -> str:
    named = read_labelled(specs)
    counts = [{r["model"]: r["ops_per_update"] for r in d["rows"] if "ops_per_update" in r} for _, d in named]
    labels = [label for label, _ in named]
    header = ["model", *labels, *(f"{labels[0]} / {label}" for label in labels[1:])]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for model in counts[0]:
        cells = [f"{c[model]:,.0f}" if model in c else "" for c in counts]
        ratios = [f"{counts[0][model] / c[model]:.2f}" if model in c else "" for c in counts[1:]]
        lines.append("| " + " | ".join([model, *cells, *ratios]) + " |")
    commands = "; ".join(f"{label}: `{d['command']}`" for label, d in named)
    return "\n".join(lines) + f"\n\nCommands: {commands}."


def buckets(paths: list[str]) -> str:
    d = read_json(paths[0])
    lines = [
        "| data | max tokens | rule | batches an epoch | >= 90% one example | worst share | copies in such batches "
        "| padding efficiency | static | shapes an epoch |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in d["rows"]:
        cells = [
            r["data"],
            f"{r['max_tokens']:,}",
            r["rule"],
            f"{r['batches_per_epoch']:.0f}",
            f"{r['duplicate_only_batches']:.1%}",
            f"{r['worst_share']:.2f}",
            f"{r['copies_in_duplicate_batches']:.0%}",
            f"{r['padding_efficiency']:.2f}",
            f"{r['padding_efficiency_static']:.2f}",
            str(r["shapes_per_epoch"]),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def command(
    table: Literal["ops", "buckets"] = typer.Argument(..., metavar="TABLE", help="ops or buckets"),
    files: list[str] = typer.Argument(..., help="ops: LABEL=FILE ...; buckets: FILE"),
    format: str = FORMAT,
) -> argparse.Namespace:
    """Operators per training update of each labelled record (ops), or how batches are composed (buckets).

    Example: structseq report ops buckets results/perf/bench_buckets.json"""
    return argparse.Namespace(**locals())


def render(args: argparse.Namespace) -> str:
    return ops(args.files) if args.table == "ops" else buckets(args.files)
