"""A run's saved config: config.yaml (the run's record, rewritten when `--resume` changes a setting), its
history, the edits a user made to it since the checkpoint (the checkpoint's config is what loading uses), and
the decode strategy of a config saved by an older version."""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import yaml

from structseq.errors import ConfigError, DataError, StructseqError
from structseq.outputs import append_lines, atomic_write
from structseq.registry import STRATEGIES
from structseq.run.layout import RunDirError, config_file, history_file
from structseq.textio import read_text
from structseq.yamlio import load_yaml


def write_config(run_dir: str | Path, config: dict) -> None:
    """The run's config.yaml (the run created it: `prepare_new` checked)."""
    atomic_write(config_file(run_dir), yaml.safe_dump(config, sort_keys=False))


def record_config_change(run_dir: str | Path, step: int, changes: dict[str, tuple]) -> None:
    """Append `{"step", "time", "changes": {key: [old, new]}}` to config-history.jsonl."""
    rec = {
        "step": step,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "changes": {k: list(v) for k, v in changes.items()},
    }
    append_lines(history_file(run_dir), [json.dumps(rec)])


def read_run_config(run_dir: str | Path) -> dict:
    """The run's config.yaml as a mapping, read as strictly as a config file (`structseq.yamlio`: a key given
    twice is an error); missing, not UTF-8, not YAML or not a mapping is an error naming the file."""
    path = config_file(run_dir)
    if not path.exists():
        raise RunDirError(
            f"{path}: missing; is {run_dir} a training run directory? (pass --checkpoint "
            "best|last to load its checkpoint anyway)"
        )
    try:
        raw = load_yaml(read_text(path), path)
    except (DataError, ConfigError) as e:
        raise RunDirError(str(e)) from None
    if not isinstance(raw, dict):
        raise RunDirError(f"{path}: not a run's config (expected a mapping of sections, found {type(raw).__name__})")
    return raw


def _flat(d: object, prefix: str = "") -> dict[str, str]:
    if not isinstance(d, dict):
        return {prefix.rstrip("."): json.dumps(d, sort_keys=True, default=str)}
    return {k: v for key, value in d.items() for k, v in _flat(value, f"{prefix}{key}.").items()}


#: the sections a run's config.yaml shares with its checkpoints and that decide what evaluation computes
EVALUATED = ("task", "data", "model", "decode")


def config_edits(run_dir: str | Path, saved: dict) -> list[str]:
    """The keys of `EVALUATED` whose value in the run's config.yaml differs from `saved` (the checkpoint's
    config, which loading uses), as `KEY: YAML (checkpoint: SAVED)`; [] when config.yaml is missing or broken."""
    try:
        edited = read_run_config(run_dir)
    except StructseqError:
        return []
    mine = _flat({s: edited.get(s) for s in EVALUATED})
    theirs = _flat({s: saved.get(s) for s in EVALUATED})
    return [
        f"{k}: {mine.get(k, 'absent')} (checkpoint: {theirs.get(k, 'absent')})"
        for k in sorted(set(mine) | set(theirs))
        if mine.get(k) != theirs.get(k)
    ]


def warn_config_edits(run_dir: str | Path, saved: dict) -> None:
    """A warning naming the keys of config.yaml edited since the checkpoint (`config_edits`): config.yaml is the
    run's record, the checkpoint's config what loading uses."""
    edits = config_edits(run_dir, saved)
    if edits:
        warnings.warn(
            f"{config_file(run_dir)} differs from the checkpoint's config, which is used "
            f"({'; '.join(edits[:3])}{'; ...' if len(edits) > 3 else ''}); to decode otherwise, use --beam or "
            "--set decode.KEY=VALUE",
            stacklevel=4,  # the caller of `api.load_run`
        )


def saved_strategy(name: str | None, model, checkpoint) -> str | None:
    """A saved run's `decode.strategy`, or None (the model's default) with one warning naming `checkpoint` where
    it searches another interface than `model`'s: before a supertagger's searches were strategies, a tagger
    ignored the key, so an old run trained with e.g. `greedy` must still load, and `--set` still change it."""
    if name is None or STRATEGIES.get(name).interface == model.search_interface:
        return name
    warnings.warn(
        f"{checkpoint}: the checkpoint's 'decode.strategy' {name!r} does not search model "
        f"{type(model).__name__} (which this version checks; older ones ignored it): decoding with the model's "
        "default (null); --set decode.strategy=NAME picks another",
        stacklevel=2,
    )
    return None
