"""Reading sentence files and the TSV tables the compose commands write and read back."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from structseq.data.registry import dataset_split, load_dataset
from structseq.errors import ConfigError, DataError
from structseq.outputs import UNCHECKED, Outputs
from structseq.paths import data_root
from structseq.textio import CheckedText, open_checked


def _open_text(path: Path) -> CheckedText:
    return open_checked(path, newline="\n")


def _is_tsv(path: Path) -> bool:
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    return name.endswith(".tsv")


#: where `NAME:SPLIT` specs are read from (`structseq compose --data-root`); None: the default data root
DATA_ROOT: Path | None = None


def use_data_root(root: str | os.PathLike | None) -> None:
    """Resolve later `NAME:SPLIT` specs against `root` (what `structseq compose --data-root` sets)."""
    global DATA_ROOT
    DATA_ROOT = None if root is None else Path(root)


def read_sentences(path: str | os.PathLike, column: int | None = None, side: str = "source") -> list[str]:
    """One sentence per line; `.gz` is decompressed. TSV files (COGS style) give column 0 by default.

    `NAME:SPLIT` names a split of a registered dataset instead (`structseq data list`); `side` picks
    its source or target side. Whitespace is the tokeniser everywhere in `compose`, so tabs in plain
    text become spaces.
    """
    dataset = dataset_split(str(path))  # NAME:SPLIT of a registered dataset (e.g. cogs:gen, react:cg-test)
    if dataset is not None:
        if side not in ("source", "target"):
            raise DataError(f"side must be source or target, got {side!r}")
        examples = load_dataset(dataset[0], dataset[1], data_root(DATA_ROOT))
        return [e.source_text if side == "source" else e.target_text for e in examples]
    path = Path(path)
    if not path.exists():
        raise DataError("no such file", path)
    if column is None and _is_tsv(path):
        column = 0
    with _open_text(path) as handle:
        return [sentence_of(line, column, path, number) for number, line in enumerate(handle, 1)]


def sentence_of(line: str, column: int | None, path: object, number: int) -> str:
    """The sentence of a line as read (its line end dropped): the TSV `column` when given, tabs made spaces."""
    line = line.rstrip("\r\n")
    if column is not None:
        fields = line.split("\t")
        if column >= len(fields):
            raise DataError(f"has {len(fields)} column(s), column {column} asked for", path, number)
        line = fields[column]
    return line.replace("\t", " ")


def read_corpora(paths: Iterable[str | os.PathLike], column: int | None = None) -> list[str]:
    """Concatenate several sentence files (e.g. CoGnition valid + test as one training side)."""
    sentences: list[str] = []
    for path in paths:
        sentences.extend(read_sentences(path, column))
    return sentences


def check_max_length(max_length: int | None) -> None:
    if max_length is not None and max_length < 1:
        raise ConfigError(f"--max-length must be >= 1 token (or left out: no limit), got {max_length}")


def read_limited(
    paths: Sequence[str | os.PathLike], column: int | None, max_length: int | None, *, skip_long: bool
) -> tuple[list[str], list[str]]:
    """`read_corpora` under the sharded path's `--max-length` rules (`shards.read_piece`): a line of more than
    `max_length` tokens is, when `skip_long` (training), kept as an empty line (corpus indices unchanged) and named
    in the returned `file:line` list; otherwise (the pool) a DataError naming file:line."""
    check_max_length(max_length)
    sentences: list[str] = []
    skipped: list[str] = []
    for path in paths:
        lines = read_sentences(path, column)
        if max_length is not None:
            for number, line in enumerate(lines, 1):
                if len(line.split()) > max_length:
                    if not skip_long:
                        raise DataError(
                            f"has {len(line.split())} tokens, more than the maximum length {max_length}", path, number
                        )
                    skipped.append(f"{path}:{number}")
                    lines[number - 1] = ""
        sentences.extend(lines)
    return sentences, skipped


def format_float(value: float) -> str:
    """TSV spelling of a float: the shortest text that reads back as the same float (`repr`), so a table read back
    (`compose build --uncertainty`, `compose plot --degree`) ranks and ties exactly as the values it was written
    from; NaN becomes the empty field so spreadsheets see a blank."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return repr(float(value))


def write_tsv(
    path: str | os.PathLike | None,
    header: Sequence[str],
    rows: Iterable[Sequence[object]],
    outputs: Outputs = UNCHECKED,
) -> None:
    """Write a header plus rows; `None` or "-" writes to stdout. A file is written atomically; `outputs` (the
    command's `structseq.outputs.Outputs`) refuses one of its inputs or a file the toolkit did not write."""
    import sys

    def emit(handle) -> None:
        handle.write("\t".join(header) + "\n")
        for row in rows:
            handle.write("\t".join(_cell(value) for value in row) + "\n")

    if path is None or str(path) == "-":
        emit(sys.stdout)
        sys.stdout.flush()
        return
    with outputs.open(path) as handle:
        emit(handle)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return format_float(value)
    return str(value).replace("\t", " ").replace("\n", " ")


def read_tsv(path: str | os.PathLike) -> tuple[list[str], list[list[str]]]:
    """Header and rows of a TSV file written by `write_tsv` (or any TSV with a header row)."""
    path = Path(path)
    if not path.exists():
        raise DataError("no such file", path)
    with _open_text(path) as handle:
        header_line = handle.readline()
        if not header_line:
            raise DataError("empty file, expected a header row", path)
        header = header_line.rstrip("\r\n").split("\t")
        rows = []
        for number, line in enumerate(handle, 2):
            fields = line.rstrip("\r\n").split("\t")
            if len(fields) != len(header):
                raise DataError(f"has {len(fields)} fields, header has {len(header)}", path, number)
            rows.append(fields)
    return header, rows


def column(header: Sequence[str], rows: Sequence[Sequence[str]], name: str, path: object = None) -> list[str]:
    """One named column; the error lists the columns that exist."""
    try:
        index = list(header).index(name)
    except ValueError:
        raise DataError(f"no column {name!r}; columns are {', '.join(header)}", path) from None
    return [row[index] for row in rows]


def parse_float(text: str) -> float:
    return float(text) if text else math.nan
