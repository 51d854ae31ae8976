"""The benchmarks read from files under the data root: COGS, Tatoeba en-zh, CoGnition and ReaCT (each
registered at its loader; the supertag, SCAN, Colors and context datasets register in their own modules)."""

from __future__ import annotations

from pathlib import Path

from structseq.data.dataset import register_dataset
from structseq.data.example import Example
from structseq.data.readers import read_parallel, read_tsv


@register_dataset(
    "cogs",
    description="COGS semantic parsing (Kim & Linzen 2020); category column kept",
    splits=("train", "dev", "test", "gen"),
    note="najoungkim/COGS data/",
    files={s: (f"cogs/{s}.tsv",) for s in ("train", "dev", "test", "gen")},
)
def _cogs(split: str, root: Path) -> list[Example]:
    return read_tsv(root / "cogs" / f"{split}.tsv", columns=("source", "target", "category"))


@register_dataset(
    "tatoeba-en-zh",
    description="Tatoeba English-Chinese, tokenised (Akyürek & Andreas 2021)",
    splits=("train", "dev", "test"),
    note="ekinakyurek/lexical TRANSLATE/",
    files={s: (f"tatoeba_en_zh/{s}.tsv",) for s in ("train", "dev", "test")},
    bleu_tokenize="zh",
    pooled_references=("train", "dev", "test"),
    metrics=("pooled_bleu",),
)
def _tatoeba(split: str, root: Path) -> list[Example]:
    return read_tsv(root / "tatoeba_en_zh" / f"{split}.tsv")


@register_dataset(
    "cognition",
    description="CoGnition en-zh compositional MT (Li et al. 2021)",
    splits=("valid", "test", "cg-test"),
    note="no train set: the 196k-pair training data (yafuly/CoGnition data/train.*) is not in the shared data",
    files={
        "valid": ("cognition/valid.en", "cognition/valid.zh"),
        "test": ("cognition/test.en", "cognition/test.zh"),
        "cg-test": ("cognition/cg-test/cg-test.en", "cognition/cg-test/cg-test.zh"),
    },
    bleu_tokenize="zh",
    metrics=("cognition_bleu", "cter"),
)
def _cognition(split: str, root: Path) -> list[Example]:
    d = root / "cognition"
    if split == "cg-test":
        return read_parallel(
            d / "cg-test/cg-test.en", d / "cg-test/cg-test.zh", {"compound": d / "cg-test/cg-test.compound"}
        )
    return read_parallel(d / f"{split}.en", d / f"{split}.zh")


@register_dataset(
    "react",
    description="ReaCT de-en compositional test sets (Zheng & Lapata 2023)",
    splits=("valid", "test", "cg-test"),
    note="no train set: the IWSLT14 training part (mswellhao/Dangle ReaCT_data) is not in the shared data",
    files={
        s: (f"react/raw/{f}.de", f"react/raw/{f}.en")
        for s, f in (("valid", "valid"), ("test", "test"), ("cg-test", "cg_test"))
    },
)
def _react(split: str, root: Path) -> list[Example]:
    name = {"cg-test": "cg_test"}.get(split, split)
    return read_parallel(root / "react/raw" / f"{name}.de", root / "react/raw" / f"{name}.en")
