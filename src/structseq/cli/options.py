"""Options shared by several commands, declared once here and reused by every sub-application."""

from __future__ import annotations

import typer

from structseq.paths import DATA_ROOT_HELP, ENV_VAR

#: Where named datasets (and NAME:SPLIT specs) are read from.
DataRoot = typer.Option(
    None,
    "--data-root",
    envvar=ENV_VAR,
    help=DATA_ROOT_HELP,
)

#: Which checkpoint of a run directory to load (resolved by `structseq.run.checkpoint.resolve_checkpoint`).
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


def parse_seeds(text: str, option: str = "--seeds") -> list[int]:
    """A comma-separated list of seeds (`1,2,3`), the one style of every command that takes seeds; empty,
    not integers, or a seed given twice is a StructseqError naming `option` and the value."""
    from structseq.errors import StructseqError

    parts = [p.strip() for p in str(text).split(",")]
    try:
        seeds = [int(p) for p in parts if p]
    except ValueError:
        raise StructseqError(
            f"{option} {text!r}: not a comma-separated list of integers (e.g. {option} 1,2,3)"
        ) from None
    if not seeds:
        raise StructseqError(f"{option} {text!r}: names no seed; give e.g. {option} 1,2,3")
    twice = sorted({s for s in seeds if seeds.count(s) > 1})
    if twice:
        raise StructseqError(f"{option} {text!r}: seed {', '.join(map(str, twice))} given twice; each seed is one run")
    return seeds


#: the width of a table printed to a pipe or file when COLUMNS does not say (`stdout_console`)
PIPE_WIDTH = 100


def stdout_console():
    """The console commands print their tables on: rich on a terminal (its width, or COLUMNS); piped or
    redirected, plain text COLUMNS wide (default PIPE_WIDTH), wrapping the columns that wrap (help, descriptions)
    and widening a table only as far as the cells that must stay whole need (`no_wrap` columns: a sacrebleu
    signature, a key)."""
    import os

    from rich.console import Console
    from rich.measure import Measurement

    class PipeAwareConsole(Console):
        widen_to: int | None = None  # while printing a table whose whole cells need more than the width

        @property
        def size(self):
            size = Console.size.fget(self)
            if self.is_terminal:
                return size
            columns = os.environ.get("COLUMNS", "")
            width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH
            return size._replace(width=max(width, self.widen_to or 0))

        @size.setter
        def size(self, value) -> None:
            Console.size.fset(self, value)

        def print(self, *objects, **kwargs) -> None:
            tables = [o for o in objects if not isinstance(o, str)]
            if not self.is_terminal and tables:  # cells that must stay whole: as wide as they need, no wider
                wide = self.options.update_width(10**6)
                self.widen_to = max(Measurement.get(self, wide, o).minimum for o in tables)
            try:
                super().print(*objects, **kwargs)
            finally:
                self.widen_to = None

    return PipeAwareConsole()


def _max_n(value: int) -> int:
    if value < 0:
        raise typer.BadParameter(f"--max-n must be >= 1, or 0 for no bound, got {value}")
    return value


#: `compose`'s longest atom n-gram (0 -> max_n=None); a negative value is refused in the option's own words.
MaxN = typer.Option(help="Longest atom n-gram in words; 0: no bound (the paper states none).", callback=_max_n)
