"""Reading the records the tables are rendered from: JSON files, JSON lines and `LABEL=FILE` pairs, as UTF-8
(`structseq.textio`), a problem named by file (and line) as a one-line `DataError`. Every JSON object read is a
`Record`, so that a renderer's `r["key"]` on a record without it names the file, line and key too."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from structseq.errors import DataError, StructseqError
from structseq.textio import iter_lines, read_text


class Record(dict):
    """A JSON object of a records file that knows where it was read (`path`, and `line` in a JSON-lines file):
    a key it lacks is a one-line DataError naming both and the key, not a KeyError's traceback. `.get` and `in`
    work as on a dict."""

    __slots__ = ("path", "line")

    def __init__(self, pairs=(), path: object = None, line: int | None = None):
        super().__init__(pairs)
        self.path, self.line = path, line

    def __missing__(self, key):
        raise DataError(f"a record has no key {key!r}", self.path, self.line)


#: how a JSON value is named in an error (what `json.loads` returns -> JSON's own word)
_JSON_TYPES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def _not_a_number(word: str):
    """`NaN`, `Infinity`, `-Infinity`: Python's json reads them, JSON has no such number, and no writer of the
    toolkit writes one (a diverged run's loss is a string): a record holding one is refused, not averaged."""
    raise ValueError(f"{word} is not a JSON number: a record's numbers are finite")


def _parse(text: str, path: str | Path, line: int | None) -> Record:
    """The JSON object in `text`, its objects (nested ones too) `Record`s of `path` (and `line`)."""
    value = json.loads(text, object_hook=lambda pairs: Record(pairs, path, line), parse_constant=_not_a_number)
    if not isinstance(value, Record):
        raise DataError(f"expected a JSON object, got {_JSON_TYPES.get(type(value), 'null')}", path, line)
    return value


def read_json(path: str | Path) -> Record:
    """One JSON document, an object."""
    try:
        return _parse(read_text(path), path, None)
    except ValueError as e:
        raise DataError(f"not valid JSON ({e})", path) from None


def read_jsonl(path: str | Path) -> list[Record]:
    """The records of a JSON-lines file (blank lines skipped), each a JSON object."""
    out = []
    for number, line in iter_lines(path):
        if line.strip():
            try:
                out.append(_parse(line, path, number))
            except ValueError as e:
                raise DataError(f"not a JSON record ({e})", path, number) from None
    return out


def read_jsonl_files(paths) -> list[Record]:
    """The records of several JSON-lines files, in order."""
    return [r for path in paths for r in read_jsonl(path)]


def labelled(spec: str) -> tuple[str, str]:
    """(LABEL, FILE) of a `LABEL=FILE` argument: where a table compares measurements, each is named."""
    label, sep, path = spec.partition("=")
    if not sep:
        raise StructseqError(f"expected LABEL=FILE, got {spec!r}")
    return label, path


def read_labelled(specs) -> list[tuple[str, Record]]:
    """[(LABEL, the JSON of FILE)] of `LABEL=FILE` arguments."""
    return [(label, read_json(path)) for label, path in map(labelled, specs)]


def check_output(path: str | Path, option: str) -> Path:
    """One rule for every kind's output (`--out`, `--plot`): it never replaces a file the command has read
    (`kinds.run` records the reads: `report supertag DIR -o DIR/tree-s1-beam1.json` would replace its own
    record), refused naming both. Returns the path."""
    from structseq.outputs import same_file
    from structseq.textio import files_read

    path = Path(path)
    for source in files_read():
        if same_file(path, source):
            raise StructseqError(f"{path}: is an input of this command ({source}); {option} would replace it")
    return path


def write_output(path: str | Path, data: str, option: str = "--out") -> Path:
    """`data` written atomically over `path` (`check_output` first)."""
    from structseq.outputs import atomic_write

    return atomic_write(check_output(path, option), data)


def save_figure(fig, path: str | Path) -> Path:
    """A matplotlib figure (120 dpi, the format of the suffix) written atomically over `path`, the file the
    caller named (`--plot`): no manifest beside it, as the figures live in the documents' folders. A name
    without a suffix gets `.png`, as `fig.savefig(name)` gave it before the write was atomic. `plot: FILE` on
    stderr names the file written (stdout carries the table), as the table scripts printed it. Returns it."""
    from structseq.outputs import atomic_open

    path = Path(path)
    if not path.suffix:
        path = path.with_name(path.name + ".png")
    fmt = path.suffix.lstrip(".").lower()
    if fmt not in fig.canvas.get_supported_filetypes():
        raise StructseqError(f"{path}: cannot draw a .{fmt} file")
    with atomic_open(check_output(path, "--plot"), "wb") as f:
        fig.savefig(f, format=fmt, dpi=120)
    print(f"plot: {path}", file=sys.stderr, flush=True)
    return path


def table(header: list[str], rows: list[list], align: str = "---") -> list[str]:
    """A Markdown table's lines: the header, the rule (`align` per column after the first), the rows."""
    return [
        "| " + " | ".join(header) + " |",
        "|---|" + f"{align}|" * (len(header) - 1),
        *("| " + " | ".join(str(c) for c in r) + " |" for r in rows),
    ]
