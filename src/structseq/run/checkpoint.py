"""Checkpoints hold only tensors and plain types, load with weights_only=True, and are written atomically.

A checkpoint of format 2 also carries `checksum`, a SHA-256 over its whole content (every tensor's dtype,
shape and bytes and every plain value, in order), verified on load: a bit flipped on disk is an error
naming the file, never a model that silently loads. Format 1 (no checksum) is still read.
"""

from __future__ import annotations

import errno
import hashlib
from collections.abc import Mapping
from pathlib import Path

import torch

from structseq.errors import ConfigError, StructseqError
from structseq.outputs import atomic_open
from structseq.run.layout import checkpoint_file, checkpoints_dir


def save_atomic(obj: dict, path: str | Path) -> None:
    """`torch.save` to a temporary file in the same folder, fsync, then rename over `path`
    (`structseq.outputs.atomic_open`): a failed save (a full disk) leaves the previous checkpoint whole, removes
    the temporary and is an OSError naming `path`, also where torch reports the failed write as a RuntimeError
    of its stream writer (`[enforce fail at inline_container.cc] unexpected pos`, `PytorchStreamWriter failed
    writing file`). Any other RuntimeError (an object that cannot be pickled: a bug) stays itself."""
    with atomic_open(path, "wb") as f:
        try:
            torch.save(obj, f)
        except RuntimeError as e:
            if not any(mark in str(e) for mark in ("inline_container", "PytorchStreamWriter")):
                raise
            first = (str(e).strip().splitlines() or ["RuntimeError"])[0][:200]
            raise OSError(
                errno.EIO, f"cannot write the checkpoint ({first}); is the disk full or a file size limit reached?"
            ) from None


#: what `save_checkpoint` writes, and what `load_checkpoint` reads
FORMAT = 2
READABLE_FORMATS = (1, 2)
#: the keys (and their types) a run's checkpoint holds; `resume` needs the second group too
RUN_KEYS = {"model": Mapping, "vocab": Mapping, "config": Mapping, "progress": Mapping}
RESUME_KEYS = {"optimizer": Mapping, "rng": Mapping}


def content_digest(obj) -> str:
    """SHA-256 of a checkpoint's content: tensors by dtype, shape and bytes, plain values by type and repr."""
    h = hashlib.sha256()

    def feed(x) -> None:
        if isinstance(x, torch.Tensor):
            t = x.detach().cpu().contiguous().reshape(-1)
            h.update(f"T{t.dtype}{tuple(x.shape)}:".encode())
            h.update(t.view(torch.uint8).numpy())
        elif isinstance(x, Mapping):
            h.update(b"D%d:" % len(x))
            for k, v in x.items():
                feed(k)
                feed(v)
        elif isinstance(x, (list, tuple)):
            h.update(b"%s%d:" % (b"L" if isinstance(x, list) else b"U", len(x)))
            for v in x:
                feed(v)
        else:
            h.update(f"{type(x).__name__}:{x!r};".encode())

    feed(obj)
    return h.hexdigest()


def save_checkpoint(obj: Mapping, path: str | Path) -> None:
    """`obj` with `format` and `checksum` added, written by `save_atomic`."""
    obj = {k: v for k, v in obj.items() if k not in ("format", "checksum")}
    obj = {"format": FORMAT, **obj}
    obj["checksum"] = content_digest(obj)
    save_atomic(obj, path)


def load_checkpoint(path: str | Path, required: Mapping[str, type] | None = None) -> dict:
    """Load safely (weights_only=True never runs code from the file) and verify: a format this version
    reads, the checksum (format 2), and the keys of `required` with their types. Every problem is a
    StructseqError naming the file."""
    path = Path(path)
    if path.is_dir():
        raise StructseqError(f"{path}: is a directory, expected a checkpoint file")
    if not path.is_file():
        raise StructseqError(f"checkpoint not found: {path}")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # corrupt file, or one holding arbitrary objects
        raise StructseqError(f"{path}: cannot load checkpoint safely ({type(e).__name__}: {e})") from None
    if not isinstance(obj, dict):
        raise StructseqError(f"{path}: not a structseq checkpoint (holds a {type(obj).__name__}, not a mapping)")
    if "format" not in obj:
        raise StructseqError(
            f"{path}: not a structseq checkpoint (no 'format' field; keys: {', '.join(map(str, list(obj)[:8]))})"
        )
    fmt = obj["format"]
    if fmt not in READABLE_FORMATS or isinstance(fmt, bool):
        raise StructseqError(
            f"{path}: checkpoint format {fmt!r}; this version of structseq reads formats "
            f"{', '.join(map(str, READABLE_FORMATS))} (written by another version?)"
        )
    if fmt >= 2:
        saved = obj.pop("checksum", None)
        if saved != content_digest(obj):
            raise StructseqError(f"{path}: checksum mismatch: the file is corrupt (changed after it was written)")
    for key, kind in (required or {}).items():
        if key not in obj:
            raise StructseqError(f"{path}: checkpoint lacks '{key}' (keys: {', '.join(map(str, obj))})")
        if not isinstance(obj[key], kind):
            raise StructseqError(
                f"{path}: checkpoint field '{key}' is a {type(obj[key]).__name__}, expected a {kind.__name__}"
            )
    if "vocab" in (required or {}):
        v = obj["vocab"]
        if not v or not all(
            isinstance(k, str) and isinstance(t, list) and all(isinstance(x, str) for x in t) for k, t in v.items()
        ):
            raise StructseqError(f"{path}: checkpoint field 'vocab' must map names to token lists (e.g. 'src', 'tgt')")
    return obj


def load_model_state(model: torch.nn.Module, state: Mapping, path: str | Path) -> None:
    """`model.load_state_dict(state)`, with missing, unexpected or mis-shaped parameters an error naming
    the checkpoint instead of a traceback."""
    try:
        model.load_state_dict(state)
    except (RuntimeError, KeyError, TypeError, AttributeError) as e:
        detail = " ".join(str(e).split())
        raise StructseqError(
            f"{path}: the parameters do not fit the model its config builds ({detail[:400]})"
        ) from None


def resolve_checkpoint(run_dir: str | Path, name: str = "best") -> tuple[str, Path]:
    """`(name, path)` of the checkpoint `name` (best, last, ...) of a run directory: `checkpoints/{name}.pt`.

    The one rule for every reader of a run (`load_run`, `--checkpoint`, `train.init_from`): `best` falls back
    to `last` only when the run has no best.pt (no validation ran); an existing best.pt is always the one
    returned, so a corrupt one is an error when it is loaded, never silently replaced by another checkpoint.
    A name that is not a plain file name, or no checkpoint, is a StructseqError naming the run directory."""
    if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
        raise StructseqError(f"--checkpoint: {name!r} is not a checkpoint name (best, last, ...)")
    run_dir = Path(run_dir)
    path = checkpoint_file(run_dir, name)
    if not path.exists() and name == "best":
        name, path = "last", checkpoint_file(run_dir, "last")
    if not path.exists():
        there = sorted(p.stem for p in checkpoints_dir(run_dir).glob("*.pt")) if run_dir.is_dir() else []
        if not there:
            raise StructseqError(f"no checkpoint in {run_dir} (looked for {path}); is this a training run directory?")
        n = name[len("avg-last") :] if name.startswith("avg-last") and name[len("avg-last") :].isdigit() else "N"
        what = "was never averaged so" if name.startswith("avg") else "has no such checkpoint"
        raise StructseqError(
            f"{run_dir}: {what} ({path} is missing; its checkpoints: {', '.join(there)}); "
            f"`structseq average {run_dir} --last {n}` averages its last {n} step checkpoints into avg-last{n}"
        )
    return name, path


def init_checkpoint(spec: str | Path) -> Path:
    """`train.init_from`: a checkpoint file, or a run directory (its checkpoint by `resolve_checkpoint`:
    best, else last when no validation ran)."""
    path = Path(spec)
    if path.is_dir():
        try:
            return resolve_checkpoint(path, "best")[1]
        except StructseqError as e:
            raise ConfigError(f"'train.init_from': {e}") from None
    if not path.is_file():
        raise ConfigError(f"'train.init_from': no checkpoint at {spec}")
    return path
