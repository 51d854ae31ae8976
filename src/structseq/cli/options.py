"""Options shared by several commands, declared once here and reused by every sub-application."""

from __future__ import annotations

import typer

from structseq.paths import ENV_VAR

#: Where named datasets (and NAME:SPLIT specs) are read from.
DataRoot = typer.Option(
    None,
    "--data-root",
    envvar=ENV_VAR,
    help=f"folder with the benchmark data [default: ${ENV_VAR}, then ../shared/data]",
)

#: Which checkpoint of a run directory to load (resolved by `structseq.train.checkpoint.resolve_checkpoint`).
Checkpoint = typer.Option(
    None,
    "--checkpoint",
    help="best | last | any checkpoints/NAME.pt of the run (avg-last5 from "
    "`structseq average`, step1000 from train.keep_last) [default: the run's "
    "train.eval_checkpoint]",
)

#: Let a command replace an existing output file it did not write (`structseq.outputs.Outputs`).
OVERWRITE_HELP = (
    "replace an existing output file that structseq did not write (or that was changed since) [default: refuse]"
)
Overwrite = typer.Option(False, "--overwrite", help=OVERWRITE_HELP)
