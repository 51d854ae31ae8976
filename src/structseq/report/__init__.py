"""Every generated table of the documents (README.md, RESULTS.md, docs/): records in, Markdown out.

    structseq report KIND ARGS...            # print one table, e.g. `structseq report results results/foundation.jsonl`
    structseq report tables [--check]        # rerun every `<!-- generated: COMMAND -->` block (tables.py)

The commands are typer's, as every other command's (`kinds.app`): `--help` of each, click's usage errors as one
line (`kinds.Group`), a list option taking the words after it as the documents write it (`--curve A B`).

Design: one module per kind of record (`results`, `supertag`, `cter`, `gpu`, `ops`, `compose-scale`, `context`,
`lists`, `bench`), each with `command` (its typer arguments and options, returning them as a Namespace; a
`typer.Typer` where a kind has tables of its own) and `render(args) -> str` (Markdown without a final newline;
nothing written except a `--plot`/`--out` file the caller names, through `records.write_output` /
`records.save_figure`, never over a file the command read; nothing printed
but `plot: FILE` on stderr for a figure written).
`KINDS` (kinds.py) is the only list of them: a new table is a new file here and one line in `KINDS`. Records are read
as UTF-8 by `records.py` (errors name file and line, NaN and Infinity included; each object a `Record`, whose missing key is such an error
too; a record of another shape is one line naming the kind and its files, `kinds.run`); mean ± sd cells are
`metrics.significance.format_mean_sd`.
A package rather than one module: the kinds together are ~1,500 lines, three times the 450-line rule, and a
reader looking for one table opens one file. `tables.py` renders `structseq report` blocks in this process (no
interpreter per block), so the suite's check is cheap; a `python scripts/...` block runs in its own interpreter with its
writes confined to the root (`confine.py`), and under `--check` to a temporary folder: nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from structseq.errors import StructseqError

from . import tables
from .kinds import KINDS, invoke, render, run

__all__ = ["KINDS", "main", "render"]


#: what `structseq report --help` says (the module's docstring is for developers)
HELP = """Tables from records: the generated tables of the documents (README.md, RESULTS.md, docs/).

\b
    structseq report KIND FILES...                  # print one, e.g. structseq report results results/foundation.jsonl
    structseq report KIND FILES... --format latex   # the same as booktabs LaTeX
    structseq report tables [--check]               # regenerate every generated block of the documents (or check)

`structseq report KIND --help` lists a kind's options."""


def main(
    argv: list[str] | None = None,
    prog: str = "structseq report",
    formats: dict[str, Callable[[str], str]] | None = None,
) -> int:
    """`structseq report ARGS` (`argv`): a kind's table printed (Markdown, or through `formats[FORMAT]` for
    `--format FORMAT`: the CLI passes LaTeX's), or `tables` run; its exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = invoke(argv, prog, HELP, {"tables": (tables.command, tables.USER_HELP, tables.HELP)})
    if not isinstance(args, argparse.Namespace):
        return args
    text = run(args, argv)
    if args.format != "markdown":
        if args.format not in (formats or {}):
            raise StructseqError(f"--format {args.format}: only the command line (structseq report) writes it")
        text = formats[args.format](text).rstrip("\n")
    print(text)
    return 0
