"""Named datasets and what a split string means.

Each dataset registers at its loader with `@register_dataset` (`structseq.data.dataset`; the built-in ones in `structseq.data.scan`,
`colors`, `files`, `tlgbank`, `ab_grammar` and `context`; a plugin module named in $STRUCTSEQ_PLUGINS the same
way). A loader is `(split, data_root) -> list[Example]`. Rule-defined splits (SCAN, Colors) are generated and
need no files; the rest read `data_root` (`--data-root`, $STRUCTSEQ_DATA, default ../shared/data; see
`structseq.paths`).

`SplitSpec.parse` is the one rule for a split string (`test`, `NAME:SPLIT`, a file) and `SplitSpec.load` the one
reader of it, used by training (`data.training`) and evaluation and scoring (`Run.load_split`) alike.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from structseq.data.dataset import DATASETS, Dataset
from structseq.data.example import Example
from structseq.data.readers import read_file
from structseq.errors import DataError
from structseq.paths import data_root as resolve_root


def datasets() -> dict[str, Dataset]:
    """Every registered dataset, by name (the live table: built-in and plugin datasets)."""
    return DATASETS.table()


def get_dataset(name: str) -> Dataset:
    table = datasets()
    if name not in table:
        raise DataError(
            f"unknown dataset '{name}'; known: {', '.join(sorted(table))}, "
            "or give a file path (TSV, SCAN format, or SRC,TGT parallel files)"
        )
    return table[name]


def dataset_split(spec: str) -> tuple[str, str] | None:
    """`NAME:SPLIT` of a registered dataset (e.g. `cognition:cg-test`) -> (NAME, SPLIT), else None
    (an existing file whose name has a colon stays a file)."""
    name, sep, split = spec.partition(":")
    if not sep or name not in datasets() or Path(spec).exists():
        return None
    return name, split


def looks_like_file(spec: str) -> bool:
    """A split given as a file: it exists, or it looks like a path (a folder, a suffix) or `SRC,TGT`."""
    return Path(spec).exists() or "," in spec or "/" in spec or Path(spec).suffix in (".tsv", ".txt", ".gz", ".jsonl")


@dataclass(frozen=True)
class SplitSpec:
    """What a split string names, relative to a config's `data.dataset` (None: no dataset is configured):
    `named` NAME:SPLIT of a registered dataset, a `file` (every non-named spec when the dataset is `files`),
    or a `split` of the configured dataset. `dataset` is the named dataset, else the configured one; `split`
    is the split name or the file spec."""

    dataset: str | None
    split: str
    kind: str  # named | file | split

    @classmethod
    def parse(cls, spec: str, dataset: str | None = None) -> SplitSpec:
        named = dataset_split(spec)
        if named is not None:
            return cls(named[0], named[1], "named")
        if dataset == "files" or looks_like_file(spec):
            return cls(dataset, spec, "file")
        return cls(dataset, spec, "split")

    def load(
        self, data_root=None, columns: Sequence[str] | None = None, fields: dict[str, str] | None = None
    ) -> list[Example]:
        """Its examples (`columns`/`fields` read a TSV/JSON Lines file, see `read_file`)."""
        if self.kind == "file":
            return read_file(self.split, columns, fields)
        return load_dataset(self.dataset, self.split, data_root)


def load_dataset(
    name: str,
    split: str = "train",
    data_root: str | Path | None = None,
    columns: Sequence[str] | None = None,
    fields: dict[str, str] | None = None,
) -> list[Example]:
    """Examples of a named dataset split; `name` may also be `NAME:SPLIT` (then `split` is ignored), which
    is how configs with `dataset: files` name registered splits, or a file path (`split` ignored too;
    `columns` names a TSV file's columns, see `read_tsv`; `fields` a JSON Lines file's keys, see `read_jsonl`)."""
    spec = dataset_split(name)
    if spec is not None:
        name, split = spec
    elif name not in datasets() and looks_like_file(name):  # the rule SplitSpec.parse applies
        return read_file(name, columns, fields)
    return get_dataset(name).load(split, resolve_root(data_root))


def holdout(examples: list[Example], fraction: float, seed: int) -> tuple[list[Example], list[Example]]:
    """Seeded random split of `examples` into (rest, held out); at least one example is held out."""
    idx = list(range(len(examples)))
    random.Random(seed).shuffle(idx)
    k = max(1, round(fraction * len(examples)))
    held = set(idx[:k])
    return ([e for i, e in enumerate(examples) if i not in held], [examples[i] for i in sorted(held)])
