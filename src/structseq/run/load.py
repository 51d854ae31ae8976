"""Loading a trained run for inference (`structseq.api.load_run`, which wraps it in a `Run`): its checkpoint by
the one rule (`checkpoint.resolve_checkpoint`), the checkpoint's config (config.yaml edited since is a warning),
its vocabularies, task state and model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from structseq.config import Config, config_from_dict, moved_paths
from structseq.data.vocab import Vocab
from structseq.errors import ConfigError, StructseqError
from structseq.models import build_model
from structseq.run.checkpoint import RUN_KEYS, load_checkpoint, load_model_state, resolve_checkpoint
from structseq.run.layout import RunDirError, check_directory, config_file
from structseq.run.saved_config import read_run_config, saved_strategy, warn_config_edits
from structseq.tasks import Task, get_task


@dataclass
class LoadedRun:
    """A run's checkpoint loaded (`load`): its directory, config, model, vocabularies, task, and `checkpoint` the
    name as resolved (best falls back to last). `structseq.api.Run` is one, with its decoding methods."""

    run_dir: Path
    config: Config
    model: torch.nn.Module
    vocabs: dict[str, Vocab]
    checkpoint: str
    task: Task


def eval_checkpoint(run_dir: Path) -> str:
    """The checkpoint a run is evaluated with when none is named: its config.yaml's `train.eval_checkpoint`."""
    saved = read_run_config(run_dir)
    train_section = saved.get("train") or {}
    checkpoint = train_section.get("eval_checkpoint", "best") if isinstance(train_section, dict) else None
    if checkpoint not in ("best", "last"):
        raise RunDirError(f"{config_file(run_dir)}: 'train.eval_checkpoint' must be best or last, got {checkpoint!r}")
    return checkpoint


def load(run_dir: str | Path, checkpoint: str | None = None, *, moved: Sequence[str] = ()) -> tuple[LoadedRun, Path]:
    """`checkpoints/{checkpoint}.pt` of a run (default: `eval_checkpoint`) with its config, vocabularies, task
    and model (its parameters loaded, on the CPU), and the checkpoint file; `moved`: `KEY=DIR` for a local folder the run reads that
    has moved (`structseq.config.moved_paths`). Every problem is an error naming the file."""
    run_dir = Path(run_dir)
    check_directory(run_dir)
    if not run_dir.exists():
        raise RunDirError(f"{run_dir}: no such run directory")
    if checkpoint is None:
        checkpoint = eval_checkpoint(run_dir)
    checkpoint, path = resolve_checkpoint(run_dir, checkpoint)
    ckpt = load_checkpoint(path, RUN_KEYS)
    warn_config_edits(run_dir, ckpt["config"])  # config.yaml edited: the checkpoint's config is used
    try:
        cfg = config_from_dict(dict(ckpt["config"]), saved=True)
    except ConfigError as e:
        raise ConfigError(f"{path}: the checkpoint's config: {e}") from None
    if moved:
        cfg = moved_paths(cfg, moved, run_dir)
    try:
        vocabs = {name: Vocab(tokens) for name, tokens in ckpt["vocab"].items()}
        task = get_task(cfg)
        task.load_state_dict(ckpt.get("task") or {})
        model = build_model(cfg.model, vocabs)
    except (KeyError, ValueError) as e:
        raise StructseqError(
            f"{path}: the checkpoint's vocabularies do not fit its model ({type(e).__name__}: {e})"
        ) from None
    load_model_state(model, ckpt["model"], path)
    cfg.decode.strategy = saved_strategy(cfg.decode.strategy, model, path)  # the task's config too
    return LoadedRun(run_dir, cfg, model, vocabs, checkpoint, task), path
