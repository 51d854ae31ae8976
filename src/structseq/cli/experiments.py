"""`structseq sweep` and `structseq plan`: the experiment runner's own argument parsers (argparse, in
`structseq.experiments`), so that the commands take exactly what `scripts/reproduce.py` and `scripts/plan.py`
take and `--help` prints their full description."""

from __future__ import annotations

import typer

#: every argument, `--help` included, goes to the module's own parser
PASS_THROUGH = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def sweep(ctx: typer.Context) -> None:
    """Train and evaluate configs x seeds into JSON-lines records (restartable; `structseq sweep --help`)."""
    from structseq.experiments.sweep import main

    raise typer.Exit(main([*ctx.args], prog="structseq sweep") or 0)


def plan(ctx: typer.Context) -> None:
    """The reproduction plan: which table cells the records fill, what the rest costs, and `--run` to fill them
    (`structseq plan --help`)."""
    from structseq.experiments.plan import main

    raise typer.Exit(main([*ctx.args], prog="structseq plan") or 0)
