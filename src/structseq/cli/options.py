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


def stdout_console():
    """The console commands print their tables on: rich on a terminal; piped or redirected, plain text at any
    width, so no table cell (a sacrebleu signature, a help string) is cut or wrapped into narrow columns."""
    from rich.console import Console

    class PipeAwareConsole(Console):
        @property
        def size(self):
            size = Console.size.fget(self)
            return size if self.is_terminal else size._replace(width=100_000)

        @size.setter
        def size(self, value) -> None:
            Console.size.fset(self, value)

    return PipeAwareConsole()
