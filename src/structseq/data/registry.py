"""Named benchmarks: one explicit table from dataset name to how each split is read or generated.

Every entry is a `Dataset` with a loader `(split, data_root) -> list[Example]`. Rule-defined splits
(SCAN, Colors) are generated from their grammars and need no files; the rest read `data_root`
(`--data-root`, $STRUCTSEQ_DATA, default ../shared/data; see `structseq.paths`).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from structseq.data.dataset import Dataset
from structseq.data.example import Example
from structseq.data.readers import read_file, read_parallel, read_tsv
from structseq.errors import DataError
from structseq.paths import data_root as resolve_root


def _scan(name: str, split: str, root: Path) -> list[Example]:
    from structseq.data import scan

    return scan.SPLITS[name](root)[split]


def _colors(split: str, root: Path) -> list[Example]:
    from structseq.data import colors

    return colors.splits()[split]


def _cogs(split: str, root: Path) -> list[Example]:
    return read_tsv(root / "cogs" / f"{split}.tsv", columns=("source", "target", "category"))


def _tatoeba(split: str, root: Path) -> list[Example]:
    return read_tsv(root / "tatoeba_en_zh" / f"{split}.tsv")


def _cognition(split: str, root: Path) -> list[Example]:
    d = root / "cognition"
    if split == "cg-test":
        return read_parallel(
            d / "cg-test/cg-test.en", d / "cg-test/cg-test.zh", {"compound": d / "cg-test/cg-test.compound"}
        )
    return read_parallel(d / f"{split}.en", d / f"{split}.zh")


def _react(split: str, root: Path) -> list[Example]:
    name = {"cg-test": "cg_test"}.get(split, split)
    return read_parallel(root / "react/raw" / f"{name}.de", root / "react/raw" / f"{name}.en")


def _build() -> dict[str, Dataset]:
    from structseq.data import scan

    table: dict[str, Dataset] = {}
    for name in scan.SPLITS:
        generated = name != "scan-simple"
        table[name] = Dataset(
            name,
            f"SCAN {name[5:]} split (Lake & Baroni 2018)",
            ("train", "test"),
            partial(_scan, name),
            "generated" if generated else "files",
            note="" if generated else "a random 80/20 draw: read from the official files (brendenlake/SCAN)",
            files={} if generated else dict(zip(("train", "test"), ((p,) for p in scan.OFFICIAL_FILES[name]))),
        )
    table["colors"] = Dataset(
        "colors", "Colors few-shot instruction learning (Lake et al. 2019)", ("train", "test"), _colors, "generated"
    )
    from structseq.data.context import context_datasets  # ctx-commands, Maruf documents, DiscEvalMT

    table.update(context_datasets())
    table.update(_file_datasets())
    return table


def _file_datasets() -> dict[str, Dataset]:
    """The benchmarks read from files under the data root (COGS, Tatoeba, CoGnition, ReaCT, TLGbank) and the
    generated AB grammar."""
    table: dict[str, Dataset] = {}
    table["cogs"] = Dataset(
        "cogs",
        "COGS semantic parsing (Kim & Linzen 2020); category column kept",
        ("train", "dev", "test", "gen"),
        _cogs,
        "files",
        note="najoungkim/COGS data/",
        files={s: (f"cogs/{s}.tsv",) for s in ("train", "dev", "test", "gen")},
    )
    table["tatoeba-en-zh"] = Dataset(
        "tatoeba-en-zh",
        "Tatoeba English-Chinese, tokenised (Akyürek & Andreas 2021)",
        ("train", "dev", "test"),
        _tatoeba,
        "files",
        note="ekinakyurek/lexical TRANSLATE/",
        files={s: (f"tatoeba_en_zh/{s}.tsv",) for s in ("train", "dev", "test")},
        bleu_tokenize="zh",
        pooled_references=("train", "dev", "test"),
        metrics=("pooled_bleu",),
    )
    table["cognition"] = Dataset(
        "cognition",
        "CoGnition en-zh compositional MT (Li et al. 2021)",
        ("valid", "test", "cg-test"),
        _cognition,
        "files",
        note="no train set: the 196k-pair training data (yafuly/CoGnition data/train.*) is not in the shared data",
        files={
            "valid": ("cognition/valid.en", "cognition/valid.zh"),
            "test": ("cognition/test.en", "cognition/test.zh"),
            "cg-test": ("cognition/cg-test/cg-test.en", "cognition/cg-test/cg-test.zh"),
        },
        bleu_tokenize="zh",
        metrics=("cognition_bleu", "cter"),
    )
    table["react"] = Dataset(
        "react",
        "ReaCT de-en compositional test sets (Zheng & Lapata 2023)",
        ("valid", "test", "cg-test"),
        _react,
        "files",
        note="no train set: the IWSLT14 training part (mswellhao/Dangle ReaCT_data) is not in the shared data",
        files={
            s: (f"react/raw/{f}.de", f"react/raw/{f}.en")
            for s, f in (("valid", "valid"), ("test", "test"), ("cg-test", "cg_test"))
        },
    )
    from structseq.data import tlgbank

    table["tlgbank-light"] = Dataset(
        "tlgbank-light",
        "TLGbank light supertagging, French type-logical categories (Moot 2015)",
        ("train", "dev", "test"),
        tlgbank.tlgbank_light,
        "files",
        note="RichardMoot/TLGbankLight maxentdata.txt; sentences drawn 80/10/10 with seed 42",
        files={s: (tlgbank.TLGBANK_LIGHT,) for s in ("train", "dev", "test")},
    )
    table["ab-grammar"] = Dataset(
        "ab-grammar",
        "a tiny synthetic AB grammar for supertaggers; test holds a category unseen in training",
        ("train", "dev", "test"),
        lambda split, root: _ab_grammar()[split],
        "generated",
    )
    return table


def _ab_grammar() -> dict[str, list[Example]]:
    from structseq.data import ab_grammar

    return ab_grammar.splits(600, 100, seed=0)


_DATASETS: dict[str, Dataset] | None = None


def datasets() -> dict[str, Dataset]:
    """The registry (built on first use)."""
    global _DATASETS
    if _DATASETS is None:
        _DATASETS = _build()
    return _DATASETS


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
    elif name not in datasets() and (Path(name).exists() or "," in name or "/" in name):
        return read_file(name, columns, fields)
    return get_dataset(name).load(split, resolve_root(data_root))


def holdout(examples: list[Example], fraction: float, seed: int) -> tuple[list[Example], list[Example]]:
    """Seeded random split of `examples` into (rest, held out); at least one example is held out."""
    idx = list(range(len(examples)))
    random.Random(seed).shuffle(idx)
    k = max(1, round(fraction * len(examples)))
    held = set(idx[:k])
    return ([e for i, e in enumerate(examples) if i not in held], [examples[i] for i in sorted(held)])
