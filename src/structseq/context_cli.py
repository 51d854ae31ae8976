"""`structseq context ...`: contrastive evaluation, backward perplexity, context use and the attention
statistics of Wang et al. 2019 (Table 9). A thin layer over `structseq.metrics.contrastive` and the models."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Optional

import typer

app = typer.Typer(help="Context-aware models: contrastive accuracy, backward perplexity, context use, attention "
                       "statistics (Wang et al. 2019).", no_args_is_help=True, add_completion=False)
DataRoot = typer.Option(None, "--data-root", envvar="STRUCTSEQ_DATA", help="benchmark data folder")


def _print(obj: dict) -> None:
    print(json.dumps(obj, indent=1))


def contrastive(run_dir: Path, split: str, checkpoint: str | None = None, data_root=None, batch_size: int = 32) -> dict:
    """Contrastive accuracy (per phenomenon, ties wrong) of a run on a contrastive split (e.g.
    `discevalmt-anaphora:test-tgtctx`, or a TSV with source, target, context, category and contrast columns)."""
    from structseq.api import load_run
    from structseq.metrics.contrastive import score_contrastive

    run = load_run(run_dir, checkpoint)
    dataset, name, examples = run.load_split(split, data_root)
    missing = sum("contrast" not in e.meta for e in examples)
    if missing:
        raise typer.BadParameter(f"{split}: {missing} examples lack the incorrect candidate (a 'contrast' column)")
    side = "target" if name.endswith("tgtctx") else "source"
    return {"dataset": dataset, "split": name, "n": len(examples), "context": side,
            **score_contrastive(run, examples, batch_size, context=side)}


@app.command("contrastive")
def contrastive_cmd(run_dir: Path, split: str = typer.Option(..., "--split"),
                    checkpoint: Optional[str] = typer.Option(None, "--checkpoint"), data_root: Optional[Path] = DataRoot):
    """Score the correct and the incorrect candidate of every pair; report accuracy per phenomenon."""
    _print(contrastive(run_dir, split, checkpoint, data_root))


def _read_predictions(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\"))


@app.command("backward-ppl")
def backward_ppl_cmd(reverse_run: Path, predictions: Path = typer.Argument(..., help="predictions TSV of "
                                                                                       "`structseq evaluate`"),
                     checkpoint: Optional[str] = typer.Option(None, "--checkpoint")):
    """Perplexity of the sources given the generations under a reverse run (task.reverse: true)."""
    from structseq.api import load_run
    from structseq.metrics.contrastive import backward_perplexity

    rows = _read_predictions(predictions)
    run = load_run(reverse_run, checkpoint)
    _print({"predictions": str(predictions), "backward_ppl": backward_perplexity(
        run, [r["source"] for r in rows], [r["hypothesis"] for r in rows]).to_dict()})


@app.command("context-use")
def context_use_cmd(predictions: Path, tagger: str = typer.Option("textblob", "--tagger")):
    """Share of the context's nouns found in the reference that the hypothesis also contains."""
    from structseq.metrics.contrastive import context_use

    rows = _read_predictions(predictions)
    _print({"predictions": str(predictions), "context_use": context_use(
        [r["context"] for r in rows], [r["reference"] for r in rows], [r["hypothesis"] for r in rows],
        tagger).to_dict()})


def attention_statistics(run_dir: Path, split: str, window: int | None = None, limit: int = 200,
                         checkpoint: str | None = None, data_root=None) -> dict:
    """Table 9 of Wang et al. 2019 for a sequential run: the share of source-token self-attention (top encoder
    layer, heads averaged) spent on context tokens, and the share of context-token attention within `window`
    positions (default: each example's source length)."""
    import torch

    from structseq.api import load_run

    run = load_run(run_dir, checkpoint)
    _, name, examples = run.load_split(split, data_root)
    examples = examples[:limit]
    device = next(run.model.parameters()).device
    totals, n = {}, 0
    for i in range(0, len(examples), 32):
        chunk = examples[i: i + 32]
        inputs = run.task.to_device(run.task.decode_inputs(chunk, run.vocabs), device)
        with torch.no_grad():
            stats = run.model.attention_statistics(inputs, window)
        for k, v in stats.items():
            totals[k] = totals.get(k, 0.0) + v * len(chunk)
        n += len(chunk)
    return {"run": str(run_dir), "split": name, "n": n, **{k: v / n for k, v in totals.items() if k != "window"},
            "window": window or "source length"}


@app.command("attention")
def attention_cmd(run_dir: Path, split: str = typer.Option(..., "--split"),
                  window: Optional[int] = typer.Option(None, "--window", help="[default: the source length]"),
                  limit: int = typer.Option(200, "-n", help="examples"),
                  checkpoint: Optional[str] = typer.Option(None, "--checkpoint"), data_root: Optional[Path] = DataRoot):
    """The paper's Table 9 attention statistics of a sequential run."""
    _print(attention_statistics(run_dir, split, window, limit, checkpoint, data_root))
