"""Checkpoints hold only tensors and plain types, load with weights_only=True, and are written atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import torch

from structseq.errors import StructseqError


def save_atomic(obj: dict, path: str | Path) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(path: str | Path) -> dict:
    """Load safely: weights_only=True never runs code from the file."""
    path = Path(path)
    if not path.is_file():
        raise StructseqError(f"checkpoint not found: {path}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # corrupt file, or one holding arbitrary objects
        raise StructseqError(f"{path}: cannot load checkpoint safely ({type(e).__name__}: {e})") from None
