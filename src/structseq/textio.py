"""Reading text strictly: UTF-8 only, errors naming `file:line` and the offending byte, BOM stripped.

Every reader, the config loader and stdin go through here, so non-UTF-8 input (invalid bytes, Latin-1,
UTF-16) is a `DataError` such as `train.tsv:17: not UTF-8 (byte 0xe9)` instead of a traceback naming no
file. Files are decoded with `surrogateescape`, so an invalid byte becomes a lone surrogate that is found
per line (exact line numbers, universal newlines kept); a UTF-8 byte-order mark is dropped.
"""

from __future__ import annotations

import gzip
import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from structseq.errors import DataError

#: lone surrogates stand for undecodable bytes; NUL never occurs in UTF-8 text (a UTF-16 file without BOM).
_BAD = re.compile("[\udc80-\udcff\x00]")
BOM = "\ufeff"


def check_line(text: str, where: object, line: int | None) -> str:
    """`text` itself, or a DataError naming `where:line` and the first byte that is not UTF-8."""
    m = _BAD.search(text)
    if m is None:
        return text
    c = m.group()
    if c == "\x00":
        raise DataError("NUL byte: not UTF-8 text (UTF-16? convert the file to UTF-8)", where, line)
    byte = ord(c) - 0xDC00
    hint = " (looks like UTF-16; convert the file to UTF-8)" if line == 1 and byte in (0xFF, 0xFE) else ""
    raise DataError(f"not UTF-8 (byte 0x{byte:02x}){hint}", where, line)


class CheckedText:
    """A text file whose every line is checked by `check_line`; iterate, `readline()` or `read()`."""

    def __init__(self, handle: io.TextIOBase, where: object):
        self._h, self.where, self.line = handle, where, 0

    def _check(self, text: str) -> str:
        if self.line == 0 and text.startswith(BOM):
            text = text[1:]
        return check_line(text, self.where, self.line + 1)

    def readline(self) -> str:
        try:
            text = self._h.readline()
        except (OSError, EOFError) as e:  # a truncated or corrupt .gz, a read error
            raise DataError(f"cannot read: {e}", self.where, self.line + 1) from None
        if text:
            text = self._check(text)
            self.line += 1
        return text

    def __iter__(self) -> Iterator[str]:
        while True:
            text = self.readline()
            if not text:
                return
            yield text

    def read(self) -> str:
        return "".join(self)

    def close(self) -> None:
        self._h.close()

    def __enter__(self) -> CheckedText:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_READS: ContextVar[list[Path] | None] = ContextVar("structseq_reads", default=None)


@contextmanager
def recording_reads() -> Iterator[list[Path]]:
    """Inside this block, each file `open_checked` opens is added (once) to the list it yields: the files a
    computation read (a training run records their content hashes)."""
    files: list[Path] = []
    token = _READS.set(files)
    try:
        yield files
    finally:
        _READS.reset(token)


def files_read() -> list[Path]:
    """The files read so far inside the innermost `recording_reads` block ([] outside one)."""
    return list(_READS.get() or [])


def open_checked(path: str | Path, newline: str | None = None) -> CheckedText:
    """Open a UTF-8 text file (`.gz` decompressed); missing files and folders are DataErrors."""
    path = Path(path)
    if path.is_dir():
        raise DataError("is a directory, expected a file", path)
    if not path.is_file():
        raise DataError("file not found", path)
    reads = _READS.get()
    if reads is not None and path not in reads:
        reads.append(path)
    try:
        if path.suffix == ".gz":
            handle = gzip.open(path, "rt", encoding="utf-8", errors="surrogateescape", newline=newline)
        else:
            handle = open(path, encoding="utf-8", errors="surrogateescape", newline=newline)
    except OSError as e:
        raise DataError(f"cannot read: {e.strerror or e}", path) from None
    return CheckedText(handle, path)


def read_text(path: str | Path) -> str:
    """The whole file as checked text (e.g. a config file)."""
    with open_checked(path) as f:
        return f.read()


def stdin_lines(stream=None, where: str = "<stdin>") -> Iterator[str]:
    """Lines of standard input (without line ends), checked like a file."""
    import sys

    stream = stream if stream is not None else sys.stdin
    raw = getattr(stream, "buffer", None)
    wrapper = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape") if raw is not None else None
    try:
        for text in CheckedText(wrapper or stream, where):
            yield text.rstrip("\r\n")
    finally:
        if wrapper is not None:
            wrapper.detach()  # leave sys.stdin usable


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its line end) of a checked text file (`open_checked`: UTF-8,
    `.gz` read transparently, problems named by file and line), CRLF tolerated."""
    with open_checked(path) as f:
        for n, line in enumerate(f, 1):
            yield n, line.rstrip("\r\n")


def first_line(path: str | Path) -> str:
    """The first line of a checked text file that is not blank ('' when none is): what format sniffing
    reads, so that a leading blank line does not change a file's format."""
    with open_checked(path) as f:
        for line in f:
            if line.strip():
                return line
    return ""
