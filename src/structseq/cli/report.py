"""`structseq report`: the tables of the documents from their records (`structseq.report`, argparse), every
argument passed through so that `structseq report KIND --help` prints the kind's own description."""

from __future__ import annotations

import typer

#: every argument, `--help` included, goes to the report's own parser
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def report(ctx: typer.Context) -> None:
    """Markdown tables from records (`structseq report KIND ...`), and `structseq report tables [--check]`
    to regenerate or check every generated table of the documents (`structseq report --help`)."""
    from structseq.report import main

    raise typer.Exit(main([*ctx.args]) or 0)
