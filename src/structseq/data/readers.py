"""Readers for the generic formats: TSV (`source<TAB>target[<TAB>extra...]`) and parallel files."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from structseq.data.example import Example
from structseq.data.limits import admit
from structseq.errors import DataError
from structseq.textio import open_checked


def open_text(path: str | Path):
    """Open a UTF-8 text file, transparently gunzipping `.gz`; a missing file, a folder and a line that is
    not UTF-8 are DataErrors naming the file (and line); a byte-order mark is dropped."""
    return open_checked(path)


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its line end), CRLF tolerated."""
    with open_text(path) as f:
        for n, line in enumerate(f, 1):
            yield n, line.rstrip("\r\n")


def _checked(path, n, source: str, target: str, category=None, extra=()) -> Example:
    if not source.strip():
        raise DataError("empty source", path, n)
    if not target.strip():
        raise DataError("empty target", path, n)
    return Example.from_text(source, target, category, extra)


def read_tsv(path: str | Path, category_column: int | None = None) -> list[Example]:
    """`source<TAB>target[<TAB>extra...]`; `category_column` (0-based) fills `Example.category`."""
    examples = []
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < 2:
            raise DataError(f"expected 'source<TAB>target', found {len(cols)} column(s)", path, n)
        category = None
        if category_column is not None:
            if len(cols) <= category_column:
                raise DataError(f"missing category column {category_column + 1}", path, n)
            category = cols[category_column]
        admit(examples, _checked(path, n, cols[0], cols[1], category, tuple(cols[2:])), n, path)
    return examples


def read_parallel(source_path: str | Path, target_path: str | Path, extra_path=None) -> list[Example]:
    """Two line-aligned files (plus an optional third whose lines land in `Example.extra`)."""
    src = [line for _, line in iter_lines(source_path)]
    tgt = [line for _, line in iter_lines(target_path)]
    if len(src) != len(tgt):
        raise DataError(f"{len(src)} lines but {target_path} has {len(tgt)}", source_path)
    extra = [line for _, line in iter_lines(extra_path)] if extra_path else None
    if extra is not None and len(extra) != len(src):
        raise DataError(f"{len(extra)} lines but {source_path} has {len(src)}", extra_path)
    out = []
    for i, (s, t) in enumerate(zip(src, tgt)):
        if not s.strip():
            raise DataError("empty source", source_path, i + 1)
        if not t.strip():
            raise DataError("empty target", target_path, i + 1)
        admit(out, Example.from_text(s, t, None, (extra[i],) if extra else ()), i + 1, source_path, target_path)
    return out


def read_file(spec: str | Path) -> list[Example]:
    """A user-given file: `a.tsv`, a SCAN `IN: ... OUT: ...` file, or `SRC_FILE,TGT_FILE`."""
    spec = str(spec)
    if "," in spec and not Path(spec).exists():
        src, tgt = spec.split(",", 1)
        return read_parallel(src, tgt)
    with open_text(spec) as f:
        first = f.readline()
    if first.startswith("IN: "):
        from structseq.data.scan import read_scan_file

        return read_scan_file(spec)
    return read_tsv(spec)
