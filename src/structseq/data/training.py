"""The training data of a config: its train and validation examples, length-limited, and the task's
vocabularies built from them. Training and evaluation both read it here (evaluation needs the training
frequencies of some metrics), so neither imports the other."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from structseq.data.example import Example
from structseq.data.limits import RESERVED, LengthLimit, input_limits, length_limit, over_limit
from structseq.data.registry import SplitSpec, holdout
from structseq.data.vocab import NamedVocabs, Vocabs
from structseq.errors import ConfigError, StructseqError
from structseq.textio import recording_reads


@dataclass
class TrainingData(NamedVocabs):
    train: list[Example]
    valid: list[Example]
    vocabs: Vocabs
    skipped: int = 0  # examples left out for exceeding data.max_length
    files: list[Path] = field(default_factory=list)  # the data files read (none for generated splits)


def _configured_split(cfg, key: str, data_root) -> list[Example]:
    """`data.train` or `data.valid`; with `data.dataset: files`, one that names no file is a ConfigError."""
    spec = getattr(cfg.data, key)
    parsed = SplitSpec.parse(spec, cfg.data.dataset)
    if parsed.kind == "file" and cfg.data.dataset == "files" and not (Path(spec).exists() or "," in spec):
        held_out = (
            f"; null holds out data.valid_fraction ({cfg.data.valid_fraction}) of the training data"
            if key == "valid"
            else ""
        )
        raise ConfigError(
            f"'data.{key}': '{spec}' is neither a file nor NAME:SPLIT of a registered dataset "
            f"(with data.dataset: files, splits are files){held_out}"
        )
    return parsed.load(data_root, cfg.data.columns, cfg.data.fields)


def holdout_seed(cfg: Mapping) -> int:
    """The seed that draws the held-out validation sample of a config (as a dict): data.holdout_seed, else
    train.seed."""
    seed = cfg["data"].get("holdout_seed")
    return cfg["train"]["seed"] if seed is None else seed


def holdout_overlap(base: Mapping, cfg: Mapping) -> str | None:
    """Why a run started from `base` (train.init_from, both configs as dicts) validates on the base's training
    examples, or None: both hold out from the same training data, with different seeds."""
    same_data = all(base["data"].get(k) == cfg["data"].get(k) for k in ("dataset", "train", "valid_fraction"))
    if base["data"].get("valid") is not None or cfg["data"].get("valid") is not None or not same_data:
        return None
    if holdout_seed(base) == holdout_seed(cfg):
        return None
    return (
        f"the init_from run held out its validation examples with seed {holdout_seed(base)}, this run with seed "
        f"{holdout_seed(cfg)}: most of this run's validation examples were the base's training examples, so its "
        f"validation loss and best checkpoint favour memory (set data.holdout_seed: {holdout_seed(base)})"
    )


def load_training_data(cfg, task, data_root=None) -> TrainingData:
    """Train/valid examples and the task's vocabularies built from the training split. Examples longer than
    the limits of `input_limits` (data.max_length, else the model's) are skipped and counted with a warning
    (`data.too_long: error`: an error naming the line). `task` checks the examples and builds the
    vocabularies (`Task.check_examples`, `build_vocabs`); `files` lists the data files read."""
    d = cfg.data
    limits = {**input_limits(cfg), **task.input_measure()}  # a pretrained tokenizer's pieces, where it counts
    with length_limit(**limits, skip=d.too_long == "skip") as limit, recording_reads() as files:
        train = _within_limit(_configured_split(cfg, "train", data_root), limit, d.train, d.too_long)
        if d.max_train_examples:
            train = train[: d.max_train_examples]
        if d.valid is None:
            train, valid = holdout(
                train, d.valid_fraction, cfg.train.seed if d.holdout_seed is None else d.holdout_seed
            )
        else:
            valid = _within_limit(_configured_split(cfg, "valid", data_root), limit, d.valid, d.too_long)
    if limit.skipped:
        context = (
            f" or with a context longer than {limit.context_key} {limit.max_context}"
            if limit.max_context is not None
            else ""
        )
        if limit.max_fused is not None:
            context += f" or with a fused input past {limit.fused_key} {limit.max_fused}"
        warnings.warn(
            f"skipped {len(limit.skipped)} examples longer than {limit.length_key} {limit.max_length} "
            f"{limit.unit}{context} (first: {limit.skipped[0]})",
            stacklevel=2,
        )
    if not train:
        raise StructseqError(
            f"no training examples in {d.dataset}/{d.train}"
            + (f" ({len(limit.skipped)} longer than {limit.length_key})" if limit.skipped else "")
        )
    task.check_examples(train, f"{d.dataset}/{d.train}")
    task.check_examples(valid, f"{d.dataset}/{d.valid or d.train + ' (held out)'}")
    vocabs = task.build_vocabs(train)
    _check_vocabs(vocabs, d.min_freq)
    return TrainingData(train, valid, vocabs, len(limit.skipped), list(files))


def _check_vocabs(vocabs: Vocabs, min_freq: int) -> None:
    """A vocabulary of special symbols only (every token under `data.min_freq`) is an error; with
    min_freq > 1, a warning says how many tokens each vocabulary kept."""
    kept = {name: sum(t not in RESERVED for t in v.itos) for name, v in vocabs.items()}
    empty = [name for name, n in kept.items() if n == 0]
    if empty:
        raise ConfigError(
            f"'data.min_freq' ({min_freq}): the {', '.join(empty)} vocabulary keeps no token (every "
            "token of the training data is rarer), so every input would be <unk>; lower it"
        )
    if min_freq > 1:
        warnings.warn(
            f"data.min_freq {min_freq} kept "
            + ", ".join(f"{n} {name}" for name, n in kept.items())
            + " tokens (the rest read as <unk>)",
            stacklevel=3,
        )


def _within_limit(examples: list[Example], limit: LengthLimit, split: str, too_long: str) -> list[Example]:
    """The limits again for examples no reader admitted line by line (generated splits)."""
    kept = []
    for i, e in enumerate(examples):
        over = over_limit(e, limit)
        if over is None:
            kept.append(e)
        elif too_long == "skip":
            limit.skipped.append(f"{split}: example {i + 1}")
        else:
            name, n, most, key = over
            raise StructseqError(f"{split}: example {i + 1}: {name} has {n} tokens, more than {key} {most}")
    return kept
