"""`structseq train-many CONFIG... --seeds 1,2,3 --out DIR`: K runs at once, one process pinned to its own cores
each (`structseq.train.many`); the same command again continues every run from its last checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from structseq.cli.options import DataRoot
from structseq.errors import StructseqError


def train_many(
    configs: list[Path] = typer.Argument(..., help="YAML config files (each trained at every seed)"),
    out: Path = typer.Option(..., "--out", "-o", help="folder of the runs (OUT/<config stem>-seed<N>)"),
    seeds: str = typer.Option("1", "--seeds", help="comma-separated seeds, e.g. 1,2,3"),
    set_: list[str] = typer.Option([], "--set", help="override for every new run (repeatable)"),
    cores_per_run: Optional[int] = typer.Option(None, "--cores-per-run", min=1, help="default: an equal share"),
    data_root: Optional[Path] = DataRoot,
):
    """Train every config at every seed at once on this machine (one GPU or the CPU), each run a process on
    its own cores; OUT/many.json records exit statuses and the aggregate updates a minute. SIGTERM or Ctrl-C
    is passed on: every run saves and stops, and the same command continues them."""
    from structseq.train.many import train_many as launch

    try:
        seed_list = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise StructseqError(f"--seeds: {seeds!r} is not a comma-separated list of integers") from None
    summary = launch(configs, seed_list, out, set_, cores_per_run, data_root)
    for r in summary["runs"]:
        typer.echo(
            f"{r['name']}: exit {r['exit']}, updates {r['steps_before']} -> {r['steps_after']}, cores {r['cores']}"
        )
    typer.echo(f"{summary['k']} runs, {summary['aggregate_updates_per_min']} updates/min together; {out}/many.json")
    raise typer.Exit(summary["exit"])
