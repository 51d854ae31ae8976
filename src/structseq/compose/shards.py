"""Text corpora as Parquet shards: planning byte ranges, reading them by the readers' rules, atomic shard files.

A shard is a byte range of one input file that starts and ends at line boundaries, so N workers read one
file in parallel. The plan (one sequential newline count per file, at memory speed) gives every shard the
file line and the corpus index of its first sentence: errors name `file:line` and the sharded pipeline numbers
sentences exactly as `read_corpora` does (files concatenated in order). A `.gz` file cannot be split: it is one
shard. Lines are decoded like `corpus.read_sentences`: UTF-8 strictly (`textio.check_line`: a bad byte is a
DataError naming file:line), the BOM dropped, `\\r\\n` tolerated, a TSV's column picked, tabs made spaces.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from structseq.compose.corpus import _is_tsv, sentence_of
from structseq.compose.preflight import damaged
from structseq.errors import DataError
from structseq.outputs import atomic_open, atomic_write
from structseq.textio import BOM, check_line

BLOCK = 1 << 24  # bytes read at a time


@dataclass(frozen=True)
class Piece:
    """Lines of `path` starting in bytes [start, end); the first is file line `first_line`, corpus index `first_index`."""

    path: str
    start: int
    end: int
    first_line: int
    first_index: int
    lines: int


def _count_gz(path: Path) -> tuple[int, bool]:
    lines, last = 0, b"\n"
    with gzip.open(path, "rb") as handle:
        for block in iter(lambda: handle.read(BLOCK), b""):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n"), last != b"\n"


def plan(paths: list[str | os.PathLike], shards: int) -> list[Piece]:
    """Cut the files into about `shards` line-aligned pieces in all (each plain file gets a share by size)."""
    if shards < 1:
        raise DataError(f"shards must be >= 1, got {shards}")
    files = [Path(p) for p in paths]
    for path in files:
        if not path.is_file():
            raise DataError("no such file (the sharded path reads files, not NAME:SPLIT datasets)", path)
    total = sum(p.stat().st_size for p in files) or 1
    pieces: list[Piece] = []
    index = 0
    for path in files:
        if path.suffix == ".gz":
            lines, _ = _count_gz(path)
            pieces.append(Piece(str(path), 0, -1, 1, index, lines))
            index += lines
            continue
        size = path.stat().st_size
        share = max(1, round(shards * size / total))
        targets = [size * k // share for k in range(1, share)]
        starts = [(0, 1)]  # (byte, file line) of each piece's first line
        line_count = position = 0
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(BLOCK), b""):
                while targets and targets[0] < position + len(block):
                    # the first line that starts at or after the target byte
                    newline = block.find(b"\n", max(targets[0] - 1 - position, 0))
                    if newline < 0:
                        break
                    cut = position + newline + 1
                    if cut < size:
                        starts.append((cut, line_count + block.count(b"\n", 0, newline + 1) + 1))
                    targets = [t for t in targets if t > cut]
                line_count += block.count(b"\n")
                position += len(block)
        total_lines = line_count + (size > 0 and _last_byte(path) != b"\n")
        bounds = [*starts, (size, total_lines + 1)]
        for (begin, first), (stop, after) in zip(bounds, bounds[1:]):
            pieces.append(Piece(str(path), begin, stop, first, index, after - first))
            index += after - first
    return pieces


def _last_byte(path: Path) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1)


def _raw_lines(piece: Piece):
    path = Path(piece.path)
    if piece.end < 0:
        with gzip.open(path, "rb") as handle:
            yield from io.BufferedReader(handle, BLOCK)
        return
    with open(path, "rb") as handle:
        handle.seek(piece.start)
        left = piece.end - piece.start
        rest = b""
        while left > 0:
            block = handle.read(min(BLOCK, left))
            if not block:
                break
            left -= len(block)
            lines = (rest + block).split(b"\n")
            rest = lines.pop()
            for line in lines:
                yield line + b"\n"
        if rest:
            yield rest


def read_piece(piece: Piece, column: int | None = None, max_length: int | None = None, skip_long: bool = False):
    """(sentences, skipped) of a piece; `skipped` lists `file:line` of lines over `max_length` tokens when
    `skip_long` (the training rule: skip and count), which are otherwise a DataError (the evaluation rule)."""
    path = Path(piece.path)
    if column is None and _is_tsv(path):
        column = 0
    out: list[str] = []
    skipped: list[str] = []
    number = piece.first_line
    for raw in _raw_lines(piece):
        text = check_line(raw.decode("utf-8", "surrogateescape"), path, number)
        if number == 1 and text.startswith(BOM):
            text = text[1:]
        line = sentence_of(text, column, path, number)
        if max_length is not None and len(line.split()) > max_length:
            if not skip_long:
                raise DataError(
                    f"has {len(line.split())} tokens, more than the maximum length {max_length}", path, number
                )
            skipped.append(f"{path}:{number}")
            line = ""  # kept as an empty (unscored) sentence: corpus indices stay those of read_corpora
        out.append(line)
        number += 1
    if len(out) != piece.lines:
        raise DataError(f"read {len(out)} lines where the plan counted {piece.lines}: changed while reading?", path)
    return out, skipped


#: what reading a truncated, overwritten or deleted work file raises (pyarrow's errors are ValueError / OSError)
UNREADABLE = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile)


def write_parquet(path: Path, columns: dict[str, object]) -> None:
    """A Parquet file of `columns` (numpy arrays, or lists of strings), written atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    # from_pandas: a float NaN (an unscored degree) is stored as null, so SQL aggregates skip it; a list is text,
    # typed as such even when empty (an empty shard's sentences read back as a list, not an array of nulls)
    table = pa.table(
        {
            name: pa.array(values, type=pa.string() if isinstance(values, list) else None, from_pandas=True)
            for name, values in columns.items()
        }
    )
    with atomic_open(path, "wb") as handle:
        pq.write_table(table, handle)


def read_parquet(path: Path, columns: list[str] | None = None) -> dict[str, np.ndarray | list]:
    """The columns of a work file; one that cannot be read is a DataError naming it and the folder to delete."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path, columns=columns)
    except UNREADABLE as error:
        raise damaged(path, error) from None
    out: dict = {}
    for name in table.column_names:
        col = table.column(name)
        out[name] = col.to_pylist() if col.type == "string" or str(col.type) == "large_string" else col.to_numpy()
    return out


def save_arrays(path: Path, **arrays: np.ndarray) -> None:
    """An .npz of `arrays`, written atomically."""
    with atomic_open(path, "wb") as handle:
        np.savez(handle, **arrays)


def load_arrays(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path) as data:
            return {k: data[k] for k in data.files}
    except UNREADABLE as error:
        raise damaged(path, error) from None


def load_keys(path: Path) -> np.ndarray:
    """A level's sorted atom keys (.npy), memory-mapped: the workers share one copy in the page cache."""
    try:
        keys = np.load(path, mmap_mode="r")
    except UNREADABLE as error:
        raise damaged(path, error) from None
    if keys.dtype != np.int64 or keys.ndim != 1:
        raise damaged(path, ValueError(f"holds {keys.dtype} of shape {keys.shape}, not int64 keys"))
    return keys


def done(path: Path) -> dict | None:
    """The record of a finished task (its marker, written last), or None when the task has to run."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def finish(path: Path, record: dict) -> dict:
    """Mark a task finished: its record, written atomically after every file it produced."""
    atomic_write(path, json.dumps(record, indent=1) + "\n")
    return record


def piece_dict(piece: Piece) -> dict:
    return asdict(piece)
