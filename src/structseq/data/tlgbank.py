"""Readers of supertagged corpora, each sentence an `Example(source=words, target=categories)`:

- `read_tagged`: one sentence a line, tokens separated by spaces, each token `word|category` (EasyCCG style),
  `word|POS|category` (C&C) or `word|POS|formula|NER` (the Grail notation of the TLGbank); lines starting with
  `#` are comments (`# start SECTION` names the section of the following sentences, kept in `meta`).
- `read_auto`: CCGbank `.auto` derivations (`ID=...` lines followed by a tree; the leaves
  `(<L category POS POS word predarg>)` give the words and their categories).
- `tlgbank_light_split`: the 80/10/10 random split of TLGbank light (each sentence drawn with a fixed seed,
  as the paper splits the full TLGbank; the `# start` sections are not splits).

POS tags are kept in `meta["pos"]` (space-separated), never used as model input by default.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from structseq.data.categories import CategoryError, parse_category
from structseq.data.dataset import register_dataset
from structseq.data.example import Example
from structseq.data.limits import check_tokens
from structseq.errors import DataError
from structseq.textio import first_line, iter_lines

TLGBANK_LIGHT = "tlgbank_light/maxentdata.txt"
SPLIT_SEED = 42
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)


def _example(words, cats, pos, section, path, n) -> Example:
    check_tokens(words, "source", path, n)  # a word `</s>` would silently become the end of the sentence
    for c in cats:
        try:
            parse_category(c)
        except CategoryError as e:
            raise DataError(f"bad category: {e}", path, n) from None
    meta = {"section": section} if section else {}
    if pos and all(pos):
        meta["pos"] = " ".join(pos)
    return Example(tuple(words), tuple(cats), meta=meta)


def read_tagged(path: str | Path) -> list[Example]:
    """Sentences of `word|category`, `word|POS|category` or `word|POS|formula|NER` tokens (see module doc)."""
    out, section = [], ""
    for n, line in iter_lines(path):
        if not line.strip():
            continue
        if line.startswith("#"):
            m = re.match(r"#\s*start\s+(\S+)", line)
            section = m.group(1) if m else section
            continue
        words, cats, pos = [], [], []
        for tok in line.split():
            parts = tok.split("|")
            if len(parts) < 2:
                raise DataError(f"token {tok!r} is not word|category or word|POS|category[|...]", path, n)
            words.append(parts[0])
            cats.append(parts[1] if len(parts) == 2 else parts[2])
            pos.append(parts[1] if len(parts) > 2 else "")
        out.append(_example(words, cats, pos, section, path, n))
    return out


_LEAF = re.compile(r"\(<L (\S+) (\S+) (\S+) (\S+) (\S+)>\)")


def read_auto(path: str | Path) -> list[Example]:
    """CCGbank `.auto` derivations: the leaves of each tree in order."""
    out = []
    for n, line in iter_lines(path):
        if not line.strip() or line.startswith("ID="):
            continue
        leaves = _LEAF.findall(line)
        if not leaves:
            raise DataError("no (<L category POS POS word predarg>) leaves on a derivation line", path, n)
        out.append(_example([l[3] for l in leaves], [l[0] for l in leaves], [l[1] for l in leaves], "", path, n))
    return out


def sniff(first_line: str) -> str | None:
    """'auto' or 'tagged' when a file's first line looks like one of these formats, else None."""
    if first_line.startswith("ID=") or first_line.startswith("(<T "):
        return "auto"
    toks = first_line.split()
    if "\t" not in first_line and (first_line.startswith("# start") or (toks and all("|" in t for t in toks))):
        return "tagged"
    return None


def read_supertag_file(path: str | Path) -> list[Example]:
    return read_auto(path) if sniff(first_line(path)) == "auto" else read_tagged(path)


def random_split(
    examples: list[Example], seed: int = SPLIT_SEED, fractions: tuple[float, float, float] = SPLIT_FRACTIONS
) -> dict[str, list[Example]]:
    """Each sentence drawn train/dev/test independently with probabilities `fractions` (seeded)."""
    rng = random.Random(seed)
    out: dict[str, list[Example]] = {"train": [], "dev": [], "test": []}
    for e in examples:
        r = rng.random()
        out["train" if r < fractions[0] else "dev" if r < fractions[0] + fractions[1] else "test"].append(e)
    return out


@register_dataset(
    "tlgbank-light",
    description="TLGbank light supertagging, French type-logical categories (Moot 2015)",
    splits=("train", "dev", "test"),
    note="RichardMoot/TLGbankLight maxentdata.txt; sentences drawn 80/10/10 with seed 42",
    files={s: (TLGBANK_LIGHT,) for s in ("train", "dev", "test")},
)
def tlgbank_light(split: str, root: Path) -> list[Example]:
    return random_split(read_tagged(root / TLGBANK_LIGHT))[split]
