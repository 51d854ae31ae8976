"""`structseq report`: the tables of the documents from their records (`structseq.report`, its own parser per
kind), every argument passed through so that `structseq report KIND --help` prints the kind's own description;
`--format latex` (here, before the kind's parser) turns its Markdown tables into booktabs LaTeX."""

from __future__ import annotations

import typer

#: every argument, `--help` included, goes to the report's own parser
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}

FORMATS = ("markdown", "latex")


def _format(args: list[str]) -> tuple[str, list[str]]:
    """`--format FMT` / `--format=FMT` taken out of a kind's arguments: (FMT, the rest)."""
    from structseq.errors import ConfigError

    fmt, rest, i = "markdown", [], 0
    while i < len(args):
        a = args[i]
        if a == "--format" or a.startswith("--format="):
            if a == "--format" and i + 1 >= len(args):
                raise ConfigError(f"--format needs a value: {', '.join(FORMATS)}")
            fmt = a.partition("=")[2] if "=" in a else args[i + 1]
            i += 1 if "=" in a else 2
            continue
        rest.append(a)
        i += 1
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    return fmt, rest


def report(ctx: typer.Context) -> None:
    """Tables from records: `structseq report KIND FILES...` prints one (Markdown; `--format latex` for booktabs
    LaTeX, as `compare --format latex`), `structseq report tables [--check]` regenerates (or checks) every
    generated table of the documents. `structseq report --help` lists the kinds, `structseq report KIND --help`
    each one's options."""
    from structseq.report import main, render

    fmt, args = _format([*ctx.args])
    if fmt == "markdown":
        raise typer.Exit(main(args) or 0)
    from structseq.compare.render import markdown_latex
    from structseq.errors import ConfigError

    if args[:1] == ["tables"] or not args:
        raise ConfigError("--format latex renders one table kind (structseq report KIND ... --format latex)")
    typer.echo(markdown_latex(render(args)), nl=False)
