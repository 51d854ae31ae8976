"""The kinds of table (`KINDS`) and the parser that renders one: `structseq report KIND ARGS...`."""

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
RAW = argparse.RawDescriptionHelpFormatter


class Parser(argparse.ArgumentParser):
    """Usage errors as a one-line StructseqError (`structseq.errors.run_cli`), not an exit from inside a check."""

    def error(self, message: str):
        raise StructseqError(f"{self.prog}: {message}")


def add_kinds(sub) -> None:
    """A subcommand per kind, its module's arguments and renderer (`args.render`)."""
    for name, (module, help) in KINDS.items():
        mod = importlib.import_module(f"structseq.report.{module}")
        q = sub.add_parser(name, help=help, description=mod.__doc__, formatter_class=RAW)
        mod.add_arguments(q)
        q.set_defaults(render=mod.render)


def render(argv: list[str], prog: str = "structseq report") -> str:
    """The Markdown of `structseq report KIND ARGS...` (`argv` without `structseq report`)."""
    p = Parser(prog=prog)
    add_kinds(p.add_subparsers(dest="kind", required=True, metavar="KIND"))
    args = p.parse_args(argv)
    return args.render(args)
