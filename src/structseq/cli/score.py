"""`structseq score`: the teacher-forced log-probability of given outputs (fairseq's --score-reference)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from structseq.cli.evaluate import BatchSize, Runs, Threads, load_for_decoding
from structseq.cli.options import Checkpoint, DataRoot
from structseq.errors import ConfigError


def score(
    runs: list[str] = Runs,
    pairs: str = typer.Option(
        ...,
        "--pairs",
        help="the outputs to score: a TSV file source<TAB>target (a header "
        "may name more columns, e.g. context), SRC,TGT files, a split of the run's dataset, "
        "or NAME:SPLIT of a registered dataset",
    ),
    fmt: str = typer.Option(
        "tsv",
        "--format",
        help="tsv (source, target, score, normalized, tokens, token_scores) or json (one object a line)",
    ),
    checkpoint: Optional[str] = Checkpoint,
    batch_size: Optional[int] = BatchSize,
    threads: Optional[int] = Threads,
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="only the first N pairs"),
    data_root: Optional[Path] = DataRoot,
):
    """Score each given target under a run (or an ensemble of runs), teacher-forced: its log-probability (the
    sum over its tokens and </s>), the same normalised as beam search ranks (decode.len_penalty), and each
    token's log-probability; the numbers of `Run.token_log_probs`."""
    from structseq.progress import is_main_process

    if fmt not in ("tsv", "json"):
        raise ConfigError(f"'--format' must be tsv or json, got {fmt!r}")
    run = load_for_decoding(runs, checkpoint, batch_size=batch_size, threads=threads)
    dataset, name, examples = run.load_split(pairs, data_root)
    examples = examples[:limit]
    run.task.check_examples(examples, f"{dataset}/{name}" if dataset != "files" else pairs)
    rows = run.score(examples, batch_size=run.config.decode.batch_size)
    if not is_main_process():
        return
    if fmt == "json":
        for r in rows:
            print(json.dumps(r, ensure_ascii=False))
        return
    print("source\ttarget\tscore\tnormalized\ttokens\ttoken_scores")
    for r in rows:
        print(
            f"{r['source']}\t{r['target']}\t{r['score']:.6f}\t{r['normalized']:.6f}\t{' '.join(r['tokens'])}\t"
            + " ".join(f"{s:.6f}" for s in r["token_scores"])
        )
