"""Command-line interface: a thin layer over `structseq.api` and the data registry."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from structseq.cli import compose, context, lexicon
from structseq.cli.options import Checkpoint, DataRoot
from structseq.errors import StructseqError

app = typer.Typer(help="structseq: structure-aware sequence transduction.", no_args_is_help=True,
                  context_settings={"help_option_names": ["-h", "--help"]}, pretty_exceptions_enable=False)
data_app = typer.Typer(help="List and inspect the named datasets.", no_args_is_help=True)
app.add_typer(data_app, name="data")
app.add_typer(lexicon.app, name="lexicon")
app.add_typer(compose.app, name="compose")
app.add_typer(context.app, name="context")
console = Console()


@data_app.command("list")
def data_list(data_root: Optional[Path] = DataRoot, as_json: bool = typer.Option(False, "--json")):
    """Every dataset the toolkit knows, with its splits and their sizes."""
    from structseq.data.registry import datasets
    from structseq.paths import data_root as resolve

    root = resolve(data_root)
    rows = []
    for ds in datasets().values():
        sizes = {}
        for split in ds.splits:
            if split in ds.sizes:
                sizes[split] = ds.sizes[split]
                continue
            try:
                sizes[split] = len(ds.load(split, root))
            except StructseqError:
                sizes[split] = None
        rows.append({"name": ds.name, "source": ds.source, "splits": sizes, "description": ds.description,
                     "note": ds.note})
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    table = Table(title=f"datasets (data root: {root})")
    for col in ("name", "splits (examples)", "source", "description"):
        table.add_column(col)
    for r in rows:
        splits = ", ".join(f"{s} {n if n is not None else 'missing'}" for s, n in r["splits"].items())
        table.add_row(r["name"], splits, r["source"], r["description"] + (f" [dim]({r['note']})[/]" if r["note"] else ""))
    console.print(table)


@data_app.command("show")
def data_show(name: str, split: str = typer.Option("train", "--split", "-s"), n: int = typer.Option(5, "-n"),
              data_root: Optional[Path] = DataRoot):
    """Print the first N examples of a dataset split (or of a data file)."""
    from structseq.data.registry import load_dataset

    examples = load_dataset(name, split, data_root)
    table = Table(title=f"{name}/{split}: {len(examples)} examples")
    table.add_column("source")
    table.add_column("target")
    if any(e.category for e in examples[:n]):
        table.add_column("category")
    for e in examples[:n]:
        table.add_row(e.source_text, e.target_text, *([e.category or ""] if len(table.columns) == 3 else []))
    console.print(table)


TRAIN_HELP = "\n\n".join([
    "Train a model from a config file; metrics go to RUN_DIR/metrics.jsonl.",
    "Every config value is checked when the config is loaded: an error names the key and its valid range or "
    "choices.",
    "A run holds a lock on RUN_DIR for its whole life (a second run into it is refused, naming the owner) and "
    "never overwrites files it did not create (an existing file as --out, your own config.yaml in -o .).",
    "Ctrl-C or SIGTERM finishes the current update, saves checkpoints/last.pt and exits with 128 + the signal "
    "number; --resume RUN_DIR then continues bit-exactly. --resume leaves a finished run (train.max_steps "
    "reached, or early stopping) unchanged; --resume RUN_DIR --set train.max_steps=N extends its budget "
    "(recorded in RUN_DIR/config-history.jsonl).",
])


@app.command(help=TRAIN_HELP)
def train(
    config: Optional[Path] = typer.Argument(None, help="YAML config file"),
    set_: list[str] = typer.Option([], "--set", help="override, e.g. --set optim.lr=1e-3 (repeatable); with "
                                                     "--resume only --set train.max_steps=N (extend the run)"),
    out: Optional[Path] = typer.Option(None, "--out", "-o", help="run directory, new or one a run created "
                                       "[default: runs/<config name>]"),
    seed: Optional[int] = typer.Option(None, "--seed", help="shortcut for --set train.seed=N"),
    resume: Optional[Path] = typer.Option(None, "--resume", help="continue the interrupted run in this directory "
                                          "with its saved config (no CONFIG, --seed or other --set)"),
    data_root: Optional[Path] = DataRoot,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
):
    from structseq import api

    if resume is not None:
        extra = [name for name, given in (("a CONFIG argument", config is not None), ("--seed", seed is not None),
                                          ("--out", out is not None and out.resolve() != resume.resolve()))
                 if given]
        if extra:
            raise StructseqError(f"--resume continues {resume} with its saved config: {' and '.join(extra)} cannot "
                                 "be combined with it (the one change allowed: --set train.max_steps=N)")
        summary = api.resume(resume, overrides=set_, data_root=data_root, show_progress=not quiet)
        out = resume
    else:
        if config is None:
            raise typer.BadParameter("give a CONFIG file (or --resume RUN_DIR)")
        out = out or Path("runs") / config.stem
        summary = api.train(config, out, overrides=set_, seed=seed, data_root=data_root, show_progress=not quiet)
    if summary["stopped"] == "already_finished":
        why = ("it stopped early (train.patience)" if summary["reason"] == "early_stopping"
               else f"it reached train.max_steps ({summary['steps']} updates)")
        more = "" if summary["reason"] == "early_stopping" else "; to train longer: --set train.max_steps=N"
        console.print(f"{out} already finished: {why}; nothing changed{more}")
        return
    console.print(f"[bold]{summary['stopped']}[/] after {summary['steps']} updates; run directory: {out}")
    if summary["stopped"] == "interrupted":
        import signal

        console.print(f"continue with: structseq train --resume {out}")
        raise typer.Exit(128 + signal.Signals[summary.get("signal", "SIGINT")].value)


@app.command()
def evaluate(
    run_dir: Path,
    split: Optional[str] = typer.Option(None, "--split", help="split name, file, or NAME:SPLIT of any registered dataset "
                                                      "(e.g. cognition:cg-test) [default: the config's test split]"),
    beam: Optional[int] = typer.Option(None, "--beam", help="beam size [default: config]"),
    checkpoint: Optional[str] = Checkpoint,
    bleu_tokenize: Optional[str] = typer.Option(None, "--bleu-tokenize", help="sacrebleu tokenizer (13a, zh, none...)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object with every metric"),
    data_root: Optional[Path] = DataRoot,
):
    """Decode a split and report exact match, token accuracy, BLEU (and per-category accuracy; for
    CoGnition also character BLEU and, on cg-test, the compound translation error rate). An empty file, or an
    example longer than the run's data.max_length, is an error naming the file (and line)."""
    from structseq.api import load_run

    run = load_run(run_dir, checkpoint)
    m = run.evaluate(split, beam=beam, data_root=data_root, bleu_tokenize=bleu_tokenize, show_progress=not as_json)
    if as_json:
        print(json.dumps(m))
        return
    print_metrics(m)


def print_metrics(m: dict) -> None:
    table = Table(title=f"{m['dataset']}/{m['split']} ({m['n']} examples, beam {m['beam']}, {m['checkpoint']})")
    table.add_column("metric")
    table.add_column("score", justify="right")
    table.add_column("signature", style="dim")
    def row(key: str, value: dict) -> None:
        score = "-" if value["score"] is None else f"{value['score']:.4f}"
        table.add_row(key, score, value.get("signature", ""))

    for key, value in m.items():  # every metric of the task: a score with its signature
        if isinstance(value, dict) and "score" in value:
            row(key, value)
        elif key != "per_category" and isinstance(value, dict) and value and \
                all(isinstance(v, dict) and "score" in v for v in value.values()):  # e.g. pooled_bleu: full, 1-shot
            for part, v in value.items():
                row(f"{key}.{part}", v)
    if "cter" in m:
        for level in ("instance", "aggregate"):
            table.add_row(f"cter_{level}", f"{m['cter'][level]:.4f}", m["cter"]["signature"])
    console.print(table)
    if m.get("per_category"):
        t = Table(title="exact match per category")
        t.add_column("category")
        t.add_column("n", justify="right")
        t.add_column("exact match", justify="right")
        pc = m["per_category"]
        for cat, score in pc["exact_match"].items():
            t.add_row(cat, str(pc["n"][cat]), f"{score:.4f}")
        console.print(t)
    if "predictions" in m:
        console.print(f"predictions: {m['predictions']}")


@app.command()
def predict(run_dir: Path, beam: Optional[int] = typer.Option(None, "--beam"),
            checkpoint: Optional[str] = Checkpoint):
    """Read input lines on stdin (the task's format: a source; `source<TAB>context` for context-aware models;
    words for a tagger), write one output line each to stdout. Input must be UTF-8; an invalid byte, a reserved
    token (<pad> <s> </s> <unk>) or a line longer than data.max_length is an error naming <stdin>:LINE."""
    from structseq.api import load_run

    from structseq.textio import stdin_lines

    run = load_run(run_dir, checkpoint)
    lines = list(stdin_lines())
    for out in run.predict(lines, beam=beam, where="<stdin>"):
        print(out)


@app.command()
def demo(out: Path = typer.Option(Path("runs/demo"), "--out", "-o"), steps: Optional[int] = typer.Option(None)):
    """Train and evaluate small models on an embedded compositional split (no data files needed)."""
    from structseq.demo import run_demo

    run_demo(out, steps=steps)


def main() -> None:
    try:
        app()
    except StructseqError as e:
        Console(stderr=True).print(f"[bold red]error:[/] {e}")
        raise SystemExit(2) from None
