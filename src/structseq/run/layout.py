"""A run directory's layout: the one place that names the files of a run (`structseq train` writes them,
every other command reads them through these functions).

    RUN_DIR/
      .lock                 advisory lock held for the life of a run (owner pid, host, start time)
      .structseq-run        marker: this directory was created for a run (its files may be replaced)
      config.yaml           the run's config (rewritten when `--resume` extends train.max_steps)
      config-history.jsonl  one line per change of the config of the run (`--resume --set train.max_steps=N`)
      metrics.jsonl         training and validation records, truncated to the checkpoint's step on resume
      data-files.json       the sha256 of each data file the run read at its start (`--resume` refuses changed data)
      checkpoints/          {last,best}.pt, step{K}.pt (`train.keep_last`), avg-lastN.pt (`structseq average`)
      predictions/          LABEL.tsv and LABEL.metrics.json of each evaluation (`structseq.evaluation`)
      tensorboard/          event files (`train.tensorboard`)

`tests/repo/test_architecture.py` checks that no module outside `structseq.run` spells these names in a path.
"""

from __future__ import annotations

import glob
from pathlib import Path

from structseq.errors import StructseqError

LOCK = ".lock"
MARKER = ".structseq-run"
CONFIG = "config.yaml"
METRICS = "metrics.jsonl"
HISTORY = "config-history.jsonl"
DATA_FILES = "data-files.json"
CHECKPOINTS = "checkpoints"
PREDICTIONS = "predictions"
TENSORBOARD = "tensorboard"
#: the names a run writes; a new run refuses a directory holding any of them that no run created
OWNED = (CONFIG, METRICS, HISTORY, DATA_FILES, CHECKPOINTS, PREDICTIONS, TENSORBOARD)
#: the checkpoints `structseq train` writes itself (`structseq average` never replaces them)
TRAINED = ("last", "best")


class RunDirError(StructseqError):
    """A run directory that cannot be used as asked (in use, holds another run or foreign files)."""


def config_file(run_dir: str | Path) -> Path:
    return Path(run_dir) / CONFIG


def metrics_file(run_dir: str | Path) -> Path:
    return Path(run_dir) / METRICS


def history_file(run_dir: str | Path) -> Path:
    return Path(run_dir) / HISTORY


def data_files_record(run_dir: str | Path) -> Path:
    return Path(run_dir) / DATA_FILES


def tensorboard_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / TENSORBOARD


def checkpoints_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / CHECKPOINTS


def checkpoint_file(run_dir: str | Path, name: str) -> Path:
    """`RUN/checkpoints/NAME.pt` (no check of `name`: `checkpoint.resolve_checkpoint` checks what users give)."""
    return checkpoints_dir(run_dir) / f"{name}.pt"


def step_file(run_dir: str | Path, step: int) -> Path:
    """The step checkpoint `train.keep_last` keeps: `RUN/checkpoints/step{K}.pt`."""
    return checkpoint_file(run_dir, f"step{step}")


def predictions_dir(run_dir: str | Path) -> Path:
    return Path(run_dir) / PREDICTIONS


def prediction_files(run_dir: str | Path, label: str) -> tuple[Path, Path]:
    """An evaluation's predictions TSV and its metrics JSON: `RUN/predictions/LABEL.tsv`, `LABEL.metrics.json`."""
    folder = predictions_dir(run_dir)
    return folder / f"{label}.tsv", folder / f"{label}.metrics.json"


def check_directory(run_dir: Path) -> None:
    """A run directory must be a folder (or not exist yet)."""
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"{run_dir} is an existing file, not a run directory; choose another --out")


def is_run_folder(path: str | Path) -> bool:
    """A run folder: a directory holding a run's config.yaml or its checkpoints/ (what `structseq train` makes)."""
    p = Path(path)
    return p.is_dir() and (config_file(p).is_file() or checkpoints_dir(p).is_dir())


def run_folders(args: list[str | Path]) -> list[Path]:
    """The runs named by RUN arguments, the one rule of every command that takes runs: a path as given; a glob
    (quoted, so the shell leaves it) its run folders, sorted, its other matches skipped (train-many's NAME.log
    and many.json beside `runs/many/x-seed*`); a glob with no run folder among its matches is a RunDirError
    naming the pattern and what it matched."""
    out: list[Path] = []
    for arg in map(str, args):
        if Path(arg).exists() or not glob.has_magic(arg):
            out.append(Path(arg))
            continue
        matches = sorted(glob.glob(arg))
        runs = [Path(m) for m in matches if is_run_folder(m)]
        if not runs:
            seen = f"it matches {len(matches)} path(s), e.g. {matches[0]}, " if matches else "it matches nothing; "
            raise RunDirError(
                f"{arg}: no run folder matches this pattern ({seen}a run folder is a directory with a run's "
                "config.yaml or checkpoints/)"
            )
        out += runs
    return out
