"""`structseq context ...`: contrastive evaluation, backward perplexity, context use and the attention
statistics of Wang et al. 2019 (Table 9). A thin layer over `structseq.decode.contrastive` and the models."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Optional

import typer

from structseq.cli.options import Checkpoint, DataRoot

app = typer.Typer(
    help="Context-aware models: contrastive accuracy, backward perplexity, context use, attention "
    "statistics (Wang et al. 2019).",
    no_args_is_help=True,
    add_completion=False,
)


def _print(obj: dict) -> None:
    print(json.dumps(obj, indent=1))


def _load(run_dir: Path, checkpoint: str | None, command: str, *, reverse: bool = False, sequential: bool = False):
    """The run, or a StructseqError naming it when it is the wrong kind for `command`: contrastive scoring and
    backward perplexity need a model that scores target sequences (backward-ppl: trained with task.reverse),
    the attention statistics a context model of the sequential variant."""
    from structseq.api import load_run
    from structseq.errors import StructseqError

    run = load_run(run_dir, checkpoint)
    kind = f"a {run.task.name} run ({run.config.model.arch})"
    if not run.model.autoregressive:
        raise StructseqError(
            f"{run_dir}: {kind}; `structseq context {command}` needs a sequence-to-sequence run "
            "(its model scores target sequences)"
        )
    if reverse and not run.task.reversed_pairs:
        raise StructseqError(
            f"{run_dir}: {kind}, not a reverse run; backward perplexity needs one trained with task.reverse: true"
        )
    if sequential and run.model.variant != "sequential":
        raise StructseqError(
            f"{run_dir}: {kind}; the encoder attention statistics need a context-transformer of "
            "the sequential variant (model.decoder: sequential, one input S <sep> C)"
        )
    return run


def contrastive(
    run_dir: Path,
    split: str,
    checkpoint: str | None = None,
    data_root=None,
    batch_size: int = 32,
    context_side: str | None = None,
) -> dict:
    """Contrastive accuracy (per phenomenon, ties wrong) of a run on a contrastive split (e.g.
    `discevalmt-anaphora:test-tgtctx`, or a TSV with source, target, context, category and contrast columns)."""
    from structseq.decode.contrastive import score_contrastive
    from structseq.errors import ConfigError

    if batch_size < 1:
        raise ConfigError(f"--batch-size must be >= 1, got {batch_size}")
    run = _load(run_dir, checkpoint, "contrastive")
    dataset, name, examples = run.load_split(split, data_root)
    missing = sum("contrast" not in e.meta for e in examples)
    if missing:
        raise typer.BadParameter(f"{split}: {missing} examples lack the incorrect candidate (a 'contrast' column)")
    side = context_side or ("target" if name.endswith("tgtctx") else "source")  # a label of the signature
    return {
        "dataset": dataset,
        "split": name,
        "n": len(examples),
        "context": side,
        **score_contrastive(run, examples, batch_size, context=side),
    }


@app.command("contrastive")
def contrastive_cmd(
    run_dir: Path,
    split: str = typer.Option(..., "--split"),
    checkpoint: Optional[str] = Checkpoint,
    data_root: Optional[Path] = DataRoot,
    batch_size: int = typer.Option(32, "--batch-size", min=1, help="pairs scored at once"),
    context_side: Optional[str] = typer.Option(
        None,
        "--context-side",
        help="source or target: which side the split's contexts come from, "
        "for the report [default: target for the *-tgtctx splits, else source]",
    ),
):
    """Score the correct and the incorrect candidate of every pair; report accuracy per phenomenon."""
    if context_side not in (None, "source", "target"):
        raise typer.BadParameter(f"--context-side {context_side!r}: choose source or target")
    _print(contrastive(run_dir, split, checkpoint, data_root, batch_size, context_side))


def _read_predictions(path: Path, columns: tuple[str, ...]) -> list[dict]:
    """The rows of a predictions TSV (`structseq evaluate` writes RUN/predictions/SPLIT.tsv); a missing column
    is an error naming the file."""
    from structseq.errors import DataError
    from structseq.textio import open_checked

    with open_checked(path, newline="") as f:  # missing, a folder, not UTF-8: an error naming the file (and line)
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(
                f"{path}: no column {', '.join(missing)} (header: {', '.join(reader.fieldnames or [])}); "
                "expected the predictions TSV of `structseq evaluate` on a context-aware run"
            )
        return list(reader)


@app.command("backward-ppl")
def backward_ppl_cmd(
    reverse_run: Path,
    predictions: Path = typer.Argument(..., help="predictions TSV of `structseq evaluate`"),
    checkpoint: Optional[str] = Checkpoint,
):
    """Perplexity of the sources given the generations under a reverse run (task.reverse: true)."""
    from structseq.decode.contrastive import backward_perplexity

    rows = _read_predictions(predictions, ("source", "hypothesis"))
    run = _load(reverse_run, checkpoint, "backward-ppl", reverse=True)
    _print(
        {
            "predictions": str(predictions),
            "backward_ppl": backward_perplexity(
                run, [r["source"] for r in rows], [r["hypothesis"] for r in rows]
            ).to_dict(),
        }
    )


@app.command("context-use")
def context_use_cmd(
    predictions: Path,
    tagger: str = typer.Option(
        "textblob", "--tagger", help="textblob, or MODULE:FUNCTION (token lists -> Penn tag lists)"
    ),
):
    """Share of the context's nouns found in the reference that the hypothesis also contains."""
    from structseq.decode.contrastive import context_use

    rows = _read_predictions(predictions, ("context", "reference", "hypothesis"))
    _print(
        {
            "predictions": str(predictions),
            "context_use": context_use(
                [r["context"] for r in rows], [r["reference"] for r in rows], [r["hypothesis"] for r in rows], tagger
            ).to_dict(),
        }
    )


def attention_statistics(
    run_dir: Path,
    split: str,
    window: int = 40,
    limit: int = 200,
    checkpoint: str | None = None,
    data_root=None,
    layer: int | None = None,
) -> dict:
    """Table 9 of Wang et al. 2019 for a sequential run over the first `limit` examples of `split`: the share of
    the source tokens' encoder self-attention spent on context tokens, of the context tokens' spent on source
    tokens, and of all attention within `window` tokens (heads and layers averaged, or one `layer`; pooled
    over tokens)."""
    import torch

    from structseq.errors import ConfigError

    run = _load(run_dir, checkpoint, "attention", sequential=True)
    layers = len(run.model.encoder.layers)
    if layer is not None and not 1 <= layer <= layers:
        raise ConfigError(f"--layer {layer}: the encoder of {run_dir} has layers 1..{layers}")
    _, name, examples = run.load_split(split, data_root)
    examples = examples[:limit]
    device = next(run.model.parameters()).device
    counts = {
        "source_attention_on_context": "n_source_tokens",
        "context_attention_on_source": "n_context_tokens",
        "attention_in_window": "n_tokens",
    }  # each share is a mean over these tokens
    sums = dict.fromkeys([*counts, *counts.values()], 0.0)
    for i in range(0, len(examples), 32):
        chunk = examples[i : i + 32]
        inputs = run.task.to_device(run.task.decode_inputs(chunk, run.vocabs), device)
        with torch.no_grad():
            stats = run.model.attention_statistics(inputs, window, layer)
        for share, n in counts.items():
            sums[share] += stats[share] * stats[n]
            sums[n] += stats[n]
    return {
        "run": str(run_dir),
        "split": name,
        "examples": len(examples),
        **{share: sums[share] / max(sums[n], 1) for share, n in counts.items()},
        **{n: int(sums[n]) for n in counts.values()},
        "window": window,
        "layers": "all" if layer is None else layer,
    }


@app.command("attention")
def attention_cmd(
    run_dir: Path,
    split: str = typer.Option(..., "--split"),
    window: int = typer.Option(40, "--window", min=1, help="tokens, centred on the query (the paper's: 40)"),
    layer: Optional[int] = typer.Option(
        None, "--layer", min=1, help="one encoder layer (1-based) [default: every layer, averaged]"
    ),
    limit: int = typer.Option(200, "-n", min=1, help="examples"),
    checkpoint: Optional[str] = Checkpoint,
    data_root: Optional[Path] = DataRoot,
):
    """The paper's Table 9 encoder attention statistics of a sequential run (alpha S->C, C->S, window)."""
    _print(attention_statistics(run_dir, split, window, limit, checkpoint, data_root, layer))
