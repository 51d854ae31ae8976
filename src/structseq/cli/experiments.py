"""`structseq sweep` and `structseq plan`: the experiment runner (`structseq.experiments`) in the typer style of
every other command; `scripts/reproduce.py` and `scripts/plan.py` are the same commands under their old names.
Seeds and cells are comma-separated lists (`--seeds 1,2,3`, `--cell a,b`), as in `train-many`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from structseq.cli.options import parse_seeds
from structseq.errors import ConfigError


def _configs(configs: list[str]) -> list[str]:
    """The config files; a bare integer that is no file is the old `--seeds 1 2` style: a one-line hint."""
    for c in configs:
        if c.strip().lstrip("-").isdigit() and not Path(c).exists():
            raise ConfigError(f"{c} is not a config file: --seeds takes a comma-separated list (--seeds 1,2,3)")
    return configs


def _cells(cells: list[str]) -> list[str] | None:
    """`--cell a,b --cell c` -> [a, b, c] (None: every cell)."""
    ids = [i.strip() for item in cells for i in item.split(",") if i.strip()]
    return ids or None


def sweep(
    configs: list[str] = typer.Argument(..., help="YAML config files, each trained at every seed"),
    seeds: str = typer.Option("1", "--seeds", help="comma-separated seeds, e.g. 1,2,3 (each seed once)"),
    out: str = typer.Option(
        "results/foundation.jsonl", "--out", "-o", help="JSON-lines records, one per run and test split (appended)"
    ),
    runs: str = typer.Option("runs/repro", "--runs", help="folder of the run directories"),
    jobs: int = typer.Option(1, "--jobs", help="runs at once, each a process (>= 1)"),
    set_: list[str] = typer.Option([], "--set", help="override for every run, e.g. --set optim.lr=1e-3 (repeatable)"),
    curve_every: int = typer.Option(
        0, "--curve-every", help="learning curve: evaluate the checkpoint every N updates (0: none)"
    ),
    curve_seeds: str = typer.Option("", "--curve-seeds", help="comma-separated seeds that get the learning curve"),
    curve_out: Optional[str] = typer.Option(None, "--curve-out", help="the curve's records [default: OUT-curve.jsonl]"),
):
    """Train and evaluate every config at every seed, one JSON line per run and test split in OUT.

    Restartable: a run already recorded in OUT is skipped (and named), a finished training is evaluated without
    retraining, an interrupted one resumes from its last checkpoint. Runs are named RUNS/DATASET-CONFIG-sN
    (configs/DATASET/CONFIG.yaml; a config elsewhere by its file name), with the overrides' keys and values.
    """
    from structseq.experiments.sweep import run_sweep

    seed_list = parse_seeds(seeds)
    curve = parse_seeds(curve_seeds, "--curve-seeds") if curve_seeds.strip() else []
    code = run_sweep(_configs(configs), seed_list, out, runs, jobs, set_, curve_every, curve, curve_out)
    raise typer.Exit(code)


def plan(
    plan_file: str = typer.Argument(..., metavar="PLAN", help="the plan YAML (configs/plans/*.yaml)"),
    run: bool = typer.Option(False, "--run", help="train and evaluate the missing runs, in plan order"),
    cell: list[str] = typer.Option([], "--cell", help="only these cells, comma-separated ids (--run: in this order)"),
    dry_run: bool = typer.Option(False, "--dry-run", help="with --run: list the runs it would start"),
    probe: bool = typer.Option(
        False, "--probe", help="time a short run of each config no record prices; the table then uses it (marked ~)"
    ),
    probe_steps: tuple[int, int] = typer.Option(
        (10, 40), "--probe-steps", metavar="S1 S2", help="time the updates between these two"
    ),
    probe_batches: int = typer.Option(2, "--probe-batches", help="decoding batches timed per test split (>= 1)"),
    probes: str = typer.Option("results/plan-probes.jsonl", "--probes", help="the probes' records"),
):
    """The reproduction plan: which table cells the records fill, what the rest costs, and --run to fill them.

    Paths in the plan are relative to the working directory: run it from the repository root. --run is safe to
    start once per core: a run another --run has claimed is skipped.
    """
    from structseq.experiments.plan import plan_command

    raise typer.Exit(
        plan_command(plan_file, run, _cells(cell), dry_run, probe, tuple(probe_steps), probe_batches, probes)
    )
