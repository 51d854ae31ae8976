"""Reading the records the tables are rendered from: JSON files, JSON lines and `LABEL=FILE` pairs, as UTF-8
(`structseq.textio`), a problem named by file (and line) as a one-line `DataError`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from structseq.errors import DataError, StructseqError
from structseq.textio import iter_lines, read_text


def read_json(path: str | Path) -> Any:
    """One JSON document."""
    try:
        return json.loads(read_text(path))
    except ValueError as e:
        raise DataError(f"not valid JSON ({e})", path) from None


def read_jsonl(path: str | Path) -> list[dict]:
    """The records of a JSON-lines file (blank lines skipped)."""
    out = []
    for number, line in iter_lines(path):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError as e:
                raise DataError(f"not a JSON record ({e})", path, number) from None
    return out


def read_jsonl_files(paths) -> list[dict]:
    """The records of several JSON-lines files, in order."""
    return [r for path in paths for r in read_jsonl(path)]


def labelled(spec: str) -> tuple[str, str]:
    """(LABEL, FILE) of a `LABEL=FILE` argument: where a table compares measurements, each is named."""
    label, sep, path = spec.partition("=")
    if not sep:
        raise StructseqError(f"expected LABEL=FILE, got {spec!r}")
    return label, path


def read_labelled(specs) -> list[tuple[str, dict]]:
    """[(LABEL, the JSON of FILE)] of `LABEL=FILE` arguments."""
    return [(label, read_json(path)) for label, path in map(labelled, specs)]


def save_figure(fig, path: str | Path) -> None:
    """A matplotlib figure (120 dpi, the format of the suffix) written atomically over `path`, the file the
    caller named (`--plot`): no manifest beside it, as the figures live in the documents' folders."""
    from structseq.outputs import atomic_open

    fmt = Path(path).suffix.lstrip(".").lower() or "png"
    if fmt not in fig.canvas.get_supported_filetypes():
        raise StructseqError(f"{path}: cannot draw a .{fmt} file")
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format=fmt, dpi=120)


def table(header: list[str], rows: list[list], align: str = "---") -> list[str]:
    """A Markdown table's lines: the header, the rule (`align` per column after the first), the rows."""
    return [
        "| " + " | ".join(header) + " |",
        "|---|" + f"{align}|" * (len(header) - 1),
        *("| " + " | ".join(str(c) for c in r) + " |" for r in rows),
    ]
