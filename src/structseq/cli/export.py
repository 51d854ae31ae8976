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
):
    """Write a run as a folder of its own: an hf-seq2seq run as a Hugging Face folder (safetensors weights,
    config, tokenizer: AutoModelForSeq2SeqLM.from_pretrained(DIR) loads it); any other run as a structseq folder
    that `structseq evaluate` / `predict` and api.load_run read (config.yaml, the checkpoint's weights without
    optimiser state, the vocabularies)."""
    from structseq.export import export_run

    record = export_run(run_dir, out, checkpoint)
    print(f"exported {record['checkpoint']} of {run_dir} ({record['arch']}) to {out} as a {record['format']} folder")
