"""Markdown tables of the context-aware records: the ctx-commands runs (scripts/reproduce.py output: exact match
per split, mean and sd over seeds, one row per (config, overrides)), and with `--attention` the Table 9 encoder
attention statistics that `structseq context attention RUN --split SPLIT > FILE.json` writes.

    structseq report context results/context/commands.jsonl [MORE.jsonl ...]
    structseq report context --attention results/context/attention-sequential-s*.json
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path
from typing import Optional

import typer

from structseq.metrics.significance import format_mean_sd

from .kinds import FORMAT
from .records import read_json, read_jsonl_files

SPLITS = ("test", "longer", "position", "combination")


def table(*paths: str) -> str:
    runs: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in read_jsonl_files(paths):
        key = (Path(r["config"]).stem, " ".join(r["overrides"]) or "-")
        runs[key][r["split"]].append(100 * r["metrics"]["exact_match"]["score"])
    out = ["| decoder | overrides | seeds | " + " | ".join(SPLITS) + " |", "|---|---|---|" + "---|" * len(SPLITS)]
    for (decoder, over), splits in runs.items():
        cells = []
        for s in SPLITS:
            v = splits.get(s, [])
            cells.append(format_mean_sd(v, 1) if v else "-")
        out.append(f"| {decoder} | {over} | {len(splits.get('test', []))} | " + " | ".join(cells) + " |")
    return "\n".join(out)


#: Wang et al. 2019, Table 9 (ELI5 long-form QA, baseline Transformers): alpha S->C, alpha C->S, alpha win (40 tokens)
PAPER_TABLE9 = {"sequential": (0.736, 0.292, 0.170), "multitask": (0.480, 0.310, 0.274)}


def attention(*paths: str) -> str:
    """One row per statistics file, then the paper's rows."""
    out = [
        "| run | split | examples | layers | source -> context | context -> source | within window (tokens) |",
        "|---|---|---|---|---|---|---|",
    ]
    for path in paths:
        r = read_json(path)
        out.append(
            f"| `{Path(r['run']).name}` | {r['split']} | {r['examples']} | {r['layers']} | "
            f"{r['source_attention_on_context']:.3f} | {r['context_attention_on_source']:.3f} | "
            f"{r['attention_in_window']:.3f} ({r['window']}) |"
        )
    for name, (s_c, c_s, win) in PAPER_TABLE9.items():
        out.append(f"| paper: {name} baseline (ELI5) | test | - | - | {s_c:.3f} | {c_s:.3f} | {win:.3f} (40) |")
    return "\n".join(out)


def command(
    files: Optional[list[str]] = typer.Argument(
        None, help="records (default: results/context/commands.jsonl)", show_default=False
    ),
    attention: bool = typer.Option(False, "--attention", help="FILES are outputs of structseq context attention"),
    format: str = FORMAT,
) -> argparse.Namespace:
    """Context-aware runs per split against the sentence-level model, or (--attention) the encoder's attention
    statistics.

    Example: structseq report context --attention results/context/attention-sequential-s1.json"""
    files = files or ["results/context/commands.jsonl"]
    return argparse.Namespace(**locals())


def render(a: argparse.Namespace) -> str:
    return attention(*a.files) if a.attention else table(*a.files)
