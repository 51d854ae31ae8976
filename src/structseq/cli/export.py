"""`structseq export RUN -o DIR`: a trained run as a folder that stands on its own (see `structseq.export`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from structseq.cli.options import Checkpoint


def export(
    run_dir: Path,
    out: Path = typer.Option(..., "--out", "-o", help="the new folder to write"),
    checkpoint: Optional[str] = Checkpoint,
    fmt: str = typer.Option(
        "auto",
        "--format",
        help="auto (a structseq folder, plus the transformers files where a stock class holds the model) | "
        "structseq | transformers (refused, naming why, where no stock class holds it)",
    ),
):
    """Write a run as a folder of its own: an hf-seq2seq run as a Hugging Face folder (safetensors weights,
    config, tokenizer: AutoModelForSeq2SeqLM.from_pretrained(DIR) loads it); any other run as a structseq folder
    that `structseq evaluate` / `predict` and api.load_run read (config.yaml, the checkpoint's weights without
    optimiser state, the vocabularies), and a from-scratch Transformer whose layers MarianMTModel holds also as
    a transformers folder (AutoModelForSeq2SeqLM.from_pretrained(DIR), vocab-src/tgt.json, a README)."""
    from structseq.export import export_run

    record = export_run(run_dir, out, checkpoint, fmt)
    line = f"exported {record['checkpoint']} of {run_dir} ({record['arch']}) to {out} as a {record['format']} folder"
    if record.get("transformers"):
        line += f", which transformers loads too ({record['transformers']['class']}: AutoModelForSeq2SeqLM)"
    elif record.get("not_transformers"):
        line += f"; not a transformers model: {'; '.join(record['not_transformers'])}"
    print(line)
