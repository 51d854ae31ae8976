"""Options and progress of `structseq compose build --shards N`: the out-of-core path (`compose.sharded`)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Optional

import typer

ShardsOpt = Annotated[
    Optional[int],
    typer.Option(help="Run out of core on N shards per corpus (the sharded or scale extra); default: in memory."),
]
EngineOpt = Annotated[
    str, typer.Option(help="With --shards: local (processes), inline (this process) or ray (the scale extra).")
]
WorkersOpt = Annotated[Optional[int], typer.Option(help="With --shards: parallel tasks (default: CPUs, at most N).")]
AddressOpt = Annotated[Optional[str], typer.Option(help="With --engine ray: a running cluster (default: start one).")]
MemoryOpt = Annotated[str, typer.Option(help="With --shards: DuckDB's memory limit for the counts (spills beyond).")]
WorkDirOpt = Annotated[Optional[Path], typer.Option(help="With --shards: shard folder (default OUT_DIR/work).")]
MaxLengthOpt = Annotated[
    Optional[int],
    typer.Option(help="Longest line in tokens (train: skipped and named; pool: an error naming file:line)."),
]
CleanWorkOpt = Annotated[
    bool,
    typer.Option(
        "--clean-work/--keep-work",
        help="With --shards: delete the build's work folder once it succeeds (default: keep it, to resume or rerun).",
    ),
]
GpusOpt = Annotated[float, typer.Option(help="With --shards --engine ray: GPUs per uncertainty task.")]


class Opt:
    """The options above, one import for `compose build`."""

    Shards, Engine, Workers, Address, Memory = ShardsOpt, EngineOpt, WorkersOpt, AddressOpt, MemoryOpt
    WorkDir, MaxLength, Gpus, CleanWork = WorkDirOpt, MaxLengthOpt, GpusOpt, CleanWorkOpt


#: seconds between progress lines when stderr is not a terminal
LINE_EVERY = 60.0


def stage_progress(console):
    """(stage, tasks) -> callback per finished task: a rich bar on a terminal, else a line a minute per stage."""
    if console.is_terminal:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        bars = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        )
        bars.start()

        def factory(stage: str, total: int):
            task = bars.add_task(stage, total=total)
            return lambda record: bars.advance(task)

        return factory, bars.stop

    last = [time.monotonic()]

    def lines(stage: str, total: int):
        finished = [0]

        def advance(record: dict) -> None:
            finished[0] += 1
            now = time.monotonic()
            if now - last[0] >= LINE_EVERY:
                print(f"{stage}: {finished[0]}/{total} shards", file=sys.stderr, flush=True)
                last[0] = now

        return advance

    return lines, lambda: None


def run_sharded(console, train, pool, out_dir, config, **kwargs) -> dict:
    """`build_sharded` with progress on `console` and a line per finished stage."""
    from structseq.compose.sharded import build_sharded

    factory, stop = stage_progress(console)
    try:
        log = lambda line: console.print(line, soft_wrap=True, markup=False, highlight=False)  # noqa: E731 (a path: one line)
        return build_sharded(train, pool, out_dir, config=config, progress=factory, log=log, **kwargs)
    finally:
        stop()


def sharded_summary(report: dict) -> str:
    """What was read, skipped and written, in one line."""
    info = report["sharded"]
    read = info["read"]
    return (
        f"{info['engine']} engine, {info['workers']} worker(s): read {report['train']['sentences']} training "
        f"sentences ({info['shards']['train']} shards) and {read['pool_sentences']} pool sentences "
        f"({info['shards']['pool']} shards); skipped {info['skipped']['count']} over-long line(s); "
        f"wrote {report['candidates']['count']} candidates; "
        + (f"removed {info['work_dir']}" if info.get("work_removed") else f"shards kept in {info['work_dir']}")
    )
