"""The datasets with a context, registered: ctx-commands (generated, `structseq.data.ctx_commands`), Maruf
et al. 2019 document-level en-de and DiscEvalMT contrastive en-fr (read by `structseq.data.documents`)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

from structseq.data.ctx_commands import SPLIT_SETTINGS, commands_contrastive, commands_split
from structseq.data.dataset import register_dataset
from structseq.data.documents import read_contrastive, read_documents
from structseq.data.example import Example

MARUF = {
    "maruf-ted": ("IWSLT2017", "TED talks (IWSLT 2017)"),
    "maruf-news": ("NC-2016", "News Commentary v11"),
    "maruf-europarl": ("Europarl7", "Europarl v7"),
}
DISCEVAL = {"discevalmt-anaphora": "anaphora.json", "discevalmt-lexical-choice": "lexical-choice.json"}
MARUF_CONTEXT = 2  # previous source sentences (the paper's setting)
MARUF_NOTE = "no training set here (Maruf's train sets are not in the shared data): train on dev, test on test"


@register_dataset(
    "ctx-commands",
    description="commands whose nonce words are defined in a long noisy context (embedded; Wang et al. "
    "2019-style context task); test-contrastive: pairs for the contrastive scorer",
    splits=(*SPLIT_SETTINGS, "test-contrastive"),
    source="generated",
    sizes={split: size for split, (_, size, _, _) in SPLIT_SETTINGS.items()},
)
def _commands(split: str, root: Path) -> list[Example]:
    if split == "test-contrastive":
        return commands_contrastive("test")
    return commands_split(split)


def _maruf_files(folder: str, split: str) -> tuple[str, str]:
    base = f"doclevel_mt/maruf2019_en_de/{folder}/concatenated_en2de_{split}"
    return f"{base}_en.txt", f"{base}_de.txt"


def _maruf(folder: str, split: str, root: Path) -> list[Example]:
    source, target = _maruf_files(folder, split)
    return read_documents(root / source, root / target, MARUF_CONTEXT)


for _name, (_folder, _what) in MARUF.items():
    register_dataset(
        _name,
        description=f"{_what} en-de documents (Maruf et al. 2019), context = {MARUF_CONTEXT} previous source sentences",
        splits=("dev", "test"),
        note=MARUF_NOTE,
        files={s: _maruf_files(_folder, s) for s in ("dev", "test")},
    )(partial(_maruf, _folder))


@register_dataset(
    "maruf-all",
    description="TED + News + Europarl en-de documents (Maruf et al. 2019) together (dev: about 14.7k sentences)",
    splits=("dev", "test"),
    note=MARUF_NOTE,
    files={s: tuple(f for folder, _ in MARUF.values() for f in _maruf_files(folder, s)) for s in ("dev", "test")},
)
def _maruf_all(split: str, root: Path) -> list[Example]:
    return [e for folder, _ in MARUF.values() for e in _maruf(folder, split, root)]


def _disceval(file: str, split: str, root: Path) -> list[Example]:
    return read_contrastive(
        root / "doclevel_mt" / "discevalmt_en_fr" / file, "target" if split == "test-tgtctx" else "source"
    )


for _name, _file in DISCEVAL.items():
    register_dataset(
        _name,
        description=f"DiscEvalMT {_file[:-5]} en-fr contrastive pairs (Bawden et al. 2018); test: previous source "
        "sentence as context, test-tgtctx: previous target sentence",
        splits=("test", "test-tgtctx"),
        note="contrastive evaluation only; no en-fr training data here",
        files={s: (f"doclevel_mt/discevalmt_en_fr/{_file}",) for s in ("test", "test-tgtctx")},
    )(partial(_disceval, _file))
