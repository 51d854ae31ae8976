"""The JSON lines written by `structseq sweep` (scripts/reproduce.py) as Markdown tables (mean ± sd over seeds).

    structseq report results results/foundation.jsonl
    structseq report results results/lexicon/budget-runs.jsonl \
        --curve results/lexicon/budget-runs-curve.jsonl --plot docs/budget-curve-scan.png

`--curve` adds the learning-curve table (test score against updates, per seed and mean) from the records of
`structseq sweep --curve-every`; the point at the last update is the run's own record in FILES. `--plot` draws it
(`results_plot.py`).
"""

from __future__ import annotations

import argparse
import statistics
import warnings
from collections import defaultdict
from pathlib import Path
from typing import Optional

import typer

from structseq.errors import StructseqError
from structseq.metrics.significance import format_mean_sd

from .kinds import FORMAT
from .records import Record, read_jsonl_files
from .results_paper import PAPER, PAPER_BLEU, curve_scale, paper_key, paper_split


def score(record: dict, metric: str) -> float:
    """A record's score for `metric`, a report key or a dotted path into it (`pooled_bleu.full`)."""
    node = record["metrics"]
    for part in metric.split("."):
        node = node[part]
    return node["score"]


#: the mark and footnote of records decoded (beam > 1) by the search before issue 44's fix, flagged in the record
OLD_BEAM = " †"
OLD_BEAM_NOTE = (
    "\n† decoded with beam > 1 by the beam search before issue 44 item 1 (a finished output could be evicted by open "
    "prefixes that end lower, so an output could be worse than one the search had found); not re-run."
)


def _old_beam(records) -> str:
    return OLD_BEAM if any(r.get("old_beam_search") for r in records) else ""


def curve(
    files: list[str], curve_files: list[str], plot: str | None, metric: str = "exact_match"
) -> tuple[list[str], bool]:
    """Learning-curve table (and plot) per (config, split): score at each kept checkpoint, per seed: the
    table's lines, and whether a row is marked `OLD_BEAM` (its note is then among the lines)."""
    lines: list[str] = []
    emit = lines.append
    final = {(r["run_dir"], r["split"]): r for r in read_jsonl_files(files)}
    scale = curve_scale(metric)
    points: dict[tuple, dict[int, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))  # key -> seed -> step
    curve_runs, old = set(), defaultdict(bool)
    for r in read_jsonl_files(curve_files):
        key = (r["config"] + "".join(f" {o}" for o in r.get("overrides", [])), r["split"])
        points[key][r["seed"]][r["step"]] = scale * score(r, metric)
        old[key] |= bool(r.get("old_beam_search"))
        curve_runs.add((r["run_dir"], r["split"], key[0], r["seed"]))
    for run_dir, split, config, seed in curve_runs:  # the last point: the run's own (final-checkpoint) record
        if (run_dir, split) in final and not final[(run_dir, split)].get("diverged"):
            f = final[(run_dir, split)]
            points[(config, split)][seed][f["steps"]] = scale * score(f, metric)
    steps = sorted({k for per_seed in points.values() for s in per_seed.values() for k in s})
    shown = f"{metric} (x 100)" if scale != 1 else metric
    emit(
        f"\nLearning curve: test {shown} against updates (checkpoints kept during training, each evaluated "
        "once; none selected by it)\n"
    )
    emit("| config | split | seeds | " + " | ".join(str(k) for k in steps) + " |")
    emit("|---|---|---|" + "---|" * len(steps))
    for (config, split), per_seed in sorted(points.items()):
        seeds = sorted(per_seed)
        cells = []
        for k in steps:
            vals = [per_seed[s][k] for s in seeds if k in per_seed[s]]
            cells.append(" / ".join(f"{v:.3f}" if scale == 1 else f"{v:.2f}" for v in vals) if vals else "-")
        mark = OLD_BEAM if old[(config, split)] else ""
        emit(f"| `{config}` | {split} | {', '.join(map(str, seeds))}{mark} | " + " | ".join(cells) + " |")
    if any(old.values()):
        emit(OLD_BEAM_NOTE)
    if plot:
        from .results_plot import plot_curves

        plot_curves(points, metric, plot)
    return lines, any(old.values())


def headline(groups: dict[tuple, list[dict]]) -> list[str]:
    """One line per (column, model, overrides) on the split the papers report (`paper_split`): the column's score (exact match; the
    paper's pooled BLEU x 100 where the records have it, as on Tatoeba) mean ± sd over the finished seeds, their
    number, diverged seeds, and the paper's number."""
    lines: list[str] = []
    emit = lines.append
    emit("| column | model | score (test; COGS: gen) | seeds | paper |")
    emit("|---|---|---|---|---|")
    for (config, overrides, split), all_rs in sorted(groups.items()):
        ds, stem = paper_key(config)
        if split != paper_split(ds):
            continue
        rs = [r for r in all_rs if not r.get("diverged")]
        lost = len(all_rs) - len(rs)
        shown = " ".join(
            [f"`{stem}`"]
            + [
                f"`{o}`"
                for o in overrides
                if o.split("=")[0].split(".")[-1] not in ("valid_every", "warmup", "threads")
            ]
        )
        if rs and all("pooled_bleu" in r["metrics"] for r in rs):
            shown_score = "BLEU " + format_mean_sd([100 * score(r, "pooled_bleu.full") for r in rs], 2)
            paper = PAPER_BLEU.get((ds, stem), "")
            paper = f"BLEU {paper.split(' / ')[0]} (A&A 2021)" if paper else ""
        else:
            shown_score = "EM " + format_mean_sd([r["metrics"]["exact_match"]["score"] for r in rs]) if rs else "-"
            paper = PAPER.get((ds, stem), "")
        n = f"{len(rs)}" + (f" (+{lost} diverged)" if lost else "")
        emit(f"| {ds} | {shown} | {shown_score} | {n} | {paper} |")
    return lines


def pooled(groups: dict[tuple, list[dict]]) -> list[str]:
    """The lexicon paper's Tatoeba BLEU (x 100, references pooled by source) on full test and 1-shot items."""
    lines: list[str] = []
    emit = lines.append
    emit("\n| config | split | seeds | BLEU full | BLEU 1-shot (items) | paper full / 1-shot |")
    emit("|---|---|---|---|---|---|")
    for (config, overrides, split), all_rs in sorted(groups.items()):
        rs = sorted(
            (r for r in all_rs if not r.get("diverged") and "pooled_bleu" in r["metrics"]), key=lambda r: r["seed"]
        )
        if not rs:
            continue
        full = [100 * score(r, "pooled_bleu.full") for r in rs]
        shot = [100 * score(r, "pooled_bleu.1-shot") for r in rs]
        items = rs[0]["metrics"]["pooled_bleu"]["1-shot"]["n"]
        shown = f"`{config}`" + "".join(f" `{o}`" for o in overrides)
        emit(
            f"| {shown} | {split} | {', '.join(str(r['seed']) for r in rs)} | {format_mean_sd(full, 2)} "
            f"| {format_mean_sd(shot, 2)} ({items}) | {PAPER_BLEU.get(paper_key(config), '')} |"
        )
    return lines


def per_category(groups: dict[tuple, list[dict]]) -> list[str]:
    """Exact match per category (COGS's 21 generalisation types), a column per config, mean ± sd over seeds: where a
    model's gap to the paper lies."""
    lines: list[str] = []
    emit = lines.append
    by_split: dict[str, dict] = defaultdict(dict)
    for (config, overrides, split), all_rs in sorted(groups.items()):
        rs = [r for r in all_rs if not r.get("diverged") and (r["metrics"] or {}).get("per_category")]
        if rs:
            by_split[split][(config, overrides)] = rs
    for split, columns in sorted(by_split.items()):
        cats = sorted({c for rs in columns.values() for r in rs for c in r["metrics"]["per_category"]["exact_match"]})
        if len(cats) < 2:
            continue
        names = [
            " ".join(
                [f"`{paper_key(c)[1]}`"] + [f"`{o}`" for o in o_ if "max_steps" not in o and "valid_every" not in o]
            )
            + f" ({len(rs)} seed{'s' if len(rs) > 1 else ''})"
            for (c, o_), rs in columns.items()
        ]
        emit(f"\nExact match per category, {split} split:\n")
        emit("| category | " + " | ".join(names) + " |")
        emit("|---|" + "---|" * len(names))
        for cat in cats:
            cells = []
            for rs in columns.values():
                xs = [
                    r["metrics"]["per_category"]["exact_match"][cat]
                    for r in rs
                    if cat in r["metrics"]["per_category"]["exact_match"]
                ]
                cells.append(format_mean_sd(xs) if xs else "-")
            emit(f"| {cat} | " + " | ".join(cells) + " |")
    return lines


def command(
    files: list[str] = typer.Argument(..., help="records of structseq sweep (JSON lines), one or more files"),
    curve: list[str] = typer.Option(
        [], "--curve", help="learning-curve records (structseq sweep --curve-out), one or more files"
    ),
    plot: Optional[str] = typer.Option(None, "--plot", help="draw the learning curve into this PNG file"),
    curve_metric: str = typer.Option(
        "exact_match",
        "--curve-metric",
        help="the curve's score: a report key or a dotted path (pooled_bleu.full: Tatoeba's paper BLEU)",
    ),
    per_run: bool = typer.Option(False, "--per-run", help="also list every run (seed, score, wall times)"),
    headline: bool = typer.Option(
        False, "--headline", help="only the README's compact table: test/gen exact match per model, paper beside"
    ),
    curve_only: bool = typer.Option(False, "--curve-only", help="only the learning-curve table (with --curve)"),
    per_category: bool = typer.Option(
        False, "--per-category", help="only the exact match per category (records with categories, e.g. COGS gen)"
    ),
    format: str = FORMAT,
) -> argparse.Namespace:
    """Mean ± sd over seeds per config and test split, with the paper's number where there is one. A seed
    recorded twice counts once (the same scores: a warning; other scores: an error naming both records).

    Example: structseq report results results/lexicon/budget-runs.jsonl --curve
    results/lexicon/budget-runs-curve.jsonl --plot curve.png"""
    return argparse.Namespace(**locals())


def once_per_seed(records: list[Record]) -> list[Record]:
    """Each system's seed once: one record per (config, overrides, split, seed). `structseq sweep` records a run
    once, but records written before it refused `--seeds 1 1`, or two files that both hold one run, would
    average a seed twice. A repeat whose outcome (its metrics, or its divergence) equals the first record's is
    left out with a warning naming both; one whose outcome differs is an error naming both, as which of them is
    the run's is the user's call."""
    kept: dict[tuple, Record] = {}
    for r in records:
        overrides = tuple(r.get("overrides", []))
        first = kept.setdefault((r["config"], overrides, r["split"], r["seed"]), r)
        if first is r:
            continue
        both = f"{first.path}:{first.line} and {r.path}:{r.line}"
        what = f"seed {r['seed']} of `{' '.join((r['config'], *overrides))}` on {r['split']}"
        if (first.get("metrics"), first.get("diverged")) != (r.get("metrics"), r.get("diverged")):
            raise StructseqError(
                f"{both}: {what} is recorded twice with different scores; a seed counts once: remove the record "
                "that is not the run's"
            )
        warnings.warn(f"{both}: {what} is recorded twice (the same scores): counted once", stacklevel=2)
    return list(kept.values())


def render(a: argparse.Namespace) -> str:
    if a.curve_only and not a.curve:
        raise StructseqError("--curve-only needs --curve")
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in once_per_seed(read_jsonl_files(a.files)):
        groups[(r["config"], tuple(r.get("overrides", [])), r["split"])].append(r)
    if a.headline:
        return "\n".join(headline(groups))
    if a.curve_only:
        return "\n".join(curve(a.files, a.curve, a.plot, a.curve_metric)[0])
    if a.per_category:
        return "\n".join(per_category(groups))
    lines: list[str] = []
    emit = lines.append
    emit("| config | split | seeds | exact match | token acc. | BLEU | train wall (min, median) | updates | paper |")
    emit("|---|---|---|---|---|---|---|---|---|")
    for (config, overrides, split), all_rs in sorted(groups.items()):
        rs = sorted((r for r in all_rs if not r.get("diverged")), key=lambda r: r["seed"])
        lost = sorted(r["seed"] for r in all_rs if r.get("diverged"))
        seeds = (", ".join(str(r["seed"]) for r in rs) or "none") + _old_beam(all_rs)
        if lost:  # diverged seeds (non-finite training loss) are listed, not averaged in
            seeds += f" (diverged: {', '.join(map(str, lost))})"
        if not rs:
            emit(f"| `{config}` | {split} | {seeds} | - | - | - | - | {all_rs[0]['steps']} | |")
            continue
        em = [r["metrics"]["exact_match"]["score"] for r in rs]
        ta = [r["metrics"]["token_accuracy"]["score"] for r in rs]
        bl = [r["metrics"]["bleu"]["score"] for r in rs]
        fmt = format_mean_sd
        key = paper_key(config)
        wall = statistics.median(r["train_wall_s"] for r in rs) / 60  # median: robust to a mis-timed run
        shown = f"`{config}`" + "".join(f" `{o}`" for o in overrides if "max_steps" not in o and "valid_every" not in o)
        emit(
            f"| {shown} | {split} | {seeds} | {fmt(em)} | {fmt(ta)} | {fmt(bl, 1)} "
            f"| {wall:.0f} | {rs[0]['steps']} | {PAPER.get(key, '') if split == paper_split(key[0]) else ''} |"
        )
    if a.per_run:
        emit("\n| run | seed | split | exact match | train wall (s) | eval wall (s) | updates | commit |")
        emit("|---|---|---|---|---|---|---|---|")
        for (config, overrides, split), rs in sorted(groups.items()):
            for r in sorted(rs, key=lambda r: r["seed"]):
                if r.get("diverged"):
                    emit(
                        f"| `{Path(r['run_dir']).name}` | {r['seed']} | {split} | diverged at update "
                        f"{r['diverged']['step']} | | | {r['steps']} | {r.get('git', '')} |"
                    )
                    continue
                emit(
                    f"| `{Path(r['run_dir']).name}` | {r['seed']} | {split} | {r['metrics']['exact_match']['score']:.4f} "
                    f"| {r['train_wall_s']:.0f} | {r['eval_wall_s']:.0f} | {r['steps']} | {r.get('git', '')} |"
                )
    if any("pooled_bleu" in (r.get("metrics") or {}) for rs in groups.values() for r in rs):
        lines += pooled(groups)
    noted = False
    if a.curve:
        curve_lines, noted = curve(a.files, a.curve, a.plot, a.curve_metric)
        lines += curve_lines
    if not noted and any(_old_beam(rs) for rs in groups.values()):
        emit(OLD_BEAM_NOTE)
    return "\n".join(lines)
