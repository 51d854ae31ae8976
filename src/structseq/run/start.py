"""Where a training run starts, computed once and applied in one place.

`Trainer.__init__` reads: `open_run_dir` (a new run's directory is checked before any data or vocabulary is
read; a resumed run's last checkpoint is loaded) → `starting_point` (the vocabularies and task state of a fresh
run, a resumed one, or one initialised from another run's checkpoint, `train.init_from`) → build the model and
optimiser from it → `apply` (the parameters, and for a resumed run the optimiser, progress and RNG state).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from structseq.config import Config
from structseq.data.vocab import Vocab
from structseq.errors import StructseqError
from structseq.run.checkpoint import RUN_KEYS, init_checkpoint, load_checkpoint, load_model_state
from structseq.run.directory import check_new
from structseq.run.layout import RunDirError, checkpoint_file
from structseq.run.resume import file_identity, load_last, resumed_vocabs, saved_vocabs
from structseq.run.rng import set_rng_state


@dataclass
class OpenedRun:
    """A run directory opened for training (`open_run_dir`); a resumed run's last checkpoint (`state`) and that
    file's identity when it was loaded (`loaded`), None for a new run."""

    out: Path
    state: dict | None = None
    loaded: tuple | None = None

    @property
    def last(self) -> Path:
        return checkpoint_file(self.out, "last")

    @property
    def resumed(self) -> bool:
        return self.state is not None

    def check_unchanged(self) -> None:
        """A RunDirError when the resumed checkpoint is not the file loaded (another run resumed it meanwhile)."""
        if not self.last.exists() or file_identity(self.last) != self.loaded:
            raise RunDirError(
                f"{self.last} changed after this run loaded it (another run resumed it meanwhile?); start --resume again"
            )


def open_run_dir(out: str | Path, resume: bool) -> OpenedRun:
    """The run directory `out` for a new run (`directory.check_new`: one holding a run or files no run created
    is refused, before anything else is read) or for resuming (its last checkpoint loaded and verified)."""
    out = Path(out)
    if not resume:
        check_new(out)
        return OpenedRun(out)
    path, state = load_last(out)
    return OpenedRun(out, state, file_identity(path))


@dataclass
class StartingPoint:
    """What a run starts from: `kind` fresh, resumed or init (`train.init_from`), its vocabularies, and the
    checkpoint (`path`, contents `state`) whose parameters `apply` loads (None for a fresh run)."""

    kind: str
    vocabs: dict[str, Vocab]
    path: Path | None = None
    state: dict | None = None


def starting_point(cfg: Config, task, data, opened: OpenedRun) -> StartingPoint:
    """The starting point of a run on `data` (`load_training_data`'s; its vocabularies built from it), the
    task's learned state (e.g. subwords) loaded into `task`, never relearned:

    - resumed: the vocabularies the run's start made (`resumed_vocabs`: built from the data again, they must be
      the checkpoint's; a `train.init_from` run's are its init checkpoint's);
    - init (`train.init_from`, phase two): another run's checkpoint, whose vocabularies and task state it takes;
    - fresh: the vocabularies built from the data."""
    if opened.resumed:
        ckpt = opened.state
        init_from = ckpt["config"]["train"].get("init_from")  # how the run started, whatever the caller's config
        built = data.vocabs
        if ckpt.get("task"):
            task.load_state_dict(ckpt["task"])
            if not init_from:
                built = task.build_vocabs(data.train)
        return StartingPoint("resumed", resumed_vocabs(ckpt, built, init_from), opened.last, ckpt)
    if cfg.train.init_from:
        path, init = load_init(cfg, task)
        return StartingPoint("init", saved_vocabs(init), path, init)
    return StartingPoint("fresh", data.vocabs)


def apply(start: StartingPoint, model, optimizer) -> Mapping | None:
    """The starting point into the model built from it: an init checkpoint's parameters (`init_parameters`);
    a resumed run's parameters, optimiser state and RNG state (`restore`), returning its saved progress (None
    for any other run)."""
    if start.kind == "init":
        init_parameters(model, start.path, start.state)
    elif start.kind == "resumed":
        return restore(model, optimizer, start.state, start.path)
    return None


def load_init(cfg: Config, task) -> tuple[Path, dict]:
    """`train.init_from`'s checkpoint (path, contents), its task state loaded into `task`; a warning when this
    run would validate on the base's training examples (`holdout_overlap`)."""
    from structseq.data.training import holdout_overlap

    path = init_checkpoint(cfg.train.init_from)
    init = load_checkpoint(path, RUN_KEYS)
    overlap = holdout_overlap(init["config"], cfg.to_dict())
    if overlap:
        warnings.warn(f"'train.init_from' {path}: {overlap}", stacklevel=4)
    task.load_state_dict(init.get("task") or {})
    return path, init


def init_parameters(model, path: Path, init: dict) -> None:
    """The init checkpoint's parameters into `model` (strict: same keys and shapes; tensors it lacks start as
    their source twins, `pretrained_state`, and are named on stderr)."""
    state, filled = model.pretrained_state(init["model"])
    load_model_state(model, state, path)
    if filled:
        print(
            f"init_from {path}: {len(filled)} tensors the checkpoint lacks start as their source "
            f"twins ({', '.join(sorted({n.rsplit('.', 2)[0] for n in filled})[:4])}, ...)",
            file=sys.stderr,
        )


def restore(model, optimizer, ckpt: dict, path: Path) -> Mapping:
    """A resumed run's parameters, optimiser state and RNG state restored; returns its saved progress."""
    load_model_state(model, ckpt["model"], path)
    try:
        optimizer.load_state_dict(ckpt["optimizer"])
        progress = dict(ckpt["progress"])
        set_rng_state(ckpt["rng"])
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        raise StructseqError(
            f"{path}: the optimiser, progress or RNG state does not fit this run "
            f"({type(e).__name__}: {' '.join(str(e).split())[:300]})"
        ) from None
    return progress
