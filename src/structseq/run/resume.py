"""The rules of `--resume`: when a run is finished, which config changes a resumed run accepts, and the
checks that the checkpoint still fits the run (its vocabularies, the file not replaced meanwhile)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from structseq.config import Config, apply_overrides, config_from_dict
from structseq.data.vocab import Vocab
from structseq.errors import ConfigError, StructseqError
from structseq.run.checkpoint import RESUME_KEYS, RUN_KEYS, load_checkpoint
from structseq.run.layout import RunDirError, check_directory, checkpoint_file

#: the config keys `--resume` may change (`--resume RUN --set train.max_steps=N` extends a run)
RESUME_OVERRIDES = ("train.max_steps",)
#: runtime settings `--resume` may change too: how the run computes and reports, not what (threads change no
#: result; another device may change the last bits, as any device does; log_every only spaces the metrics lines)
RUNTIME_SETTINGS = ("train.threads", "train.device", "train.log_every", "train.tensorboard", "train.wandb")


def finished(progress: Mapping, max_steps: int) -> str | None:
    """Why the run whose checkpoint holds `progress` is finished (early_stopping, max_steps), or None when
    it may continue (interrupted or killed before its budget)."""
    if progress.get("stopped") == "early_stopping":
        return "early_stopping"
    if progress.get("step", 0) >= max_steps:
        return "max_steps"
    return None


def finished_summary(progress: Mapping, reason: str) -> dict:
    """The summary of resuming a finished run: nothing changed, `reason` says why."""
    return {
        "steps": progress.get("step"),
        "stopped": "already_finished",
        "reason": reason,
        "best": progress.get("best"),
        "history": progress.get("history", []),
    }


def resume_changes(cfg: Config, overrides: Sequence[str]) -> dict[str, tuple]:
    """The changes `overrides` make to a resumed run's config, `{key: (old, new)}`: a larger `train.max_steps`
    and the runtime settings (RUNTIME_SETTINGS); anything else is a ConfigError saying what `--resume` accepts."""
    flat: dict = {}

    def walk(node: dict, prefix: str) -> None:
        for k, v in node.items():
            if isinstance(v, dict) and v:
                walk(v, f"{prefix}{k}.")
            else:
                flat[f"{prefix}{k}"] = v

    walk(apply_overrides({}, list(overrides)), "")
    for key in flat:
        if key not in RESUME_OVERRIDES + RUNTIME_SETTINGS:
            raise ConfigError(
                f"--resume continues a run with its saved config, so '{key}' cannot be changed; "
                "it accepts a larger budget (--set train.max_steps=N) and the runtime settings "
                f"{', '.join(RUNTIME_SETTINGS)}"
            )
    if not flat:
        return {}
    new_cfg = config_from_dict(apply_overrides(cfg.to_dict(), list(overrides)), saved=True)
    old, new = cfg.train.max_steps, new_cfg.train.max_steps
    if new < old:
        raise ConfigError(f"'train.max_steps': --resume can only extend a run's budget ({old}), not cut it to {new}")
    values = {key: tuple(getattr(c.train, key.split(".")[1]) for c in (cfg, new_cfg)) for key in flat}
    return {key: (a, b) for key, (a, b) in values.items() if a != b}


def load_last(out_dir: str | Path) -> tuple[Path, dict]:
    """(path, contents) of the last checkpoint of the run in `out_dir`, which `--resume` continues from."""
    out = Path(out_dir)
    check_directory(out)
    path = checkpoint_file(out, "last")
    if not path.exists():
        raise RunDirError(f"{out}: nothing to resume (no {path}); is this a training run directory?")
    return path, load_checkpoint(path, {**RUN_KEYS, **RESUME_KEYS})


def plan_resume(
    path: Path, ckpt: Mapping, overrides: Sequence[str] = ()
) -> tuple[Config, dict[str, tuple], dict | None]:
    """`(config, changes, summary)` for resuming a run from its last checkpoint (`path`, contents `ckpt`:
    `load_last`): the saved config with the `overrides` applied (only a larger `train.max_steps`, see
    `resume_changes`), and, when the run is finished, the `already_finished` summary to return instead of
    training (else None)."""
    try:
        cfg = config_from_dict(dict(ckpt["config"]), saved=True)
    except ConfigError as e:
        raise ConfigError(f"{path}: the checkpoint's config: {e}") from None
    changes = resume_changes(cfg, overrides)
    for key, (old, new) in changes.items():  # recorded in config-history.jsonl when the run starts
        setattr(cfg.train, key.split(".")[1], new)
        if key in RUNTIME_SETTINGS:
            print(
                f"--resume: {key} {old} -> {new} (a runtime setting, recorded in the run's config history)",
                file=sys.stderr,
            )
    reason = finished(ckpt["progress"], cfg.train.max_steps)
    return cfg, changes, None if reason is None else finished_summary(ckpt["progress"], reason)


def saved_vocabs(ckpt: Mapping) -> dict[str, Vocab]:
    """A checkpoint's vocabularies (`vocab`: name -> token list) as `Vocab`s."""
    return {name: Vocab(tokens) for name, tokens in ckpt["vocab"].items()}


def resumed_vocabs(ckpt: Mapping, built: Mapping[str, Vocab], init_from: str | None) -> dict[str, Vocab]:
    """The vocabularies a resumed run goes on with: those its start made. A run with `train.init_from` took
    its init checkpoint's (`Trainer._load_init`), not the ones its own data builds (`built`): a phase one on
    other examples (e.g. without context) counts the same tokens other times, so they come in another order.
    Its checkpoint's vocabularies are those, and they are its own; whether the data changed is checked by the
    data files' hashes (`directory.check_data_files`). Any other run built them from its data, so they must be
    built again the same (`check_vocabs`)."""
    if init_from:
        return saved_vocabs(ckpt)
    check_vocabs(ckpt["vocab"], built)
    return dict(built)


def check_vocabs(saved: Mapping[str, list], built: Mapping[str, Vocab]) -> None:
    """A resumed run's vocabularies, built again from its data, must be the checkpoint's (`saved`)."""
    for name, vocab in built.items():
        old = Vocab(saved[name])
        if old != vocab:
            raise StructseqError(_describe_mismatch(name, old, vocab))


def _describe_mismatch(name: str, saved: Vocab, built: Vocab) -> str:
    name = {"src": "source", "tgt": "target"}.get(name, name)
    head = f"the checkpoint's {name} vocabulary ({len(saved)} tokens) does not match the data"
    if set(saved.itos) == set(built.itos):
        i = next(i for i, (a, b) in enumerate(zip(saved.itos, built.itos)) if a != b)
        return (
            f"{head}: the same {len(saved)} tokens in another order (first at id {i}: {saved.itos[i]!r} in "
            f"the checkpoint, {built.itos[i]!r} in the data), so every id would mean another token. "
            "Were the tokens counted on other examples (another dataset, config or phase one)?"
        )
    missing = [t for t in built.itos if t not in saved][:5]
    extra = [t for t in saved.itos if t not in built][:5]
    return (
        f"{head} ({len(built)} tokens; new in data: {missing}, only in checkpoint: {extra}). "
        "Was the run trained on another dataset or config?"
    )


def file_identity(path: Path) -> tuple:
    """(inode, size, mtime): a checkpoint a resumed run loaded must be the same file when the run starts."""
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns
