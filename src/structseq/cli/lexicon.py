"""`structseq lexicon ...`: learn, show and plot lexicons. A thin layer over `structseq.lexicon`."""

from __future__ import annotations

import inspect
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from structseq.cli.options import DataRoot, Overwrite
from structseq.errors import ConfigError, StructseqError

#: Sources printed by `learn` without -o.
TABLE_ROWS = 50

app = typer.Typer(
    help="Learn, inspect and plot token-level lexicons (Akyürek & Andreas 2021).",
    no_args_is_help=True,
    add_completion=False,
)


def _fail(error: Exception) -> None:
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(2)


@app.command()
def learn(
    dataset: str = typer.Argument(
        ...,
        help="A registered dataset name (e.g. colors, scan-around-right, cogs, "
        "tatoeba-en-zh) or a file: source<TAB>target TSV, SCAN IN:/OUT: "
        "text, or SRC,TGT parallel files.",
    ),
    method: str = typer.Option("simple", "--method", "-m", help="simple, pmi, ibm1, ibm2 or bayesian."),
    split: str = typer.Option("train", help="Split of a named dataset."),
    data_root: Optional[Path] = DataRoot,
    output: Optional[Path] = typer.Option(
        None, "--output", "-o", help="Write the lexicon JSON here; without it, print a table."
    ),
    epsilon: Optional[int] = typer.Option(
        None, help="simple: drop targets of more than this many sources (default 3)."
    ),
    rule: Optional[str] = typer.Option(None, help="simple: 'reference' (authors' code, default) or 'paper'."),
    iterations: Optional[int] = typer.Option(None, help="ibm1/ibm2: EM passes as fast_align counts them (default 5)."),
    symmetrisation: Optional[str] = typer.Option(
        None, help="ibm1/ibm2: intersect (default), union, forward or reverse."
    ),
    top_k: Optional[int] = typer.Option(None, help="pmi: keep each source's k best targets."),
    samples: Optional[int] = typer.Option(None, help="bayesian: recorded states per chain (default 100)."),
    runs: Optional[int] = typer.Option(None, help="bayesian: independent chains (default 5)."),
    seed: Optional[int] = typer.Option(None, help="bayesian: random seed (default 0)."),
    overwrite: bool = Overwrite,
) -> None:
    """Learn a lexicon from a dataset's training pairs. The output is never one of the data files read, nor a
    file structseq did not write (without --overwrite)."""
    from structseq.data.registry import load_dataset
    from structseq.lexicon import format_table, get_learner
    from structseq.outputs import Outputs
    from structseq.textio import recording_reads

    given = {
        "epsilon": epsilon,
        "rule": rule,
        "iterations": iterations,
        "symmetrisation": symmetrisation,
        "top_k": top_k,
        "samples": samples,
        "runs": runs,
        "seed": seed,
    }
    reads: list[Path] = []
    outputs = Outputs([dataset, reads], overwrite=overwrite)
    try:
        if output is not None:
            outputs.check(output)
        learner = get_learner(method)
        accepted = set(inspect.signature(learner).parameters)
        settings = {k: v for k, v in given.items() if v is not None}
        wrong = sorted(k for k in settings if k not in accepted)
        if wrong:
            raise ConfigError(
                f"{', '.join('--' + k.replace('_', '-') for k in wrong)} does not apply to method '{method}'"
            )
        with recording_reads() as read:
            examples = load_dataset(dataset, split=split, data_root=data_root)
        reads.extend(read)
        start = time.perf_counter()
        lexicon = learner(examples, **settings)
        seconds = time.perf_counter() - start
    except StructseqError as e:
        _fail(e)
    lexicon.settings["data"] = dataset if Path(dataset).exists() else f"{dataset}:{split}"
    typer.echo(
        f"{method}: {lexicon.num_entries} entries over {len(lexicon)} source tokens from "
        f"{len(examples)} pairs in {seconds:.2f}s",
        err=True,
    )
    if output is None:
        sys.stdout.write(format_table(lexicon, limit=TABLE_ROWS))
        if len(lexicon) > TABLE_ROWS:
            typer.echo(f"(first {TABLE_ROWS} sources shown; write the whole lexicon with -o FILE)", err=True)
    else:
        try:
            lexicon.save(output, outputs)
        except StructseqError as e:
            _fail(e)
        typer.echo(f"wrote {output}", err=True)


@app.command()
def show(
    file: Path = typer.Argument(
        ..., help="A lexicon JSON file, or the run directory of a lexical-translation model: its trained matrix L."
    ),
    top: int = typer.Option(3, help="Targets shown per source."),
    limit: Optional[int] = typer.Option(None, help="Show at most this many sources."),
    plain: bool = typer.Option(False, "--plain", help="Tab-separated source, target, score lines."),
    sources: Optional[str] = typer.Option(
        None,
        help="Comma-separated source tokens: show only these (a run's "
        "plain copies x -> x included) and name those without an "
        "entry.",
    ),
    min_prob: float = typer.Option(0.05, help="A run directory: the least probability of L shown."),
) -> None:
    """Print a lexicon (a file, or the trained L of a lexical-translation run) as a table."""
    from structseq.lexicon import Lexicon, format_table

    wanted = [s for s in (sources or "").split(",") if s]
    try:
        if file.is_dir():
            from structseq.api import load_run

            lexicon = load_run(file, device="cpu").lexicon(min_prob, keep_copies=bool(wanted))
        else:
            lexicon = Lexicon.load(file)
    except StructseqError as e:
        _fail(e)
    if wanted:
        lexicon = Lexicon({s: lexicon[s] for s in wanted if s in lexicon}, lexicon.method, lexicon.settings)
    sys.stdout.write(format_table(lexicon, top=top, limit=limit, plain=plain))
    missing = [s for s in wanted if s not in lexicon]
    if missing:
        what = (
            f"no cell of L >= {min_prob:g} (a row spread by mutual exclusivity, or no translation)"
            if file.is_dir()
            else "no entry"
        )
        typer.echo(f"{what}: {', '.join(missing)}", err=plain)


@app.command()
def plot(
    file: Path = typer.Argument(..., help="A lexicon JSON file."),
    output: Path = typer.Option(Path("lexicon.png"), "--output", "-o", help="Image file (png, pdf, svg)."),
    tau: Optional[float] = typer.Option(
        None, help="Show each row's softmax(score / tau) instead of raw scores (the paper's figures use 0.1)."
    ),
    max_sources: int = typer.Option(40, help="Rows shown: the sources with the highest scores."),
    max_targets: int = typer.Option(60, help="Columns shown: the rows' best targets, then the highest scores."),
    sources: Optional[str] = typer.Option(None, help="Comma-separated source tokens to show instead."),
    overwrite: bool = Overwrite,
) -> None:
    """Draw a lexicon as a source x target heatmap (never over the lexicon file, nor over a file structseq did
    not write without --overwrite)."""
    from structseq.lexicon import Lexicon, plot_lexicon
    from structseq.outputs import Outputs

    try:
        lexicon = Lexicon.load(file)
        rows = None
        if sources:
            rows = [s for s in sources.split(",") if s]
            missing = [s for s in rows if s not in lexicon]
            if missing:
                raise ConfigError(f"not in the lexicon: {', '.join(missing)}")
        path = plot_lexicon(
            lexicon,
            output,
            sources=rows,
            tau=tau,
            max_sources=max_sources,
            max_targets=max_targets,
            outputs=Outputs([file], overwrite=overwrite),
        )
    except StructseqError as e:
        _fail(e)
    typer.echo(f"wrote {path}", err=True)
