"""Every generated table of the documents (README.md, RESULTS.md, docs/): records in, Markdown out.

    structseq report KIND ARGS...            # print one table, e.g. `structseq report results results/foundation.jsonl`
    structseq report tables [--check]        # rerun every `<!-- generated: COMMAND -->` block (tables.py)

Design: one module per kind of record (`results`, `supertag`, `cter`, `gpu`, `ops`, `compose-scale`, `context`,
`lists`, `bench`), each with `add_arguments(parser)` and `render(args) -> str` (Markdown without a final newline;
nothing printed, nothing written except a `--plot`/`--out` file the caller names, through `structseq.outputs`).
`KINDS` below is the only list of them: a new table is a new file here and one line in `KINDS`. Records are read
as UTF-8 by `records.py` (errors name file and line); mean ± sd cells are `metrics.significance.format_mean_sd`.
A package rather than one module: the kinds together are ~1,500 lines, three times the 450-line rule, and a
reader looking for one table opens one file. `tables.py` renders the blocks in this process (no interpreter
per block), so the suite's check is cheap.
"""

from __future__ import annotations

import argparse
import importlib

from structseq.errors import StructseqError

#: kind -> (module in this package, one line of help)
KINDS = {
    "results": ("results", "`structseq sweep` records: mean ± sd over seeds, learning curves, per category"),
    "supertag": ("supertag", "supertagging evaluation JSONs: Table 2 columns, beam, beta curve"),
    "cter": ("cter", "our CoGnition CTER against the paper's human judgements"),
    "context": ("context", "context-aware runs per split, or encoder attention statistics (--attention)"),
    "gpu": ("gpu", "GPU records in results/gpu/: tests, train, decode, ab, reproduce"),
    "ops": ("ops", "operators per update, and batch composition (buckets)"),
    "compose-scale": ("compose_scale", "the compose corpus-scale benchmark, measured or extrapolated"),
    "bench": ("bench", "benchmark JSON files (benchmarks/*.py), one kind per benchmark"),
    "lists": ("lists", "the README's lists of tasks, model families, datasets, metrics, extension points"),
}


class _Parser(argparse.ArgumentParser):
    """Usage errors as a one-line StructseqError (`structseq.errors.run_cli`), not an exit from inside a check."""

    def error(self, message: str):
        raise StructseqError(f"{self.prog}: {message}")


def parser(prog: str = "structseq report") -> argparse.ArgumentParser:
    """The parser of `structseq report`: a subcommand per kind, and `tables`."""
    from . import tables

    p = _Parser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="kind", required=True, metavar="KIND")
    for name, (module, help) in KINDS.items():
        mod = importlib.import_module(f"{__name__}.{module}")
        q = sub.add_parser(
            name, help=help, description=mod.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        mod.add_arguments(q)
        q.set_defaults(render=mod.render)
    q = sub.add_parser(
        "tables", help=tables.HELP, description=tables.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    tables.add_arguments(q)
    return p


def render(argv: list[str]) -> str:
    """The Markdown of `structseq report KIND ARGS...` (`argv` without `structseq report`)."""
    args = parser().parse_args(argv)
    if args.kind == "tables":
        raise StructseqError("`structseq report tables` renders documents, not one table")
    return args.render(args)


def main(argv: list[str] | None = None, prog: str = "structseq report") -> int:
    args = parser(prog).parse_args(argv)
    if args.kind == "tables":
        from . import tables

        return tables.run(args)
    print(args.render(args))
    return 0
