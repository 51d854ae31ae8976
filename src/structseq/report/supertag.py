"""Tables of the supertagging records (issue 10): the evaluation JSONs of `structseq evaluate`.

    structseq report supertag results/supertag/evals [--plot docs/supertag-beta-curve.png]

Records are read from `CONFIG-sSEED-beamK.json` files (what scripts/reproduce_supertag.sh keeps in
results/supertag/evals) or from run directories `CONFIG-sSEED/eval-test-beamK.json` (e.g. runs/supertag).

Prints Markdown: Table 2 columns (overall / frequent / uncommon / rare / unseen word accuracy, sentence accuracy)
as mean +- sd over seeds per config, greedy vs beam 5 with the k-best oracle, the unseen-category counts, and
the beta curve of the tree tagger (accuracy vs categories per word), and writes every number as JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Optional

import typer

from structseq.errors import StructseqError
from structseq.metrics.significance import format_mean_sd

from .kinds import FORMAT
from .records import read_json, save_figure, write_output

ORDER = ["classifier", "tree", "tree-nosf", "tree-nonf", "tree-nosf-nonf"]


def percent(value: float, signature: str | None) -> float:
    """A score as a percent: signatures that state `scale:fraction` hold fractions; records written before
    signatures stated a scale hold percents."""
    return 100.0 * value if signature and "|scale:fraction" in signature else value


def val(m: dict, key: str) -> float:
    """A score of an evaluation JSON as a percent (current form {score, signature, ...}; records of the first
    runs held bare percents and the bins under `bins`)."""
    if key.startswith("accuracy_") and key not in m:
        return m["bins"][key[len("accuracy_") :]]["accuracy"]
    v = m[key]
    return percent(v["score"], v.get("signature", m.get("signature"))) if isinstance(v, dict) else v


def curve(m: dict) -> list[dict]:
    """The multi-tagger curve of an evaluation JSON, its accuracies as percents (the record's signature says
    whether they were written as fractions)."""
    return [{**p, "accuracy": percent(p["accuracy"], m.get("signature"))} for p in m["multitag"]]


COLS = (
    [("overall", lambda m: val(m, "accuracy"))]
    + [(b, lambda m, b=b: val(m, f"accuracy_{b}")) for b in ("frequent", "uncommon", "rare", "unseen")]
    + [("sentence", lambda m: val(m, "sentence_accuracy"))]
)


def fmt(xs: list[float]) -> str:
    return format_mean_sd(xs, 2) if xs else "—"


def read_records(dirs: list[Path]) -> dict[str, dict[int, dict]]:
    """{config: {seed: {"beam1": eval, "beam5": eval}}}; runs missing the greedy evaluation are left out."""
    runs: dict[str, dict[int, dict]] = defaultdict(dict)
    for root in dirs:
        for f in sorted(root.iterdir()):
            m = re.fullmatch(r"(.+)-s(\d+)-beam(\d+)\.json", f.name)
            if m:
                runs[m.group(1)].setdefault(int(m.group(2)), {})[f"beam{m.group(3)}"] = read_json(f)
                continue
            m = re.fullmatch(r"(.+)-s(\d+)", f.name)
            for g in sorted(f.glob("eval-test-beam*.json")) if m and f.is_dir() else []:
                runs[m.group(1)].setdefault(int(m.group(2)), {})[g.stem.split("-")[-1]] = read_json(g)
    return {c: {s: r for s, r in sorted(v.items()) if "beam1" in r} for c, v in runs.items()}


def plot(runs: dict[str, dict[int, dict]], path: Path) -> None:
    """Accuracy of "gold within beta of the best" against categories per word, mean over seeds per config."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for c, recs in runs.items():
        recs = [r["beam5"] for r in recs.values() if "beam5" in r]
        if not recs:
            continue
        xs = [statistics.mean(curve(r)[i]["tags_per_word"] for r in recs) for i in range(len(recs[0]["multitag"]))]
        ys = [statistics.mean(curve(r)[i]["accuracy"] for r in recs) for i in range(len(recs[0]["multitag"]))]
        ax.plot(xs, ys, marker="o", label=f"{c} ({len(recs)} seeds)")
    ax.set_xlabel("categories per word (beta from 1 to 1e-4)")
    ax.set_ylabel("gold category within beta of the best (%)")
    ax.set_title("TLGbank light test, k-best trees (beam 5)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def command(
    records: list[Path] = typer.Argument(..., help="folders of evaluation records or of runs"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="also write every number as JSON to this file"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="draw the beta curve (accuracy vs categories per word)"),
    format: str = FORMAT,
) -> argparse.Namespace:
    """Supertagging accuracy per model (mean ± sd over seeds): Table 2's word classes, greedy against beam 5 and
    its k-best oracle, and the tree tagger's beta curve.

    Example: structseq report supertag results/supertag/evals --plot beta.png"""
    return argparse.Namespace(**locals())


def render(args: argparse.Namespace) -> str:
    lines: list[str] = []
    emit = lines.append
    runs = read_records(args.records)
    if not runs:  # an empty summary written with exit 0 (over an earlier one with -o) says nothing was found
        folders = ", ".join(str(d) for d in args.records)
        raise StructseqError(
            f"{folders}: no supertagging evaluation with a greedy record (NAME-sSEED-beam1.json, or a run "
            "folder NAME-sSEED holding eval-test-beam1.json)"
        )
    configs = [c for c in ORDER if c in runs] + sorted(c for c in runs if c not in ORDER)
    out = {"configs": {c: {str(s): r for s, r in runs[c].items()} for c in configs}}
    emit("| model | seeds | " + " | ".join(n for n, _ in COLS) + " |")
    emit("|---|---|" + "---|" * len(COLS))
    for c in configs:
        recs = list(runs[c].values())
        emit(
            f"| {c} (greedy) | {len(recs)} | " + " | ".join(fmt([f(r["beam1"]) for r in recs]) for _, f in COLS) + " |"
        )
    emit("")
    emit("| model | greedy | beam 5 best | beam 5 oracle | unseen predicted (right) | ill-formed argmax repaired |")
    emit("|---|---|---|---|---|---|")
    for c in configs:
        recs = [r for r in runs[c].values() if "beam5" in r]
        if not recs:
            continue
        unseen = ", ".join(f"{r['beam1']['unseen_predicted']} ({r['beam1']['unseen_predicted_correct']})" for r in recs)
        rep = ", ".join(str(r["beam1"].get("ill_formed_repaired", "—")) for r in recs)
        emit(
            f"| {c} | {fmt([val(r['beam1'], 'accuracy') for r in recs])} | "
            f"{fmt([val(r['beam5'], 'accuracy') for r in recs])} "
            f"| {fmt([val(r['beam5'], 'oracle_accuracy') for r in recs])} | {unseen} | {rep} |"
        )
    emit("")
    for c in configs:
        recs = [r for r in runs[c].values() if "beam5" in r]
        if not recs:
            continue
        emit(
            f"- beta curve, {c} (beam 5; mean over {len(recs)} seed(s)): "
            + "; ".join(
                f"beta {p['beta']:g}: {statistics.mean(curve(r['beam5'])[i]['accuracy'] for r in recs):.2f}% at "
                f"{statistics.mean(r['beam5']['multitag'][i]['tags_per_word'] for r in recs):.2f}/word"
                for i, p in enumerate(recs[0]["beam5"]["multitag"])
            )
        )
    if args.plot:
        plot({c: runs[c] for c in configs}, args.plot)
    if args.out:
        write_output(args.out, json.dumps(out, indent=1) + "\n")
    return "\n".join(lines)
