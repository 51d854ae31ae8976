"""Keeping the last N periodic checkpoints (`train.keep_last`) and averaging checkpoints (`structseq average`).

Keeping: at each periodic save (a validation, or `train.save_every`) a run with `train.keep_last: N` also
keeps that checkpoint as `checkpoints/step{K}.pt` and deletes the step files beyond the last N. The step file
is a hard link to the `last.pt` just written atomically (a copy renamed into place where links are not
supported): it appears whole or not at all, and costs no second write.

Averaging follows fairseq's `scripts/average_checkpoints.py`: the floating-point tensors of the model state are
averaged elementwise (summed in float64, then cast back), integer tensors (counters such as
`num_batches_tracked`) are taken from the last checkpoint, and the optimiser, scheduler and RNG state are
dropped. The result carries the last checkpoint's config, vocabularies, task state and progress, plus
`averaged` (the inputs' names and steps), and is written like every checkpoint (atomic, checksummed, loaded
weights-only), so `evaluate` and `predict` take it with `--checkpoint NAME`.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from structseq.errors import StructseqError
from structseq.run.checkpoint import RUN_KEYS, load_checkpoint, save_checkpoint
from structseq.run.layout import checkpoint_file, checkpoints_dir, step_file

STEP_FILE = re.compile(r"step(\d+)\.pt")


def step_checkpoints(run_dir: str | Path) -> list[tuple[int, Path]]:
    """`(step, path)` of each `checkpoints/step{K}.pt` of a run, by step."""
    folder = checkpoints_dir(run_dir)
    found = [(int(m.group(1)), p) for p in folder.glob("step*.pt") if (m := STEP_FILE.fullmatch(p.name))]
    return sorted(found)


def _link_or_copy(src: Path, dst: Path) -> None:
    """`dst` becomes `src`'s content atomically: a hard link (or a copy) at a temporary name, renamed."""
    fd, tmp = tempfile.mkstemp(prefix=f".{dst.name}.", suffix=".tmp", dir=dst.parent)
    os.close(fd)
    os.unlink(tmp)
    try:
        try:
            os.link(src, tmp)
        except OSError:
            shutil.copyfile(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def keep_step_checkpoint(run_dir: str | Path, step: int, keep: int) -> list[Path]:
    """Keep `checkpoints/last.pt` (just saved at `step`) as `checkpoints/step{step}.pt`, then delete the step
    files beyond the last `keep` (by step). `keep` 0 does nothing. Returns the deleted paths."""
    if keep <= 0:
        return []
    _link_or_copy(checkpoint_file(run_dir, "last"), step_file(run_dir, step))
    old = [p for _, p in step_checkpoints(run_dir)[:-keep]]
    for p in old:
        p.unlink(missing_ok=True)
    return old


def last_step_checkpoints(run_dir: str | Path, n: int) -> list[Path]:
    """The last `n` step checkpoints of a run, oldest first; an error naming the run when it has fewer."""
    if n < 1:
        raise StructseqError(f"--last {n}: average at least 1 checkpoint")
    found = step_checkpoints(run_dir)
    if len(found) < n:
        names = ", ".join(p.name for _, p in found) or "none"
        raise StructseqError(
            f"{run_dir}: {n} step checkpoints asked for, {len(found)} kept ({names}); train with "
            f"train.keep_last >= {n} to keep them"
        )
    return [p for _, p in found[-n:]]


def _identity(ckpt: dict) -> dict:
    """What checkpoints averaged together must share: vocabularies, task state, model config and the names,
    shapes and dtypes of the parameters."""
    return {
        "vocabularies": ckpt["vocab"],
        "task state": ckpt.get("task"),
        "model config": ckpt["config"].get("model"),
        "parameters": {k: (str(v.dtype), tuple(v.shape)) for k, v in ckpt["model"].items()},
    }


def _check_same(path: Path, ident: dict, first_path: Path, first: dict) -> None:
    for what, value in ident.items():
        if value == first[what]:
            continue
        detail = ""
        if what == "parameters":
            diff = sorted(set(value.items()) ^ set(first[what].items()))
            detail = f" (first difference: {diff[0][0]})"
        raise StructseqError(
            f"{path}: its {what} differ from {first_path}'s{detail}; only checkpoints of one model can be averaged"
        )


def average_states(states: Sequence[dict]) -> dict:
    """fairseq's average of model states: floating-point tensors averaged (in float64, cast back), every other
    tensor taken from the last state."""
    totals: dict = {}
    for s in states:
        _accumulate(totals, s)
    return _mean(totals, states[-1], len(states))


def _accumulate(totals: dict, state: dict) -> None:
    for k, v in state.items():
        if torch.is_floating_point(v):
            if k in totals:
                totals[k] += v.to(torch.float64)
            else:
                totals[k] = v.to(torch.float64, copy=True)


def _mean(totals: dict, last: dict, n: int) -> dict:
    return {k: (totals[k] / n).to(v.dtype) if torch.is_floating_point(v) else v.clone() for k, v in last.items()}


def average_checkpoints(paths: Sequence[str | Path], out: str | Path) -> dict:
    """Average the checkpoints `paths` (oldest first: the last one gives the integer tensors and everything
    that is not the model) into the checkpoint `out`, reading one input at a time; returns what `out`
    records under `averaged`."""
    paths = [Path(p) for p in paths]
    if not paths:
        raise StructseqError("no checkpoints to average")
    totals: dict = {}
    first: dict = {}
    steps = []
    for i, p in enumerate(paths):
        ckpt = load_checkpoint(p, RUN_KEYS)
        ident = _identity(ckpt)
        if i == 0:
            first = ident
        else:
            _check_same(p, ident, paths[0], first)
        _accumulate(totals, ckpt["model"])
        steps.append(int(ckpt["progress"].get("step", 0)))
    last = ckpt
    averaged = {"from": [str(p) for p in paths], "steps": steps}
    result = {k: v for k, v in last.items() if k not in ("optimizer", "scheduler", "rng", "format", "checksum")}
    result["model"] = _mean(totals, last["model"], len(paths))
    result["averaged"] = averaged
    save_checkpoint(result, out)
    return averaged
