"""The kinds of table (`KINDS`) and the typer commands that parse and render one: `structseq report KIND ARGS...`."""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import typer
from typer.core import TyperCommand, TyperGroup

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
#: `--format`: Markdown; LaTeX where the caller converts it (`structseq report`: booktabs, as `compare`)
FORMATS = ("markdown", "latex")
#: the `dest`s of the options through which a kind writes a file (`--plot`, `--out`): a kind's only outputs,
#: which `structseq report tables` keeps under the repository root and leaves out with --check
OUTPUTS = ("plot", "out")
#: what a renderer raises on a record of another shape than it reads (a number where it indexes, a list too
#: short): a missing key is already a DataError (`records.Record`)
SHAPE_ERRORS = (KeyError, TypeError, IndexError, ValueError)


def _format(value: str) -> str:
    if value not in FORMATS:
        raise StructseqError(f"--format {value!r}: choose one of {', '.join(FORMATS)}")
    return value


#: every kind's `--format` option (its command returns it with its other arguments)
FORMAT = typer.Option(
    "markdown", "--format", callback=_format, help="markdown, or latex: the tables as booktabs LaTeX (as compare)"
)


class Command(TyperCommand):
    """A kind's command, reading the words the documents' commands were written in for argparse: a list option
    takes every word after it up to the next option (`--curve A B C`, besides `--curve A --curve B`), and a long
    option may be shortened to a prefix only it has (`--plo` for `--plot`)."""

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        options = [p for p in self.params if p.param_type_name == "option"]
        several = {name for p in options if p.multiple for name in p.opts}
        longs = [name for p in options for name in p.opts if name.startswith("--")]
        out, option, first = [], None, False
        for word in args:
            name, sep, value = word.partition("=")
            whole = [o for o in longs if o.startswith(name)] if name.startswith("--") and name not in longs else []
            word = whole[0] + sep + value if len(whole) == 1 else word
            if option is not None and not (word.startswith("-") and word != "-"):
                out += [word] if first else [option, word]  # `--curve A B` -> `--curve A --curve B`
                first = False
                continue
            option = word if word in several else None
            first = option is not None
            out.append(word)
        return super().parse_args(ctx, out)


class Group(TyperGroup):
    """`structseq report`'s commands: a usage error (an unknown kind or option, a missing file argument) is one
    line, as every error of the toolkit (`structseq.errors.run_cli`), not click's usage box."""

    def resolve_command(self, ctx: typer.Context, args: list[str]):
        if args and not args[0].startswith("-") and self.get_command(ctx, args[0]) is None:
            raise StructseqError(
                f"{ctx.command_path}: argument KIND: invalid choice: {args[0]!r} (choose from "
                f"{', '.join(self.commands)})"
            )
        return super().resolve_command(ctx, args)

    def parse_args(self, ctx: typer.Context, args: list[str]) -> list[str]:
        with _one_line(ctx):
            return super().parse_args(ctx, args)

    def invoke(self, ctx: typer.Context):
        with _one_line(ctx):
            return super().invoke(ctx)


@contextmanager
def _one_line(ctx: typer.Context):
    """typer's usage errors (in this command or the one it calls: click's, which typer carries) as a one-line
    StructseqError."""
    try:
        yield
    except typer.TyperException as e:
        failed = getattr(e, "ctx", None)  # a usage error knows the command it is about
        path = failed.command_path if failed is not None else ctx.command_path
        raise StructseqError(f"{path}: {' '.join(e.format_message().split())} (see {path} --help)") from None


def _kind(name: str, mod) -> Callable[..., argparse.Namespace]:
    """`mod.command` (its signature is the kind's options) returning its Namespace with the kind's `kind` and
    `render`."""

    @functools.wraps(mod.command)
    def parsed(**params) -> argparse.Namespace:
        args = mod.command(**params)
        args.kind, args.render = name, mod.render
        return args

    return parsed


#: a command besides the kinds: name -> (function, help, short help)
Extra = dict[str, tuple[Callable, str, str]]


def app(help: str = "", extra: Extra | None = None) -> typer.Typer:
    """`structseq report`: a command per kind (its module's `command`: typer options, returning its arguments
    as a Namespace for the module's `render`) and the `extra` ones (`structseq report tables`)."""
    a = typer.Typer(
        cls=Group, help=help, add_completion=False, context_settings={"help_option_names": ["-h", "--help"]}
    )
    for name, (module, short) in KINDS.items():
        mod = importlib.import_module(f"structseq.report.{module}")
        if isinstance(mod.command, typer.Typer):  # a kind with tables of its own (gpu tests, gpu train, ...)
            a.add_typer(mod.command, name=name, help=short, cls=Group)
        else:
            text = f"{short}.\n\n{inspect.cleandoc(mod.command.__doc__ or '')}"
            a.command(name, help=text, short_help=short, cls=Command)(_kind(name, mod))
    for name, (function, text, short) in (extra or {}).items():
        a.command(name, help=text, short_help=short, cls=Command)(function)
    return a


def invoke(argv: list[str], prog: str = "structseq report", help: str = "", extra: Extra | None = None):
    """`argv` parsed by `app`: a kind's arguments (a Namespace naming its `kind` and `render`), or an exit status
    (a `--help` printed, or an `extra` command run). Usage errors are one-line StructseqErrors."""
    from typer.main import get_command

    value = get_command(app(help, extra)).main(list(argv), prog_name=prog, standalone_mode=False)
    return value if isinstance(value, argparse.Namespace) else int(value or 0)


def parse(argv: list[str], prog: str = "structseq report") -> argparse.Namespace:
    """The arguments of `structseq report KIND ARGS...` (`argv` without `structseq report`; no `tables`)."""
    args = invoke(argv, prog)
    if not isinstance(args, argparse.Namespace):
        raise StructseqError(f"{prog}: give a KIND and its arguments, not only --help")
    return args


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
