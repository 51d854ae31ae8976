"""`structseq score`: the teacher-forced log-probability of given outputs (fairseq's --score-reference)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from structseq.cli.decoding import Decoding, Runs, decoding_options
from structseq.cli.options import DataRoot
from structseq.errors import ConfigError


@decoding_options(search=False)
def score(
    runs: list[str] = Runs,
    pairs: Optional[str] = typer.Option(
        None,
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
    nbest: Optional[Path] = typer.Option(
        None,
        "--nbest",
        help="instead of --pairs: the JSON of `predict --nbest N --format json`; each entry is scored by its ids, "
        "so its score is the search's (text may detokenise two id sequences alike)",
    ),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="only the first N pairs"),
    data_root: Optional[Path] = DataRoot,
    *,
    decoding: Decoding,
):
    """Score each given target under a run (or an ensemble of runs), teacher-forced: its log-probability (the
    sum over its tokens and </s>), the same normalised as beam search ranks (decode.len_penalty), and each
    token's log-probability; the numbers of `Run.token_log_probs`."""
    from structseq.progress import is_main_process

    if fmt not in ("tsv", "json"):
        raise ConfigError(f"'--format' must be tsv or json, got {fmt!r}")
    if (pairs is None) == (nbest is None):
        raise ConfigError("give the outputs to score: either --pairs or --nbest")
    run = decoding.load(runs)
    if nbest is not None:
        inputs, ids, where, lines = read_nbest(nbest)
        examples = run.parse_lines(inputs, str(nbest))
        if examples:
            check_ids(nbest, ids, lines, run.output_size(examples[0]))
        rows = [
            {**where[i], **r}
            for i, r in enumerate(run.score_ids(examples[:limit], ids[:limit], run.config.decode.batch_size))
        ]
    else:
        dataset, name, examples = run.load_split(pairs, data_root)
        examples = examples[:limit]
        run.task.check_examples(examples, f"{dataset}/{name}" if dataset != "files" else pairs)
        rows = run.score(examples, batch_size=run.config.decode.batch_size)
    if not is_main_process():
        return
    unknown = [i for i, r in enumerate(rows, 1) if "<unk>" in r["tokens"] and "<unk>" not in r["target"].split()]
    if unknown:
        import sys

        print(
            f"warning: {len(unknown)} of {len(rows)} targets hold words outside the run's target vocabulary, "
            f"scored as <unk> (first: pair {unknown[0]}, {rows[unknown[0] - 1]['target']!r})",
            file=sys.stderr,
            flush=True,
        )
    from structseq.data.vocab import SPECIALS
    from structseq.metrics.blowup import token_warning
    from structseq.models.heads import MASKED, SPECIAL_OUTPUTS

    # head.mask_special scores a target <unk> (<s>, <pad>) about MASKED (-1e5) on purpose: not a blow-up
    names = {SPECIALS[i] for i in SPECIAL_OUTPUTS}
    masked = [[t in names and x < MASKED / 2 for t, x in zip(r["tokens"], r["token_scores"])] for r in rows]
    blowup = token_warning([r["token_scores"] for r in rows], masked)
    if blowup:
        import sys

        print(blowup, file=sys.stderr, flush=True)
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


def read_nbest(path: Path) -> tuple[list[str], list[list[int]], list[dict], list[int]]:
    """The entries of a `predict --nbest --format json` file, one per output: its input line, its ids, where
    it stands (`line`, `rank`) and the file's line holding it; a line that is not such an object, or an id that
    is not a whole number >= 0, is an error naming FILE:LINE."""
    from structseq.textio import read_text

    inputs, ids, where, lines = [], [], [], []
    for n, text in enumerate(read_text(path).splitlines(), 1):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
            entries = [list(e["ids"]) for e in obj["nbest"]]
            line, source = obj["line"], str(obj["input"])
        except (ValueError, KeyError, TypeError) as e:
            raise ConfigError(
                f"{path}:{n}: not an n-best line of `predict --nbest N --format json` with ids ({e!r})"
            ) from None
        if type(line) is not int or line < 1:  # 3.7, true, "3", 0: not an input line number (bool is an int)
            raise ConfigError(f"{path}:{n}: an n-best entry's line is a whole number >= 1, got {line!r}")
        for rank, r in enumerate(entries, 1):
            bad = [i for i in r if type(i) is not int or i < 0]  # 3.7, true, "3", -1: not an id (bool is an int)
            if bad:
                raise ConfigError(f"{path}:{n}: an n-best id is a whole number >= 0, got {bad[0]!r} (rank {rank})")
            inputs.append(source)
            ids.append(r)
            where.append({"line": line, "rank": rank})
            lines.append(n)
    return inputs, ids, where, lines


def check_ids(path: Path, ids: list[list[int]], lines: list[int], size: int) -> None:
    """Every id is one of the model's `size` output ids (what `read_nbest` cannot know), else an error naming
    FILE:LINE (`lines`: each entry's, from `read_nbest`)."""
    for r, n in zip(ids, lines):
        bad = [i for i in r if i >= size]
        if bad:
            raise ConfigError(f"{path}:{n}: n-best id {bad[0]} is not an output id of this model (0 to {size - 1})")
