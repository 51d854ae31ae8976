"""Every generated table of the documents (README.md, RESULTS.md, docs/): records in, Markdown out.

    structseq report KIND ARGS...            # print one table, e.g. `structseq report results results/foundation.jsonl`
    structseq report tables [--check]        # rerun every `<!-- generated: COMMAND -->` block (tables.py)

Design: one module per kind of record (`results`, `supertag`, `cter`, `gpu`, `ops`, `compose-scale`, `context`,
`lists`, `bench`), each with `add_arguments(parser)` and `render(args) -> str` (Markdown without a final newline;
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

import sys

from .kinds import KINDS, RAW, Parser, add_kinds, render, run

__all__ = ["KINDS", "main", "parser", "render"]


#: what `structseq report --help` says (the module's docstring is for developers)
HELP = """Tables from records: the generated tables of the documents (README.md, RESULTS.md, docs/).

    structseq report KIND FILES...             # print one, e.g. structseq report results results/foundation.jsonl
    structseq report KIND FILES... --format latex   # the same as booktabs LaTeX
    structseq report tables [--check]          # regenerate every <!-- generated: COMMAND --> block (or check it)

`structseq report KIND --help` lists a kind's options."""


def parser(prog: str = "structseq report") -> Parser:
    """The parser of `structseq report`: a subcommand per kind, and `tables`."""
    from . import tables

    p = Parser(prog=prog, description=HELP, formatter_class=RAW)
    sub = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    add_kinds(sub)
    tables.add_arguments(sub.add_parser("tables", help=tables.HELP, description=tables.__doc__, formatter_class=RAW))
    return p


def main(argv: list[str] | None = None, prog: str = "structseq report") -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser(prog).parse_args(argv)
    if args.kind == "tables":
        from . import tables

        return tables.run(args)
    print(run(args, argv))
    return 0
