"""Errors that name what went wrong and where."""

from __future__ import annotations


class StructseqError(Exception):
    """Base class for every error the toolkit raises on purpose."""


class DataError(StructseqError):
    """Bad or missing input data; the message names the file, line and problem."""

    def __init__(self, problem: str, path: object = None, line: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + problem)
        self.path, self.line, self.problem = path, line, problem


class DivergedError(StructseqError):
    """The training loss became non-finite; `step` is the update that produced it (its checkpoint is not saved,
    the last one is, so a resume replays the divergence)."""

    def __init__(self, loss: float, step: int):
        super().__init__(f"loss became {loss} at update {step}; lower optim.lr or check the data")
        self.loss, self.step = loss, step


class ConfigError(StructseqError):
    """An invalid configuration; the message names the offending key."""
