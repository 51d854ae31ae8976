"""`structseq report`: the tables of the documents from their records. The commands, their options and help are
typer's, declared with the kinds in `structseq.report` (so that `structseq report tables` renders a block in
its own process); every argument is passed through to them, and `--format latex` turns a kind's Markdown tables
into booktabs LaTeX, as `compare --format latex`."""

from __future__ import annotations

import typer

#: every argument, `--help` included, goes to the report's own commands
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def report(ctx: typer.Context) -> None:
    """Tables from records: structseq report KIND FILES... prints one (--format latex: booktabs LaTeX);
    structseq report tables [--check] regenerates (or checks) the generated tables of the documents."""
    from structseq.compare.render import markdown_latex
    from structseq.report import main

    raise typer.Exit(main([*ctx.args], formats={"latex": markdown_latex}))
