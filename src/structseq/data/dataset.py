"""A named dataset: its splits, where their files are, and how to load them; `register_dataset` adds one to
the registry (`structseq.data.registry` looks names up and parses split strings)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from structseq.data.example import Example
from structseq.errors import DataError
from structseq.registry import Registry


@dataclass(frozen=True)
class Dataset:
    name: str
    description: str
    splits: tuple[str, ...]
    loader: Callable[[str, Path], list[Example]]
    source: str  # "generated" (no files needed) or "files"
    note: str = ""
    files: dict[str, tuple[str, ...]] = field(default_factory=dict)  # split -> relative paths
    bleu_tokenize: str = "13a"  # the sacrebleu tokenizer its targets need (zh for Chinese)
    #: splits whose pairs are pooled as references of equal sources in the report's `pooled_bleu` (the lexicon
    #: paper's Tatoeba BLEU); the first is the training split that defines its 1-shot items
    pooled_references: tuple[str, ...] = ()
    #: registered metrics (structseq.registry.METRICS) its reports hold beside the task's own (`Task.metrics`)
    metrics: tuple[str, ...] = ()
    #: sizes known without loading (generated splits), so that listing datasets need not generate them
    sizes: dict[str, int] = field(default_factory=dict)

    def load(self, split: str, root: Path) -> list[Example]:
        if split not in self.splits:
            raise DataError(
                f"dataset '{self.name}' has no split '{split}'; splits: {', '.join(self.splits)}"
                + (f" ({self.note})" if self.note else "")
            )
        for rel in self.files.get(split, ()):
            if not (root / rel).exists():
                raise DataError(
                    f"missing file {root / rel} for {self.name}/{split}. Point --data-root or "
                    f"${'STRUCTSEQ_DATA'} at a folder holding it; provenance and download locations "
                    f"are in SOURCES.md of the shared data ({self.note or 'see README'})"
                )
        return self.loader(split, root)


DATASETS: Registry[Dataset] = Registry("dataset", "data.dataset", ("structseq.data",), "register_dataset")


def register_dataset(
    name: str,
    *,
    description: str,
    splits: Sequence[str],
    source: str = "files",
    note: str = "",
    files: Mapping[str, tuple[str, ...]] | None = None,
    bleu_tokenize: str = "13a",
    pooled_references: tuple[str, ...] = (),
    metrics: tuple[str, ...] = (),
    sizes: Mapping[str, int] | None = None,
):
    """Decorator of a loader `(split, data_root) -> list[Example]`: `data.dataset: NAME` (and `NAME:SPLIT`
    anywhere a split is given) reads with it. The fields are `Dataset`'s; `source` is `generated` (no files)
    or `files` (`files` maps each split to the paths it reads, relative to the data root)."""

    def deco(loader: Callable[[str, Path], list[Example]]):
        DATASETS.add(
            name,
            Dataset(
                name,
                description,
                tuple(splits),
                loader,
                source,
                note,
                dict(files or {}),
                bleu_tokenize,
                tuple(pooled_references),
                tuple(metrics),
                dict(sizes or {}),
            ),
        )
        return loader

    return deco
