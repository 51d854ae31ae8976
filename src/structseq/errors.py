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


def describe(error: BaseException) -> str | None:
    """One line for a problem with the user's input or environment, naming the file (or key) where the error
    knows it: a StructseqError, an OSError (a missing or unreadable file, a full disk), text that is not
    UTF-8, a file that is not valid JSON. None for anything else: a genuine bug, which deserves its traceback."""
    if isinstance(error, StructseqError):
        return str(error)
    if isinstance(error, OSError):
        what = error.strerror or str(error) or type(error).__name__
        files = [str(f) for f in (error.filename, getattr(error, "filename2", None)) if f is not None]
        return f"{' -> '.join(files)}: {what}" if files else what
    if isinstance(error, UnicodeDecodeError):
        byte = error.object[error.start : error.start + 1].hex() if error.object else "?"
        return f"not UTF-8 text (byte 0x{byte} at offset {error.start}); convert the file to UTF-8"
    import json

    if isinstance(error, json.JSONDecodeError):
        return f"not valid JSON: {error.msg} (line {error.lineno}, column {error.colno})"
    return None


def run_cli(main, *args, **kwargs) -> int:
    """The error boundary of every command and script: `main(*args, **kwargs)`'s return value, or, for an
    error `describe` recognises, `error: <one line>` on stderr and exit status 2. A genuine bug (any other
    exception) keeps its traceback; SystemExit and KeyboardInterrupt pass through.

        if __name__ == "__main__":
            sys.exit(run_cli(main))
    """
    import sys
    import warnings

    formatwarning, warnings.formatwarning = warnings.formatwarning, _one_line_warning
    try:
        return main(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - classified by `describe`; the rest is re-raised
        line = describe(e)
        if line is None:
            raise
        if not isinstance(e, StructseqError):  # the toolkit's own messages keep their layout
            line = " ".join(line.splitlines())
        print(f"error: {line}", file=sys.stderr, flush=True)
        return 2
    finally:
        warnings.formatwarning = formatwarning


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    """A warning at the command line is one line `warning: ...`, like an error: Python's default adds the
    source line that raised it, which a user cannot act on and which breaks a pipe's one-line contract."""
    return "warning: " + " ".join(str(message).splitlines()) + "\n"
