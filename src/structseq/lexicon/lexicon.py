"""The `Lexicon` data type: source token -> {target token: score}, plus the method and settings that made it.

Saved as human-readable JSON `{"method": ..., "settings": {...}, "entries": {source: {target: score}}}` so
a lexicon can be inspected, diffed and edited by hand before it initialises a lexical translation layer.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structseq.errors import DataError
from structseq.outputs import UNCHECKED, Outputs

FORMAT_KEYS = ("method", "settings", "entries")


def _plain(score: float) -> float | int:
    """Write integral scores (counts) as JSON integers for readability."""
    score = float(score)
    return int(score) if score.is_integer() and abs(score) < 2**53 else score


@dataclass
class Lexicon(Mapping):
    """A weighted many-to-many token map. Scores mean what the method says (counts, PMI, posterior...)."""

    entries: dict[str, dict[str, float]]
    method: str
    settings: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        # Canonical order: sources alphabetically, targets by decreasing score then name.
        self.entries = {
            s: dict(sorted(((t, float(v)) for t, v in row.items()), key=lambda kv: (-kv[1], kv[0])))
            for s, row in sorted(self.entries.items())
            if row
        }

    # Mapping protocol: lexicon[source] -> {target: score}
    def __getitem__(self, source: str) -> dict[str, float]:
        return self.entries[source]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Lexicon):
            return NotImplemented
        return (self.method, self.settings, self.entries) == (other.method, other.settings, other.entries)

    @property
    def num_entries(self) -> int:
        """Number of (source, target) pairs."""
        return sum(len(row) for row in self.entries.values())

    def pairs(self) -> list[tuple[str, str, float]]:
        """All (source, target, score) triples in canonical order."""
        return [(s, t, v) for s, row in self.entries.items() for t, v in row.items()]

    def sources(self) -> list[str]:
        return list(self.entries)

    def targets(self) -> list[str]:
        """Target tokens that appear in any row, by first appearance in canonical order."""
        return list(dict.fromkeys(t for row in self.entries.values() for t in row))

    def best(self) -> dict[str, str]:
        """The hard (tau = 0) lexicon: each source's highest-scoring target (ties: alphabetically first)."""
        return {s: next(iter(row)) for s, row in self.entries.items()}

    def transpose(self) -> Lexicon:
        """Swap the sides: target -> {source: score}."""
        out: dict[str, dict[str, float]] = {}
        for s, t, v in self.pairs():
            out.setdefault(t, {})[s] = v
        return Lexicon(out, self.method, dict(self.settings))

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "settings": self.settings,
            "entries": {s: {t: _plain(v) for t, v in row.items()} for s, row in self.entries.items()},
        }

    def save(self, path: str | os.PathLike, outputs: Outputs = UNCHECKED) -> Path:
        """Write the lexicon JSON atomically; `outputs` (the command's `structseq.outputs.Outputs`) refuses a
        path that is an input or a file the toolkit did not write."""
        return outputs.write(path, self.to_json())

    def to_json(self) -> str:
        """Indented JSON with one line per source row, so large lexicons stay readable and diffable."""
        obj = self.to_dict()
        dump = lambda v: json.dumps(v, ensure_ascii=False)  # noqa: E731
        settings = json.dumps(obj["settings"], ensure_ascii=False, indent=2).replace("\n", "\n  ")
        rows = ",\n".join(f"    {dump(s)}: {dump(row)}" for s, row in obj["entries"].items())
        return (
            f'{{\n  "method": {dump(obj["method"])},\n  "settings": {settings},\n  "entries": {{\n{rows}\n  }}\n}}\n'
            if rows
            else f'{{\n  "method": {dump(obj["method"])},\n  "settings": {settings},\n  "entries": {{}}\n}}\n'
        )

    @classmethod
    def from_dict(cls, obj: Any, path: object = None) -> Lexicon:
        """Validate a parsed JSON object; errors name the file and the offending key."""
        if not isinstance(obj, dict):
            raise DataError(
                f"expected a JSON object with keys {', '.join(FORMAT_KEYS)}, found {type(obj).__name__}", path
            )
        missing = [k for k in FORMAT_KEYS if k not in obj]
        if missing:
            raise DataError(
                f"missing key(s) {', '.join(map(repr, missing))}; a lexicon file has "
                f"{', '.join(map(repr, FORMAT_KEYS))}",
                path,
            )
        unknown = sorted(set(obj) - set(FORMAT_KEYS))
        if unknown:
            raise DataError(f"unknown key(s) {', '.join(map(repr, unknown))}", path)
        if not isinstance(obj["method"], str):
            raise DataError(f"'method' must be a string, found {obj['method']!r}", path)
        if not isinstance(obj["settings"], dict):
            raise DataError(f"'settings' must be an object, found {type(obj['settings']).__name__}", path)
        if not isinstance(obj["entries"], dict):
            raise DataError(
                f"'entries' must be an object source -> {{target: score}}, found {type(obj['entries']).__name__}", path
            )
        entries: dict[str, dict[str, float]] = {}
        for s, row in obj["entries"].items():
            if not isinstance(row, dict):
                raise DataError(f"entries[{s!r}] must be an object {{target: score}}, found {row!r}", path)
            for t, v in row.items():
                if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
                    raise DataError(f"entries[{s!r}][{t!r}] must be a number, found {v!r}", path)
            entries[s] = {t: float(v) for t, v in row.items()}
        return cls(entries, obj["method"], obj["settings"])

    @classmethod
    def load(cls, path: str | os.PathLike) -> Lexicon:
        path = Path(path)
        if not path.is_file():
            raise DataError("lexicon file not found", path)
        try:
            obj = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise DataError(f"not valid JSON: {e.msg}", path, e.lineno) from None
        except UnicodeDecodeError as e:
            raise DataError(f"not UTF-8 text: {e.reason}", path) from None
        return cls.from_dict(obj, path)


def from_arrays(src_vocab, tgt_vocab, x, y, score, method: str, settings: dict[str, Any]) -> Lexicon:
    """Build a Lexicon from parallel id arrays (the learners' common exit)."""
    entries: dict[str, dict[str, float]] = {}
    for i, j, v in zip(x.tolist(), y.tolist(), score.tolist()):
        entries.setdefault(src_vocab[i], {})[tgt_vocab[j]] = v
    return Lexicon(entries, method, settings)
