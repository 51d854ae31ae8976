"""`structseq train-many CONFIG... --seeds 1,2,3 --out DIR`: K runs at once, one process pinned to its own cores
each (`structseq.train.many`); the same command again continues every run from its last checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from structseq.cli.options import DataRoot, parse_seeds


def train_many(
    configs: list[Path] = typer.Argument(..., help="YAML config files (each trained at every seed)"),
    out: Path = typer.Option(..., "--out", "-o", help="folder of the runs (OUT/<config stem>-seed<N>)"),
    seeds: str = typer.Option("1", "--seeds", help="comma-separated seeds, e.g. 1,2,3"),
    set_: list[str] = typer.Option([], "--set", help="override for every new run (repeatable)"),
    cores_per_run: Optional[int] = typer.Option(None, "--cores-per-run", min=1, help="default: an equal share"),
    data_root: Optional[Path] = DataRoot,
    report_every: float = typer.Option(
        10.0, "--report-every", min=0, help="seconds between progress lines, one per run (0: none)"
    ),
):
    """Train every config at every seed at once on this machine (one GPU or the CPU), each run a process on
    its own cores: one progress line per run every --report-every seconds, each run's full log in
    OUT/<run>.log, exit statuses and the aggregate updates a minute in OUT/many.json. SIGTERM or Ctrl-C is
    passed on: every run saves and stops, and the same command continues them (a config edited since a run
    started is refused, naming the keys; a larger train.max_steps extends the runs)."""
    from structseq.train.many import train_many as launch

    summary = launch(configs, parse_seeds(seeds), out, set_, cores_per_run, data_root, report_every, typer.echo)
    for r in summary["runs"]:
        typer.echo(
            f"{r['name']}: exit {r['exit']}, updates {r['steps_before']} -> {r['steps_after']}, cores {r['cores']}"
        )
    typer.echo(f"{summary['k']} runs, {summary['aggregate_updates_per_min']} updates/min together; {out}/many.json")
    raise typer.Exit(summary["exit"])
