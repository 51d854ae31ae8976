"""Command-line interface: a thin layer over `structseq.api` and the data registry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from structseq.cli import compose, context, lexicon
from structseq.cli.average import average as average_command
from structseq.cli.compare import compare as compare_command
from structseq.cli.config import config as config_command
from structseq.cli.evaluate import category_columns, metric_rows, print_metrics  # noqa: F401 (re-exported)
from structseq.cli.evaluate import evaluate as evaluate_command
from structseq.cli.evaluate import predict as predict_command
from structseq.cli.experiments import plan as plan_command
from structseq.cli.experiments import sweep as sweep_command
from structseq.cli.export import export as export_command
from structseq.cli.many import train_many as train_many_command
from structseq.cli.options import DataRoot, stdout_console
from structseq.cli.plot import plot as plot_command
from structseq.cli.report import PASS_THROUGH
from structseq.cli.report import report as report_command
from structseq.cli.score import score as score_command
from structseq.errors import StructseqError

app = typer.Typer(
    help="structseq: structure-aware sequence transduction.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
data_app = typer.Typer(help="List and inspect the named datasets.", no_args_is_help=True)
app.add_typer(data_app, name="data")
app.add_typer(lexicon.app, name="lexicon")
app.add_typer(compose.app, name="compose")
app.add_typer(context.app, name="context")
app.command("config")(config_command)
app.command("export")(export_command)
app.command("plot")(plot_command)
app.command("average")(average_command)
app.command("evaluate")(evaluate_command)
app.command("predict")(predict_command)
app.command("score")(score_command)
app.command("compare")(compare_command)
app.command("train-many")(train_many_command)
app.command("sweep")(sweep_command)
app.command("plan")(plan_command)
app.command("report", context_settings=PASS_THROUGH, add_help_option=False)(report_command)
console = stdout_console()


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
        rows.append(
            {"name": ds.name, "source": ds.source, "splits": sizes, "description": ds.description, "note": ds.note}
        )
    if as_json:
        print(json.dumps(rows, indent=1))
        return
    table = Table(title=f"datasets (data root: {root})")
    for col in ("name", "splits (examples)", "source", "description"):
        table.add_column(col, no_wrap=col == "name")
    for r in rows:
        splits = ", ".join(f"{s} {n if n is not None else 'missing'}" for s, n in r["splits"].items())
        table.add_row(
            r["name"], splits, r["source"], r["description"] + (f" [dim]({r['note']})[/]" if r["note"] else "")
        )
    console.print(table)


@data_app.command("show")
def data_show(
    name: str,
    split: str = typer.Option("train", "--split", "-s"),
    n: int = typer.Option(5, "-n", min=0, help="examples to show (>= 0)"),
    data_root: Optional[Path] = DataRoot,
    columns: Optional[str] = typer.Option(
        None, "--columns", help="a TSV file's columns, comma-separated, as data.columns (e.g. source,target,-)"
    ),
    field: list[str] = typer.Option(
        [], "--field", help="a JSON Lines file's FIELD=KEY, as data.fields (repeatable; -=KEY,... drops keys)"
    ),
):
    """Print the first N examples of a dataset split (or of a data file)."""
    from structseq.data.registry import load_dataset

    fields = {}
    for item in field:
        if "=" not in item:
            raise StructseqError(f"--field {item!r}: give FIELD=KEY, e.g. --field source=utterance")
        k, v = item.split("=", 1)
        fields[k.strip()] = v.strip()
    cols = [c.strip() for c in columns.split(",")] if columns else None
    examples = load_dataset(name, split, data_root, columns=cols, fields=fields or None)
    title = f"{name}/{split}: {len(examples)} examples"
    table = Table(title=title, min_width=min(len(title), console.width))  # the title on one line where it fits
    shown = examples[:n]
    extra = [
        (column, get)
        for column, get in (
            ("context", lambda e: " ".join(e.context or ())),
            ("category", lambda e: e.category or ""),
        )
        if any(get(e) for e in shown)
    ]  # the columns the examples have: a context-aware dataset's context, a per-category split's category
    for column in ("source", "target", *(c for c, _ in extra)):
        table.add_column(column)
    for e in shown:
        table.add_row(e.source_text, e.target_text, *(get(e) for _, get in extra))
    console.print(table)


TRAIN_HELP = "\n\n".join(
    [
        "Train a model from a config file; metrics go to RUN_DIR/metrics.jsonl.",
        "Every config value is checked when the config is loaded: an error names the key and its valid range or "
        "choices.",
        "A run holds a lock on RUN_DIR for its whole life (a second run into it is refused, naming the owner) and "
        "never overwrites files it did not create (an existing file as --out, your own config.yaml in -o .).",
        "Ctrl-C or SIGTERM finishes the current update, saves checkpoints/last.pt and exits with 128 + the signal "
        "number; --resume RUN_DIR then continues bit-exactly. --resume leaves a finished run (train.max_steps "
        "reached, or early stopping) unchanged; --resume RUN_DIR --set train.max_steps=N extends its budget, and "
        "the runtime settings train.threads, train.device, train.log_every, train.tensorboard and train.wandb may change (recorded in "
        "RUN_DIR/config-history.jsonl); data files whose content changed since the run started are refused.",
    ]
)


@app.command(help=TRAIN_HELP)
def train(
    config: Optional[Path] = typer.Argument(None, help="YAML config file"),
    set_: list[str] = typer.Option(
        [],
        "--set",
        help="override, e.g. --set optim.lr=1e-3 (repeatable); with "
        "--resume only train.max_steps=N (extend the run) and runtime settings "
        "(train.threads, train.device, train.log_every, train.tensorboard, train.wandb)",
    ),
    out: Optional[Path] = typer.Option(
        None, "--out", "-o", help="run directory, new or one a run created [default: runs/<config name>]"
    ),
    seed: Optional[int] = typer.Option(None, "--seed", help="shortcut for --set train.seed=N"),
    resume: Optional[Path] = typer.Option(
        None,
        "--resume",
        help="continue the interrupted run in this directory with its saved config (no CONFIG, --seed or other --set)",
    ),
    data_root: Optional[Path] = DataRoot,
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no progress bar"),
):
    from structseq import api

    if resume is not None:
        extra = [
            name
            for name, given in (
                ("a CONFIG argument", config is not None),
                ("--seed", seed is not None),
                ("--out", out is not None and out.resolve() != resume.resolve()),
            )
            if given
        ]
        if extra:
            raise StructseqError(
                f"--resume continues {resume} with its saved config: {' and '.join(extra)} cannot "
                "be combined with it (--set may extend train.max_steps or change runtime settings)"
            )
        summary = api.resume(resume, overrides=set_, data_root=data_root, show_progress=not quiet)
        out = resume
    else:
        if config is None:
            raise typer.BadParameter("give a CONFIG file (or --resume RUN_DIR)")
        out = out or Path("runs") / config.stem
        summary = api.train(config, out, overrides=set_, seed=seed, data_root=data_root, show_progress=not quiet)
    if summary["stopped"] == "already_finished":
        why = (
            "it stopped early (train.patience)"
            if summary["reason"] == "early_stopping"
            else f"it reached train.max_steps ({summary['steps']} updates)"
        )
        more = "" if summary["reason"] == "early_stopping" else "; to train longer: --set train.max_steps=N"
        console.print(f"{out} already finished: {why}; nothing changed{more}")
        return
    console.print(f"[bold]{summary['stopped']}[/] after {summary['steps']} updates; run directory: {out}")
    if summary["stopped"] == "interrupted":
        import signal

        console.print(f"continue with: structseq train --resume {out}")
        raise typer.Exit(128 + signal.Signals[summary.get("signal", "SIGINT")].value)


@app.command()
def demo(out: Path = typer.Option(Path("runs/demo"), "--out", "-o"), steps: Optional[int] = typer.Option(None)):
    """Train and evaluate small models on an embedded compositional split (no data files needed)."""
    from structseq.demo import run_demo

    run_demo(out, steps=steps)


def main() -> None:
    """The error boundary of every command (`structseq.errors.run_cli`): a problem with the user's input or
    environment (a StructseqError, a file missing or unreadable, a full disk, text not UTF-8, broken JSON) is one
    line `error: ...` and exit status 2; a genuine bug keeps its traceback."""
    from structseq.errors import run_cli

    raise SystemExit(run_cli(app))
