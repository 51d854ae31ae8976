"""The kinds of table (`KINDS`) and the parser that renders one: `structseq report KIND ARGS...`."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path

from structseq.errors import StructseqError, describe

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
    "grammar": ("grammar", "grammar constraints on trained runs: ill-formed outputs, exact match, decoding time"),
    "mutants": ("mutants", "mutation scores of a change per module (scripts/mutants_changed.py, mutmut)"),
    "lists": ("lists", "the README's lists of tasks, model families, datasets, metrics, extension points"),
}
RAW = argparse.RawDescriptionHelpFormatter
#: the `dest`s of the options through which a kind writes a file (`--plot`, `--out`): a kind's only outputs,
#: which `structseq report tables` keeps under the repository root and leaves out with --check
OUTPUTS = ("plot", "out")
#: what a renderer raises on a record of another shape than it reads (a number where it indexes, a list too
#: short): a missing key is already a DataError (`records.Record`)
SHAPE_ERRORS = (KeyError, TypeError, IndexError, ValueError)


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


def parse(argv: list[str], prog: str = "structseq report") -> argparse.Namespace:
    """The arguments of `structseq report KIND ARGS...` (`argv` without `structseq report`)."""
    p = Parser(prog=prog)
    add_kinds(p.add_subparsers(dest="kind", required=True, metavar="KIND"))
    return p.parse_args(argv)


def inputs(args: argparse.Namespace, argv: list[str]) -> list[str]:
    """The files and folders `argv` names as a kind's inputs (FILE of `LABEL=FILE`; not its outputs)."""
    written = {str(getattr(args, dest)) for dest in OUTPUTS if getattr(args, dest, None) is not None}
    found: list[str] = []
    for word in argv[1:]:
        path = word if Path(word).exists() else word.partition("=")[2]
        if not word.startswith("-") and path and path not in written and path not in found and Path(path).exists():
            found.append(path)
    return found


def run(args: argparse.Namespace, argv: list[str]) -> str:
    """`args.render(args)`; a record the renderer cannot read (`SHAPE_ERRORS`) is a one-line StructseqError
    naming the kind and its input files rather than a traceback (`argv`: the words `args` were parsed from).
    The files it reads are recorded, so that no output replaces one (`records.check_output`)."""
    from structseq.textio import recording_reads

    try:
        with recording_reads():
            return args.render(args)
    except SHAPE_ERRORS as e:
        if describe(e) is not None:  # text that is not UTF-8, JSON that does not parse: already one line
            raise
        files = ", ".join(inputs(args, argv)) or "(no input file)"
        problem = " ".join(f"{type(e).__name__}: {e}".splitlines())
        raise StructseqError(
            f"structseq report {args.kind}: {files}: a record is not of the shape this table reads ({problem})"
        ) from e


def render(argv: list[str], prog: str = "structseq report") -> str:
    """The Markdown of `structseq report KIND ARGS...` (`argv` without `structseq report`)."""
    return run(parse(argv, prog), argv)
