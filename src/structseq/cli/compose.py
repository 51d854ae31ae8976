"""`structseq compose ...`: thin commands over the compose Python API (same names, same defaults)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from structseq.cli.compose_sharded import Opt, run_sharded, sharded_summary
from structseq.cli.options import OVERWRITE_HELP, DataRoot, MaxN
from structseq.compose.corpus import read_corpora, read_limited, read_sentences, use_data_root, write_tsv
from structseq.compose.degree import DEFAULT_MAX_N, NgramDictionary, score_pool
from structseq.compose.plot import (
    BINNINGS,
    align,
    bleu_difference_by_degree,
    plot_difference,
    read_scores,
    score_difference_by_degree,
)
from structseq.compose.preflight import build_lock
from structseq.compose.select import (
    BuildConfig,
    build_benchmark,
    read_degree_tsv,
    read_uncertainty_tsv,
    write_degree_tsv,
    write_uncertainty_tsv,
)
from structseq.compose.stats import get_tagger, table2_stats
from structseq.compose.uncertainty import MEASURES, load_ensemble, score_ensemble
from structseq.errors import ConfigError, DataError, StructseqError
from structseq.outputs import Outputs

app = typer.Typer(
    help="Detect compositional test examples in a candidate pool relative to a training corpus (ReaCT method).",
    no_args_is_help=True,
)
err = Console(stderr=True)


@app.callback()
def _options(data_root: Optional[Path] = DataRoot) -> None:
    """NAME:SPLIT specs read from --data-root (give it before the command)."""
    use_data_root(data_root)


TrainOpt = Annotated[
    list[Path],
    typer.Option(
        "--train",
        help="Training sentences, one per line, or NAME:SPLIT of a registered dataset (repeat to concatenate).",
    ),
]
MinCountOpt = Annotated[int, typer.Option(help="A word seen fewer times than this in train is OOV.")]
AtomOpt = Annotated[int, typer.Option(help="An n-gram seen more times than this in train is an atom.")]
MaxNOpt = Annotated[int, MaxN]
ColumnOpt = Annotated[Optional[int], typer.Option(help="TSV column holding the sentence (default 0 for .tsv files).")]


@contextmanager
def _progress() -> Iterator:
    """Rich progress bars on stderr; yields a factory (description, total) -> advance callback."""
    columns = (
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=err) as progress:

        def factory(description: str, total: int):
            task = progress.add_task(description, total=total)
            return lambda n: progress.advance(task, n)

        yield factory


def _fail(error: StructseqError) -> None:
    """One line `error: ...` (plain text: never wrapped, brackets in paths never read as markup), exit status 2."""
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(2)


OverwriteOpt = Annotated[bool, typer.Option("--overwrite", help=OVERWRITE_HELP)]


def _outputs(output: Path | None, inputs: list, overwrite: bool) -> Outputs:
    """The command's outputs, `output` checked at once (not an input, not a file structseq did not write unless
    --overwrite), so nothing is computed for an output that would be refused; stdout ("-") is not checked."""
    outputs = Outputs(inputs, overwrite=overwrite)
    if output is not None and str(output) != "-":
        outputs.check(output)
    return outputs


def _read_nonempty(paths: Path | list[Path], column: int | None, what: str) -> list[str]:
    """Sentences of a pool or a training corpus; one without a single non-blank line is an error."""
    return _nonempty(read_corpora(paths if isinstance(paths, list) else [paths], column), paths, what)


def _nonempty(sentences: list[str], paths: Path | list[Path], what: str) -> list[str]:
    if not any(s.strip() for s in sentences):
        names = ", ".join(map(str, paths)) if isinstance(paths, list) else str(paths)
        raise DataError(f"the {what} holds no sentences (empty or blank lines only)", names)
    return sentences


def _expand(paths: list[Path]) -> list[Path]:
    """Let `--ensemble 'runs/seed*'` name every matching run folder (`structseq.run.layout.run_folders`)."""
    from structseq.run.layout import run_folders

    return run_folders(paths)


@app.command()
def degree(
    train: TrainOpt,
    pool: Annotated[Path, typer.Option(help="Candidate sentences, one per line.")],
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="TSV to write (default: stdout).")] = None,
    min_count: MinCountOpt = 3,
    atom_threshold: AtomOpt = 3,
    max_n: MaxNOpt = DEFAULT_MAX_N,
    explain: Annotated[
        bool, typer.Option(help="Add a `cover` column with the minimum segmentation (a b | c | d e).")
    ] = False,
    oov_as_atoms: Annotated[bool, typer.Option(help="Score sentences with OOV words, each OOV word one atom.")] = False,
    column: ColumnOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Compositional degree of every pool sentence: minimum n-gram cover size / length.

    Columns: line (1-based), length, n_oov, cover_size, degree (blank when the sentence has an OOV
    word or is empty), [cover], sentence.
    """
    try:
        outputs = _outputs(output, [*train, pool], overwrite)
        clock = time.perf_counter()
        dictionary = NgramDictionary.from_corpus(
            _read_nonempty(train, column, "training corpus"),
            min_count=min_count,
            atom_threshold=atom_threshold,
            max_n=max_n or None,
        )
        sentences = _read_nonempty(pool, column, "pool")
        with _progress() as progress:
            result = score_pool(
                dictionary,
                sentences,
                explain=explain,
                oov_as_atoms=oov_as_atoms,
                progress=progress("degree", len(sentences)),
            )
        write_degree_tsv(output, result, sentences, explain, outputs)
    except StructseqError as error:
        _fail(error)
    scored = result.degree[result.degree == result.degree]
    err.print(
        f"{len(sentences)} sentences, {len(scored)} scored ({int((result.n_oov > 0).sum())} with OOV words); "
        f"mean degree {scored.mean() if len(scored) else float('nan'):.4f}; "
        f"{sum(dictionary.sizes().values())} atoms up to n={dictionary.longest}; "
        f"{time.perf_counter() - clock:.1f}s"
    )


@app.command()
def uncertainty(
    ensemble: Annotated[
        list[Path], typer.Option("--ensemble", help="Trained run directory (repeat per member, or a quoted glob).")
    ],
    pool: Annotated[Path, typer.Option(help="Source sentences to decode and score, one per line.")],
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="TSV to write (default: stdout).")] = None,
    beam: Annotated[
        Optional[int], typer.Option(help="Beam size of the decoding member (default: its configured beam).")
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Sentences per model call.")] = 32,
    decoder: Annotated[int, typer.Option(help="Index of the member whose translation is the hypothesis.")] = 0,
    column: ColumnOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Decode with the ensemble and score each sentence by total, data, MI, EPKL and reverse MI (mean per token).

    Columns: index (0-based), n_rows, total, data, mi, epkl, rmi, source, hypothesis.
    """
    try:
        outputs = _outputs(output, [pool], overwrite)
        runs = load_ensemble(_expand(ensemble))
        sources = _read_nonempty(pool, column, "pool")
        with _progress() as progress:
            result = score_ensemble(
                runs,
                sources,
                beam=beam,
                batch_size=batch_size,
                decoder=decoder,
                progress=progress("uncertainty", len(sources)),
            )
        write_uncertainty_tsv(output, result, outputs)
    except StructseqError as error:
        _fail(error)
    err.print(
        f"{len(result)} sentences scored by an ensemble of {len(runs)}; mean rmi {result.measures['rmi'].mean():.4g}"
    )


@app.command()
def build(
    train: TrainOpt,
    pool: Annotated[Path, typer.Option(help="Candidate source sentences, one per line.")],
    out_dir: Annotated[
        Path, typer.Option("-o", "--out-dir", help="Directory for test.src, report.json and the tables.")
    ],
    ensemble: Annotated[
        Optional[list[Path]],
        typer.Option("--ensemble", help="Trained run directory (repeat per member, or a quoted glob)."),
    ] = None,
    uncertainty_tsv: Annotated[
        Optional[Path],
        typer.Option("--uncertainty", help="Precomputed `compose uncertainty` table over OUT_DIR/candidates.txt."),
    ] = None,
    pool_target: Annotated[
        Optional[Path],
        typer.Option(
            help="References aligned with --pool (NAME:SPLIT: its target side); the selected ones go to test.ref."
        ),
    ] = None,
    candidates: Annotated[
        int, typer.Option("--candidates", "-k", help="K: top-K distinct sentences by degree.")
    ] = 60_000,
    drop_top: Annotated[int, typer.Option("--drop-top", "-d", help="D: most uncertain candidates to discard.")] = 2_000,
    window: Annotated[int, typer.Option("--window", "-r", help="R: the next R candidates by uncertainty.")] = 18_000,
    sample: Annotated[
        int, typer.Option("--sample", "-s", help="S: examples sampled uniformly from the window.")
    ] = 3_000,
    measure: Annotated[str, typer.Option(help=f"Uncertainty that ranks candidates: {', '.join(MEASURES)}.")] = "rmi",
    seed: Annotated[
        int, typer.Option(help="Seed of every random choice (degree ties, uncertainty ties, the sample).")
    ] = 0,
    min_count: MinCountOpt = 3,
    atom_threshold: AtomOpt = 3,
    max_n: MaxNOpt = DEFAULT_MAX_N,
    min_length: Annotated[int, typer.Option(help="Shortest candidate sentence in tokens.")] = 1,
    beam: Annotated[
        Optional[int], typer.Option(help="Beam size of the decoding member (default: its configured beam).")
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Sentences per model call.")] = 32,
    decoder: Annotated[int, typer.Option(help="Index of the member whose translation is the hypothesis.")] = 0,
    column: ColumnOpt = None,
    overwrite: OverwriteOpt = False,
    shards: Opt.Shards = None,
    engine: Opt.Engine = "local",
    workers: Opt.Workers = None,
    address: Opt.Address = None,
    memory_limit: Opt.Memory = "4GB",
    work_dir: Opt.WorkDir = None,
    max_length: Opt.MaxLength = None,
    gpus: Opt.Gpus = 0,
    clean_work: Opt.CleanWork = False,
) -> None:
    """The whole pipeline: degree -> top-K candidates -> uncertainty -> drop D -> sample S from the next R.

    Without --ensemble or --uncertainty it stops after writing OUT_DIR/candidates.txt, so the decoding
    can run elsewhere (`compose uncertainty --pool OUT_DIR/candidates.txt`) and the build be resumed.
    A file in OUT_DIR that the build did not write (your own candidates.txt) is never replaced without
    --overwrite, nor is an input.
    """
    config = BuildConfig(
        min_count=min_count,
        atom_threshold=atom_threshold,
        max_n=max_n or None,
        min_length=min_length,
        candidates=candidates,
        drop_top=drop_top,
        window=window,
        sample=sample,
        measure=measure,
        seed=seed,
        beam=beam,
        batch_size=batch_size,
        decoder=decoder,
    )
    try:
        runs = load_ensemble(_expand(ensemble)) if ensemble and shards is None else None
        table = read_uncertainty_tsv(uncertainty_tsv) if uncertainty_tsv else None
        if shards is not None:  # out of core: same files, same answers (docs/compose-scale.md)
            report = run_sharded(err, train, pool, out_dir, config, shards=shards, engine=engine, workers=workers,
                address=address, memory_limit=memory_limit, work_dir=work_dir, column=column, max_length=max_length,
                ensemble=_expand(ensemble or []), gpus=gpus, uncertainty=table, pool_target=pool_target,
                overwrite=overwrite, inputs=[uncertainty_tsv], keep_work=not clean_work)  # fmt: skip
            err.print(sharded_summary(report), soft_wrap=True, markup=False, highlight=False)
        else:
            targets = read_sentences(pool_target, side="target") if pool_target else None
            pool_text, _ = read_limited([pool], column, max_length, skip_long=False)  # the pool first: it can fail
            train_text, skipped = read_limited(train, column, max_length, skip_long=True)
            if skipped:
                err.print(f"skipped {len(skipped)} training line(s) over --max-length {max_length}: {', '.join(skipped[:5])}"
                          + (", ..." if len(skipped) > 5 else ""), markup=False, highlight=False)  # fmt: skip
            with _progress() as progress, build_lock(out_dir):
                report = build_benchmark(
                    _nonempty(train_text, train, "training corpus"),
                    _nonempty(pool_text, pool, "pool"),
                    out_dir,
                    config=config,
                    runs=runs,
                    uncertainty=table,
                    pool_targets=targets,
                    progress=progress,
                    overwrite=overwrite,
                    inputs=[*train, pool, pool_target, uncertainty_tsv],
                )
    except StructseqError as error:
        _fail(error)
    summary = {k: report[k] for k in ("pool", "candidates") if k in report}
    if "selection" in report:
        summary["selection"] = {k: v for k, v in report["selection"].items() if k != "selected_lines"}
    err.print_json(json.dumps(summary))
    err.print(report.get("stopped", f"wrote {out_dir}/test.src and {out_dir}/report.json"))


@app.command()
def stats(
    train: TrainOpt,
    test: Annotated[list[Path], typer.Option("--test", help="A test set (repeat for several, shown side by side).")],
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write the table as .json or .tsv.")] = None,
    tagger: Annotated[str, typer.Option(help="POS tagger: textblob (offline, English) or none.")] = "textblob",
    min_count: MinCountOpt = 3,
    atom_threshold: AtomOpt = 3,
    max_n: MaxNOpt = DEFAULT_MAX_N,
    oov_as_atoms: Annotated[
        bool, typer.Option(help="Count each OOV test word as its own atom (else skip such sentences).")
    ] = True,
    column: ColumnOpt = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Table 2 statistics of test sets against one training corpus: average degree and novel word/POS 2-/3-grams."""
    try:
        outputs = _outputs(output, [*train, *test], overwrite)
        pos = get_tagger(tagger)
        tests = {str(path): read_sentences(path, column) for path in test}
        rows = table2_stats(
            _read_nonempty(train, column, "training corpus"),
            tests,
            tagger=pos,
            min_count=min_count,
            atom_threshold=atom_threshold,
            max_n=max_n or None,
            oov_as_atoms=oov_as_atoms,
        )
    except StructseqError as error:
        _fail(error)
    keys = list(rows[0]) if rows else []
    short = {"examples": "n", "avg_degree": "degree", "with_oov": "oov"}
    table = Table(title=f"compose stats vs {', '.join(p.name for p in train)}")
    for key in keys:
        label = short.get(key, key.replace("gram_novel", "").replace("word_", "w").replace("pos_", "pos"))
        table.add_column(label, justify="left" if key == "test" else "right")
    names = [Path(r["test"]).name for r in rows]
    for row, name in zip(rows, names):
        shown = name if names.count(name) == 1 else row["test"]
        table.add_row(
            *(shown if k == "test" else f"{row[k]:.3f}" if isinstance(row[k], float) else str(row[k]) for k in keys)
        )
    Console(width=max(Console().width, 100)).print(table)
    if output is not None:
        try:
            if output.suffix == ".tsv":
                write_tsv(output, keys, ([row[k] for k in keys] for row in rows), outputs)
            else:
                outputs.write(output, json.dumps(rows, indent=2) + "\n")
        except StructseqError as error:
            _fail(error)


@app.command()
def plot(
    degree_tsv: Annotated[Path, typer.Option("--degree", help="Degree table from `compose degree`.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Figure to write (.png, .pdf, .svg).")],
    scores: Annotated[Optional[tuple[Path, Path]], typer.Option(help="Per-example scores of systems A and B.")] = None,
    hyps: Annotated[
        Optional[tuple[Path, Path]],
        typer.Option(help="Hypotheses of A and B (one per degree row), for corpus BLEU per bin."),
    ] = None,
    refs: Annotated[Optional[Path], typer.Option(help="References for --hyps.")] = None,
    column: Annotated[
        Optional[str], typer.Option(help="Score column of --scores files (default: score, else the last).")
    ] = None,
    bins: Annotated[int, typer.Option(help="Number of bins.")] = 10,
    binning: Annotated[str, typer.Option(help=f"Bins of equal {' or '.join(BINNINGS)}.")] = "count",
    bin_size: Annotated[
        Optional[int], typer.Option(help="Examples per bin (count binning; the paper uses 30000).")
    ] = None,
    labels: Annotated[tuple[str, str], typer.Option(help="Names of A and B.")] = ("A", "B"),
    table: Annotated[Optional[Path], typer.Option(help="Also write the bin values as TSV.")] = None,
    overwrite: OverwriteOpt = False,
) -> None:
    """Score difference A - B by compositional degree (Figure 1a)."""
    try:
        outputs = _outputs(output, [degree_tsv, *(scores or ()), *(hyps or ()), refs], overwrite)
        if table is not None:
            outputs.check(table)
        degrees = read_degree_tsv(degree_tsv)
        if (scores is None) == (hyps is None):
            raise ConfigError("give exactly one of --scores A B or --hyps A B (with --refs)")
        if scores is not None:
            a = align(read_scores(scores[0], column), degrees.lines, str(scores[0]))
            b = align(read_scores(scores[1], column), degrees.lines, str(scores[1]))
            rows = score_difference_by_degree(degrees.degree, a, b, bins=bins, binning=binning, bin_size=bin_size)
            metric = column or "score"
        else:
            if refs is None:
                raise ConfigError("--hyps needs --refs")
            rows = bleu_difference_by_degree(
                degrees.degree,
                read_sentences(hyps[0]),
                read_sentences(hyps[1]),
                read_sentences(refs),
                bins=bins,
                binning=binning,
                bin_size=bin_size,
            )
            metric = "BLEU"
        plot_difference(rows, output, labels=labels, metric=metric, outputs=outputs)
        if table is not None:
            keys = list(rows[0])
            write_tsv(table, keys, ([r[k] for k in keys] for r in rows), outputs)
    except StructseqError as error:
        _fail(error)
    for r in rows:
        err.print(
            f"degree {r['degree_min']:.3f}-{r['degree_max']:.3f}  n={r['examples']}  {r['a']:.3f} - {r['b']:.3f} = {r['difference']:+.3f}"
        )
    err.print(f"wrote {output}")
