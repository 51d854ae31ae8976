"""Colors (Lake, Linzen & Baroni 2019; split of Akyürek & Andreas 2021), embedded.

The 24 inputs are the paper's (Table 6), copied from `colors/train.tsv` and `colors/test.tsv`;
outputs come from the interpreter, so the benchmark needs no data directory.

Grammar, tightest first: `x fep` = x x x; `x blicket y` = x y x; `x kiki y` = y x.
Chains of one operator group to the left (`a blicket b blicket c` = (a blicket b) blicket c);
the published data has no such chains, and kiki is associative anyway.
"""

from __future__ import annotations

from pathlib import Path

from structseq.data.dataset import register_dataset
from structseq.data.example import Example
from structseq.errors import DataError

PRIMITIVES = {"dax": "RED", "lug": "BLUE", "wif": "GREEN", "zup": "YELLOW"}

OFFICIAL_FILES = {"colors": ("colors/train.tsv", "colors/test.tsv")}

TRAIN_INPUTS = (
    "dax",
    "lug",
    "wif",
    "zup",
    "lug fep",
    "dax fep",
    "lug blicket wif",
    "wif blicket dax",
    "lug kiki wif",
    "dax kiki lug",
    "lug fep kiki wif",
    "wif kiki dax blicket lug",
    "lug kiki wif fep",
    "wif blicket dax kiki lug",
)

TEST_INPUTS = (
    "zup fep",
    "zup blicket lug",
    "dax blicket zup",
    "zup kiki dax",
    "wif kiki zup",
    "zup fep kiki lug",
    "wif kiki zup fep",
    "lug kiki wif blicket zup",
    "zup blicket wif kiki dax fep",
    "zup blicket zup kiki zup fep",
)


def _bad(command: str, why: str) -> DataError:
    return DataError(f"not a Colors command: {command!r} ({why})")


def _split_on(words: list[str], op: str, command: str) -> list[list[str]]:
    """Split `words` at every `op`; every operand must be non-empty."""
    parts: list[list[str]] = [[]]
    for w in words:
        if w == op:
            parts.append([])
        else:
            parts[-1].append(w)
    if any(not p for p in parts):
        raise _bad(command, f"'{op}' needs an operand on each side")
    return parts


def _fep_expr(words: list[str], command: str) -> tuple[str, ...]:
    head, *rest = words
    if head not in PRIMITIVES:
        raise _bad(command, f"expected dax/lug/wif/zup, got {head!r}")
    if any(w != "fep" for w in rest):
        raise _bad(command, f"unexpected {next(w for w in rest if w != 'fep')!r} after {head!r}")
    return (PRIMITIVES[head],) * 3 ** len(rest)


def _blicket_expr(words: list[str], command: str) -> tuple[str, ...]:
    first, *others = (_fep_expr(p, command) for p in _split_on(words, "blicket", command))
    for y in others:
        first = first + y + first
    return first


def interpret_tokens(command: str) -> tuple[str, ...]:
    """Like `interpret`, returning the colour tokens."""
    words = command.split()
    if not words:
        raise DataError("not a Colors command: empty command")
    first, *others = (_blicket_expr(p, command) for p in _split_on(words, "kiki", command))
    for y in others:
        first = y + first
    return first


def interpret(command: str) -> str:
    """Colour sequence of a command; DataError if it is outside the grammar."""
    return " ".join(interpret_tokens(command))


def splits(data_root: Path | None = None) -> dict[str, list[Example]]:
    """The official 14 train / 10 test pairs (the root is ignored: nothing is read)."""
    return {
        part: [Example(tuple(c.split()), interpret_tokens(c)) for c in inputs]
        for part, inputs in (("train", TRAIN_INPUTS), ("test", TEST_INPUTS))
    }


@register_dataset(
    "colors",
    description="Colors few-shot instruction learning (Lake et al. 2019)",
    splits=("train", "test"),
    source="generated",
)
def _colors(split: str, root: Path) -> list[Example]:
    return splits()[split]
