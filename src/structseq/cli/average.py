"""`structseq average RUN --last N` (or `--checkpoints A B ...`): an averaged checkpoint that `evaluate` and
`predict` load with `--checkpoint NAME` (fairseq's average_checkpoints; see `structseq.run.averaging`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from structseq.errors import StructseqError
from structseq.run.averaging import average_checkpoints, last_step_checkpoints
from structseq.run.checkpoint import resolve_checkpoint
from structseq.run.layout import TRAINED, checkpoint_file, checkpoints_dir

#: checkpoints an averaged one may never replace: resuming needs last.pt's optimiser state; best.pt is the
#: run's own selection
PROTECTED = tuple(f"{name}.pt" for name in TRAINED)


def _resolve_input(run_dir: Path, spec: str) -> Path:
    """A checkpoint given as a file, or as a name in RUN/checkpoints (`step1000`, `step1000.pt`)."""
    path = Path(spec)
    if path.is_file():
        return path
    return resolve_checkpoint(run_dir, spec.removesuffix(".pt"))[1]


def _output(run_dir: Path, out: Optional[Path], default: str) -> Path:
    """`-o`: a file path, or a bare name (no folder, no suffix) for RUN/checkpoints/NAME.pt."""
    if out is None:
        return checkpoint_file(run_dir, default)
    if out.parent == Path(".") and not out.suffix and not out.exists():
        return checkpoint_file(run_dir, out.name)
    return out


def plan(run_dir: Path, listed: list[str], last: Optional[int], out: Optional[Path]) -> tuple[list[Path], Path]:
    """The checkpoints to average, oldest first, and the output file; errors for a contradictory request."""
    if not run_dir.is_dir():
        raise StructseqError(f"{run_dir}: no such run directory")
    if (last is None) == (not listed):
        raise StructseqError("give either --last N or --checkpoints A B ... (one of them)")
    if last is not None:
        inputs, default = last_step_checkpoints(run_dir, last), f"avg-last{last}"
    else:
        inputs, default = [_resolve_input(run_dir, s) for s in listed], "avg"
    target = _output(run_dir, out, default)
    resolved = {p.resolve() for p in inputs}
    if target.resolve() in resolved:
        raise StructseqError(f"{target}: is one of the checkpoints being averaged; choose another -o")
    if target.resolve().parent == checkpoints_dir(run_dir).resolve() and target.name in PROTECTED:
        raise StructseqError(
            f"{target}: an averaged checkpoint never replaces the run's {target.name} "
            "(resuming needs last.pt's optimiser state); choose another -o"
        )
    return inputs, target


def average(
    run_dir: Path = typer.Argument(..., help="the run directory"),
    checkpoints: Optional[list[str]] = typer.Argument(
        None,
        metavar="CKPT",
        help="with --checkpoints: the checkpoints to average, oldest "
        "first (files, or names in RUN/checkpoints: step1000)",
    ),
    last: Optional[int] = typer.Option(
        None, "--last", min=1, help="average the last N step checkpoints the run kept (train.keep_last >= N)"
    ),
    listed: bool = typer.Option(False, "--checkpoints", help="average the checkpoints listed after RUN instead"),
    out: Optional[Path] = typer.Option(
        None,
        "--out",
        "-o",
        help="the averaged checkpoint: a file, or a NAME for "
        "RUN/checkpoints/NAME.pt [default: avg-lastN, or avg with --checkpoints]",
    ),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace an existing output file"),
):
    """Average checkpoints as fairseq's average_checkpoints does (parameters averaged elementwise, integer
    buffers from the last, optimiser state dropped) into one checkpoint with the run's config, vocabularies and
    task state; evaluate or predict it with --checkpoint NAME (e.g. avg-last5)."""
    checkpoints = list(checkpoints or [])
    if checkpoints and not listed:
        raise StructseqError(
            f"unexpected arguments after RUN: {' '.join(checkpoints)} (to average given "
            "checkpoints, write --checkpoints before them)"
        )
    if listed and not checkpoints:
        raise StructseqError("--checkpoints: list the checkpoints to average after RUN")
    inputs, target = plan(run_dir, checkpoints, last, out)
    if target.exists() and not overwrite:
        raise StructseqError(f"{target} exists; pass --overwrite to replace it")
    info = average_checkpoints(inputs, target)
    steps = ", ".join(map(str, info["steps"]))
    typer.echo(f"averaged {len(inputs)} checkpoints (steps {steps}) into {target}")
    if target.resolve().parent == checkpoints_dir(run_dir).resolve():
        typer.echo(f"evaluate it with: structseq evaluate {run_dir} --checkpoint {target.stem}")
