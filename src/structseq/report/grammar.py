"""Grammar constraints measured on trained runs (`benchmarks/bench_grammar.py` records, results/decode/): per split
and beam, the share of ill-formed outputs, exact match and decoding CPU seconds without and with `decode.grammar`;
`--categories` adds exact match per category of one split.

    structseq report grammar results/decode/grammar-cogs.json results/decode/grammar-scan.json
    structseq report grammar results/decode/grammar-cogs.json --categories gen --beam 5
"""

from __future__ import annotations

import argparse
from typing import Optional

import typer

from .kinds import FORMAT
from .records import read_json


def _pct(x: float) -> str:
    return f"{x:.1%}"


def overview(paths: list[str]) -> str:
    lines = [
        "| run (grammar) | split | beam | outputs | ill-formed: free | grammar | exact match: free | grammar "
        "| CPU s: free | grammar | ratio | load |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    commands = []
    for path in paths:
        d = read_json(path)
        load = f"{d['load_average'][0]:.1f}"
        for r in d["rows"]:
            free, g = r["free"], r["grammar"]
            cells = [
                f"{d['arch']} on {r['dataset']} ({d['grammar']})",
                r["split"],
                str(r["beam"]),
                f"{r['n']:,}",
                _pct(free["ill_formed_share"]),
                _pct(g["ill_formed_share"]),
                _pct(free["exact_match"]),
                _pct(g["exact_match"]),
                f"{free['cpu_seconds']:.1f}",
                f"{g['cpu_seconds']:.1f}",
                f"{r['time_ratio']:.2f}",
                load,
            ]
            lines.append("| " + " | ".join(cells) + " |")
        commands.append(f"`{d['command']}`")
    return "\n".join(lines) + f"\n\nCommands: {'; '.join(commands)}."


def categories(path: str, split: str, beam: int) -> str:
    d = read_json(path)
    rows = [r for r in d["rows"] if r["split"] == split and r["beam"] == beam]
    if not rows:
        raise ValueError(f"{path} has no row of split {split!r} at beam {beam}")
    free, g = rows[0]["free"]["per_category"], rows[0]["grammar"]["per_category"]
    lines = [f"| category ({split}, beam {beam}) | free | grammar |", "|---|---:|---:|"]
    for name in sorted(free):
        lines.append(f"| {name} | {_pct(free[name])} | {_pct(g[name])} |")
    return "\n".join(lines)


def command(
    files: list[str] = typer.Argument(..., help="records of benchmarks/bench_grammar.py"),
    categories: Optional[str] = typer.Option(
        None, "--categories", metavar="SPLIT", help="exact match per category of SPLIT (of the first file)"
    ),
    beam: int = typer.Option(5, "--beam", help="with --categories: the beam"),
    format: str = FORMAT,
) -> argparse.Namespace:
    """Grammar constraints on trained runs: ill-formed outputs, exact match and decoding time with and without.

    Example: structseq report grammar results/grammar/cogs.json --categories gen"""
    return argparse.Namespace(**locals())


def render(args: argparse.Namespace) -> str:
    if args.categories:
        return categories(args.files[0], args.categories, args.beam)
    return overview(args.files)
