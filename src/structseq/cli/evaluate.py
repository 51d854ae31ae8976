"""`structseq evaluate` and `structseq predict`: one run or an ensemble, with the decoding controls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from structseq.cli.decoding import Decoding, Runs, decoding_options
from structseq.cli.options import DataRoot, stdout_console
from structseq.cli.tagged_output import all_formats, check_format, print_tagged
from structseq.errors import ConfigError

console = stdout_console()


@decoding_options()
def evaluate(
    runs: list[str] = Runs,
    split: Optional[str] = typer.Option(
        None,
        "--split",
        help="split name, file, or NAME:SPLIT of any registered "
        "dataset (e.g. cognition:cg-test) [default: the config's test split]",
    ),
    bleu_tokenize: Optional[str] = typer.Option(None, "--bleu-tokenize", help="sacrebleu tokenizer (13a, zh, none...)"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object with every metric"),
    data_root: Optional[Path] = DataRoot,
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="only the split's first N examples"),
    metric: list[str] = typer.Option(
        [], "--metric", help="a registered metric to report too (repeatable; plugins included), e.g. --metric chrf"
    ),
    overwrite: bool = typer.Option(
        False,
        "--overwrite",
        help="replace an earlier evaluation of the same name made otherwise (or a predictions file edited since)",
    ),
    *,
    decoding: Decoding,
):
    """Decode a split and report exact match, token accuracy, BLEU (and per-category accuracy; for
        CoGnition also character BLEU and, on cg-test, the compound translation error rate). An empty file, or an
        example longer than the run's data.max_length, is an error naming the file (and line). Progress goes to
        stderr: a bar on a terminal, a line a minute otherwise; under torchrun only rank 0 prints. Each evaluation is
    kept: RUN/predictions/SPLIT[.CHECKPOINT][.beamN][.dec-HASH][.firstN]....tsv, named for what differs from the
    run's own settings, with a .metrics.json stating them all; an earlier evaluation is replaced only with --overwrite."""
    from structseq.progress import is_main_process

    run = decoding.sampled(decoding.load(runs))
    main = is_main_process()
    m = run.evaluate(
        split,
        beam=decoding.beam,
        data_root=data_root,
        bleu_tokenize=bleu_tokenize,
        show_progress=not decoding.quiet,
        limit=limit,
        write_predictions=main,
        overwrite=overwrite,
        metrics=metric,
    )
    if not main:
        return
    if as_json:
        print(json.dumps(m))
        return
    print_metrics(m)


@decoding_options()
def predict(
    runs: list[str] = Runs,
    nbest: Optional[int] = typer.Option(
        None,
        "--nbest",
        min=1,
        help="the N best outputs of each input with their "
        "scores (TSV: line, rank, score, normalized, output; or --format json)",
    ),
    fmt: str = typer.Option(
        "text",
        "--format",
        help="text (one output a line; TSV with --nbest) or json (one "
        "JSON object a line, with scores); a supertag run also writes "
        "cc (word|POS|cat), multi (word|cat1|p1|cat2|p2...), conll "
        "(index word POS category probability) and json (words, "
        "tags, k-best with probabilities; --beam K for K)",
    ),
    *,
    decoding: Decoding,
):
    """Read input lines on stdin (the task's format: a source; `source<TAB>context` for context-aware models;
    words for a tagger), write one output line each to stdout. Input must be UTF-8; an invalid byte, a reserved
    token (<pad> <s> </s> <unk>) or a line longer than data.max_length is an error naming <stdin>:LINE.
    --nbest N and --sample (N samples with --nbest) serve every autoregressive model."""
    from structseq.progress import is_main_process
    from structseq.textio import stdin_lines

    if fmt not in all_formats():
        raise ConfigError(f"'--format' must be one of {', '.join(all_formats())}, got {fmt!r}")
    run = decoding.load(runs)
    beam, quiet = decoding.beam, decoding.quiet
    own_format = check_format(fmt, run.task, nbest=nbest, sampling=decoding.sample or None)  # tagged_output.py
    run = decoding.sampled(run)
    lines = list(stdin_lines())
    if own_format:
        if is_main_process():
            print_tagged(run, lines, fmt, beam=beam)
        return
    if nbest is None and fmt == "text":
        outputs = run.predict(lines, beam=beam, where="<stdin>", show_progress=not quiet)
        if is_main_process():
            for out in outputs:
                print(out)
        return
    examples = run.parse_lines(lines, "<stdin>")
    lists = run.search(examples, nbest=nbest or 1, beam=beam, show_progress=not quiet)
    if is_main_process():
        print_candidates(lines, lists, fmt)


def print_candidates(lines: list[str], lists, fmt: str) -> None:
    """n-best lists (or samples) as TSV rows `line rank score normalized output` under a header, or as one
    JSON object per input line, each entry with its model `ids` (text may not give them back: `score --nbest`)."""
    if fmt == "json":
        for i, (line, cands) in enumerate(zip(lines, lists), 1):
            print(
                json.dumps(
                    {
                        "line": i,
                        "input": line,
                        "nbest": [
                            {
                                "output": " ".join(c.tokens),
                                "score": c.score,
                                "normalized": c.normalized,
                                "ids": list(c.ids),
                            }
                            for c in cands
                        ],
                    },
                    ensure_ascii=False,
                )
            )
        return
    print("line\trank\tscore\tnormalized\toutput")
    for i, cands in enumerate(lists, 1):
        for rank, c in enumerate(cands, 1):
            print(f"{i}\t{rank}\t{c.score:.6f}\t{c.normalized:.6f}\t{' '.join(c.tokens)}")


def metric_rows(key: str, value) -> list[tuple[str, float | None, str]]:
    """The rows (name, score, signature) a report entry renders as, by its shape alone: an entry with a `score`
    is a row; a mapping of parts that each have a `score` gives rows `key.part` (pooled BLEU's full and
    1-shot); a mapping with a signature and float leaves gives rows `key_leaf` sharing that signature (CTER's
    instance and aggregate rates; int leaves are counts); anything else (counts, curves, category tables) none."""
    if not isinstance(value, dict) or category_columns(value):
        return []
    if "score" in value:
        return [(key, value["score"], value.get("signature", ""))]
    if value and all(isinstance(v, dict) and "score" in v for v in value.values()):
        return [(f"{key}.{part}", v["score"], v.get("signature", "")) for part, v in value.items()]
    if isinstance(value.get("signature"), str):
        return [(f"{key}_{leaf}", v, value["signature"]) for leaf, v in value.items() if isinstance(v, float)]
    return []


def category_columns(value) -> list[str]:
    """The score columns of a per-group table entry: `n` maps each group to its count and each column maps
    the same groups to a score (per-category exact match); [] for any other shape."""
    n = value.get("n") if isinstance(value, dict) else None
    if not isinstance(n, dict) or not n:
        return []
    return [k for k, v in value.items() if k != "n" and isinstance(v, dict) and v.keys() == n.keys()]


def print_metrics(m: dict) -> None:
    """Every entry of an evaluation report by its shape (`metric_rows`, `category_columns`), whatever metric
    it is: one table of scores with their signatures, then one table per per-group entry."""
    title = f"{m['dataset']}/{m['split']} ({m['n']} examples, beam {m['beam']}, {m['checkpoint']})"
    if "ensemble" in m:
        title += f", ensemble of {len(m['ensemble']['members'])}"
    table = Table(title=title)
    table.add_column("metric", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("signature", style="dim", no_wrap=True)  # whole: a signature is copied, never cut
    for key, value in m.items():
        for name, score, sig in metric_rows(key, value):
            table.add_row(name, "-" if score is None else f"{score:.4f}", sig)
    console.print(table)
    for key, value in m.items():
        columns = category_columns(value)
        if not columns:
            continue
        label = key.replace("_", " ")
        t = Table(title=f"{columns[0].replace('_', ' ')} {label}" if len(columns) == 1 else label)
        t.add_column(key.removeprefix("per_").replace("_", " "))
        t.add_column("n", justify="right")
        for c in columns:
            t.add_column(c.replace("_", " "), justify="right")
        for group, n in value["n"].items():
            t.add_row(
                str(group), str(n), *("-" if value[c][group] is None else f"{value[c][group]:.4f}" for c in columns)
            )
        console.print(t)
    if "settings" in m:
        from structseq.evaluation import describe

        console.print(f"settings: {describe(m['settings'], m.get('strategy'))}", highlight=False, soft_wrap=True)
    if "predictions" in m:
        console.print(f"predictions: {m['predictions']}")
