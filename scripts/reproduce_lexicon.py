"""Reproduce the lexical-translation tables of Akyürek & Andreas (2021) and put the paper's numbers beside ours.

    python scripts/reproduce_lexicon.py table2 --datasets colors --seeds 16      # Colors column of Table 2
    python scripts/reproduce_lexicon.py table5 --budget cpu --seeds 2           # COGS ablation, CPU budget
    python scripts/reproduce_lexicon.py table2 --report-only                   # tables from finished runs

Tables: table2 (exact match: LSTM, + copy, + lexicon Simple / PMI / IBMM2 / Bayesian, plus our IBM Model 2
row; Colors, SCAN jump, SCAN around_right, COGS gen), table4 (Tatoeba en-zh BLEU, full test and the
"1-shot" items whose source has a token seen once in train; NLTK corpus BLEU with the references of equal
sources pooled over train, dev and test, as the paper's code does), table5 (COGS gen: Uniform, Simple,
Soft, Learned lexicons).

`--budget paper` trains with the shipped configs (the paper's settings; hours per SCAN/COGS run on CPU).
`--budget cpu` keeps each config's head but takes the model size, optimiser batch and number of updates
(and, where given, the test splits and decoding batch) from the dataset's `lstm-cpu.yaml` (Tatoeba, which
has none, uses COGS's); `--budget cpu-short` does the same from `lstm-cpu-short.yaml` (about 6-10 minutes
of one core per run, the budget of RESULTS.md's SCAN / COGS / Tatoeba columns). Colors is cheap and always
uses the paper budget. The LSTM baseline row adds `model.combine_feed=true`, so every row has the reference
code's decoder and differs only in the output layer. Runs go to `<runs>/<budget>/`, one JSON line per
(run, split) to `<out>/runs.jsonl` (see `one`), the tables to
`<out>/<table>-<budget>.md` and `.json`. Recorded runs are skipped and an interrupted one resumes, so the
command can be repeated, e.g. with more seeds. Every run uses `train.threads=1` unless `--threads` says
otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import yaml

from structseq.experiments import sweep
from structseq.metrics.significance import format_mean_sd

ROOT = Path(__file__).resolve().parents[1]


def one(config: str, seed: int, runs: str, out: str, overrides: list[str]) -> str:
    """`structseq sweep`'s `one` under the run names these tables were made with (no override tag)."""
    return sweep.one(config, seed, runs, out, overrides, name=sweep.run_name(config, seed))


# The paper's numbers (docs: /work/shared/notes/lexical-translation.md; Table 2, 4, 5). None = not reported.
PAPER_SEEDS = {"colors": 16, "scan-jump": 10, "scan-around-right": 10, "cogs": 10, "tatoeba-en-zh": 5}
TABLES = {
    "table2": {
        "metric": "exact_match",
        "split": {"cogs": "gen"},
        "datasets": ["colors", "scan-jump", "scan-around-right", "cogs"],
        "rows": [
            ("LSTM", "lstm", [0.00, 0.00, 0.09, 0.51]),
            ("LSTM + copy", "lstm-copy", [None, None, None, 0.66]),
            ("+ Lex Simple", "lstm-lex-simple", ["0.79 ± 0.02", "0.92 ± 0.17", "0.95 ± 0.01", "0.82 ± 0.01"]),
            ("+ Lex PMI", "lstm-lex-pmi", [0.41, 0.95, 0.02, 0.82]),
            ("+ Lex IBMM2 (fast_align = IBM 1)", "lstm-lex-ibm1", [0.79, 0.79, 0.00, 0.82]),
            ("+ Lex Bayesian", "lstm-lex-bayesian", [0.51, 0.82, 0.02, 0.70]),
            ("+ Lex IBM Model 2 (ours, diagonal)", "lstm-lex-ibm2", [None, None, None, None]),
        ],
    },
    "table4": {
        "metric": "bleu_pooled",
        "split": {},
        "datasets": ["tatoeba-en-zh"],
        "columns": ["full", "1-shot"],
        "rows": [
            ("LSTM", "lstm", ["24.18 ± 0.37", "17.47 ± 0.64"]),
            ("+ Lex PMI", "lstm-lex-pmi", ["24.36 ± 0.09", "18.46 ± 0.13"]),
            ("+ Lex IBMM2 (fast_align = IBM 1)", "lstm-lex-ibm1", ["25.49 ± 0.42", "19.62 ± 0.64"]),
            ("+ Lex Simple", "lstm-lex-simple", ["24.35 ± 0.09", "18.46 ± 0.19"]),
        ],
    },
    "table5": {
        "metric": "exact_match",
        "split": {"cogs": "gen"},
        "datasets": ["cogs"],
        "rows": [
            ("LSTM", "lstm", ["0.51 ± 0.06"]),
            ("Uniform (learned)", "lstm-lex-uniform", ["0.56 ± 0.07"]),
            ("Simple", "lstm-lex-simple", ["0.82 ± 0.01"]),
            ("Soft (tau 0.1)", "lstm-lex-soft", ["0.83 ± 0.00"]),
            ("Learned (from Simple)", "lstm-lex-learned", ["0.83 ± 0.01"]),
        ],
    },
}
BUDGET_KEYS = {
    "model": ("embed_dim", "hidden_dim"),
    "optim": ("lr", "warmup", "max_tokens", "batch_size", "accumulate"),
    "train": ("max_steps", "valid_every"),
    "data": ("test",),
    "decode": ("batch_size", "max_len_b"),
}
#: budget -> the per-dataset config its keys come from (Tatoeba, which has no lstm-cpu.yaml, falls back to COGS's).
BUDGET_FILES = {"cpu": "lstm-cpu.yaml", "cpu-short": "lstm-cpu-short.yaml"}


def budget_overrides(dataset: str, budget: str) -> list[str]:
    """`key=value` overrides that put a config on the CPU budget of the dataset's lstm-cpu.yaml."""
    if budget == "paper" or dataset == "colors":
        return []
    path = ROOT / "configs" / dataset / BUDGET_FILES[budget]
    if not path.exists():
        path = ROOT / "configs" / "cogs" / BUDGET_FILES[budget]
    cpu = yaml.safe_load(path.read_text())
    return [
        f"{section}.{k}={json.dumps(cpu[section][k])}"
        for section, keys in BUDGET_KEYS.items()
        for k in keys
        if k in cpu.get(section, {})
    ]


def plan(table: str, datasets: list[str], rows: list[str], seeds: int | None, budget: str, threads: int) -> list[tuple]:
    jobs = []
    for ds in datasets:
        n = seeds if seeds is not None else PAPER_SEEDS[ds]
        for stem in rows:
            config = ROOT / "configs" / ds / f"{stem}.yaml"
            overrides = budget_overrides(ds, budget) + [f"train.threads={threads}"]
            if stem == "lstm":  # the baseline gets the same (reference) decoder as the lexical models
                overrides.append("model.combine_feed=true")
            jobs += [(str(config), seed, overrides) for seed in range(1, n + 1)]
    return jobs


def pooled_bleu(run_dir: Path) -> dict[str, float]:
    """Tatoeba BLEU (x 100) on the full test set and on its 1-shot items, references pooled by source."""
    import csv

    from structseq.data.registry import get_dataset, load_dataset
    from structseq.metrics import MetricInputs, compute_metric

    with open(run_dir / "predictions" / "test.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\"))
    inputs = MetricInputs(
        [r["hypothesis"] for r in rows],
        [tuple(r["reference"].split()) for r in rows],
        sources=[tuple(r["source"].split()) for r in rows],
        dataset="tatoeba-en-zh",
        split="test",
        dataset_spec=get_dataset("tatoeba-en-zh"),
        load_split=lambda split: load_dataset("tatoeba-en-zh", split),
    )
    report = compute_metric("pooled_bleu", inputs)
    return {col: 100 * report[col]["score"] for col in ("full", "1-shot")}


def collect(table: str, datasets: list[str], runs: Path, results: Path) -> dict:
    """Scores per (row, dataset/column) from the results file: the last record of each run directory."""
    spec = TABLES[table]
    last: dict[tuple[str, str], dict] = {}
    if results.exists():
        for line in results.read_text().splitlines():
            rec = json.loads(line)
            last[(rec["run_dir"], rec["split"])] = rec
    cells: dict[tuple[str, str], list[float]] = defaultdict(list)
    for (run_dir, split), rec in sorted(last.items()):
        if Path(run_dir).parent != runs:
            continue
        ds, stem = Path(rec["config"]).parent.name, Path(rec["config"]).stem
        if ds not in datasets or split != spec["split"].get(ds, "test"):
            continue
        if spec["metric"] == "bleu_pooled":
            for col, v in pooled_bleu(Path(run_dir)).items():
                cells[(stem, col)].append(v)
        else:
            cells[(stem, ds)].append(rec["metrics"][spec["metric"]]["score"])
    return cells


def render(
    table: str, datasets: list[str], cells: dict, budget: str, rows: list[str] | None = None
) -> tuple[str, dict]:
    """The Markdown table (a heading, then the table) and its JSON; `rows`: only these configs."""
    spec = TABLES[table]
    columns = spec.get("columns", spec["datasets"])
    shown = [c for c in columns if spec.get("columns") or c in datasets]
    digits = 2 if spec["metric"] == "bleu_pooled" else 3
    head = "| model | " + " | ".join(f"{c} (ours) | {c} (paper)" for c in shown) + " |"
    lines = [
        f"### {table}: {spec['metric']} (mean ± sd over seeds), budget {budget}",
        "",
        head,
        "|---" * (1 + 2 * len(shown)) + "|",
    ]
    data = {"table": table, "budget": budget, "metric": spec["metric"], "rows": []}
    for label, stem, paper in (r for r in spec["rows"] if not rows or r[1] in rows):
        row, rec = [label], {"model": label, "config": stem, "cells": {}}
        for c in shown:
            vals = cells.get((stem, c), [])
            ours = "-"
            if vals:
                ours = f"{format_mean_sd(vals, digits)} (n={len(vals)})"
            p = paper[columns.index(c)]
            row += [ours, "-" if p is None else p if isinstance(p, str) else f"{p:.2f}"]
            rec["cells"][c] = {"ours": vals, "paper": p}
        lines.append("| " + " | ".join(row) + " |")
        data["rows"].append(rec)
    return "\n".join(lines) + "\n", data


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("table", choices=sorted(TABLES))
    p.add_argument("--datasets", nargs="+", help="columns to run (default: all of the table's datasets)")
    p.add_argument("--rows", nargs="+", help="configs (rows) to run, e.g. lstm lstm-lex-simple (default: all)")
    p.add_argument("--seeds", type=int, help="seeds 1..N per config (default: the paper's count per dataset)")
    p.add_argument("--budget", choices=("cpu", "cpu-short", "paper"), default="paper")
    p.add_argument("--jobs", type=int, default=1, help="runs in parallel (each with --threads threads)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="results/lexicon")
    p.add_argument("--runs", default="runs/lexicon")
    p.add_argument("--report-only", action="store_true", help="only write the tables from finished runs")
    p.add_argument(
        "--print",
        action="store_true",
        help="only print the table of the recorded runs (of --rows, "
        "--datasets), writing nothing: RESULTS.md's generated blocks",
    )
    a = p.parse_args(argv)
    datasets = a.datasets or TABLES[a.table]["datasets"]
    unknown = sorted(set(datasets) - set(TABLES[a.table]["datasets"]))
    if unknown:
        p.error(f"{a.table} has no dataset {', '.join(unknown)}; choices: {', '.join(TABLES[a.table]['datasets'])}")
    stems = [stem for _, stem, _ in TABLES[a.table]["rows"]]
    rows = a.rows or stems
    if set(rows) - set(stems):
        p.error(f"{a.table} has no row {', '.join(sorted(set(rows) - set(stems)))}; choices: {', '.join(stems)}")
    out, runs = Path(a.out), Path(a.runs) / a.budget
    out.mkdir(parents=True, exist_ok=True)
    results = out / "runs.jsonl"
    if a.print:
        text, _ = render(a.table, datasets, collect(a.table, datasets, runs, results), a.budget, a.rows)
        print(text.split("\n", 2)[2], end="")
        return
    if not a.report_only:
        recorded = {json.loads(line)["run_dir"] for line in results.open()} if results.exists() else set()
        jobs = [
            (c, s, o)
            for c, s, o in plan(a.table, datasets, rows, a.seeds, a.budget, a.threads)
            if str(runs / sweep.run_name(c, s)) not in recorded
        ]
        with ProcessPoolExecutor(a.jobs) as pool:
            futures = [pool.submit(one, c, s, str(runs), str(results), o) for c, s, o in jobs]
            for f in futures:
                print(f.result(), flush=True)
    text, data = render(a.table, datasets, collect(a.table, datasets, runs, results), a.budget)
    stem = out / f"{a.table}-{a.budget}"
    from structseq.outputs import atomic_write

    atomic_write(stem.with_suffix(".md"), text)
    atomic_write(stem.with_suffix(".json"), json.dumps(data, indent=1))
    print(text + f"\nwritten: {stem}.md, {stem}.json")


if __name__ == "__main__":
    from structseq.errors import run_cli

    sys.exit(run_cli(main))
