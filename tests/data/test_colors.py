"""Colors: the interpreter against the 24 official pairs, precedence, and rejected commands."""

from __future__ import annotations

import pytest

from structseq.data import colors
from structseq.errors import DataError
from structseq.paths import data_root

ROOT = data_root()


def read_tsv(rel: str) -> list[tuple[str, str]]:
    path = ROOT / rel
    if not path.is_file():
        pytest.skip(f"Colors data not found: {path} (set STRUCTSEQ_DATA)")
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines() if line]


@pytest.mark.parametrize("part, index", [("train", 0), ("test", 1)])
def test_embedded_split_equals_official_file(part, index):
    official = read_tsv(colors.OFFICIAL_FILES["colors"][index])
    embedded = [(ex.source_text, ex.target_text) for ex in colors.splits()[part]]
    assert embedded == official


def test_split_sizes_and_interpreter_agree():
    split = colors.splits()
    assert (len(split["train"]), len(split["test"])) == (14, 10)
    for ex in split["train"] + split["test"]:
        assert colors.interpret(ex.source_text) == ex.target_text
    assert not {ex.source for ex in split["train"]} & {ex.source for ex in split["test"]}


@pytest.mark.parametrize(
    "command, colours",
    [
        ("dax", "RED"),
        ("dax fep", "RED RED RED"),
        ("dax fep fep", " ".join(["RED"] * 9)),
        ("dax blicket lug", "RED BLUE RED"),
        ("dax kiki lug", "BLUE RED"),
        # fep binds tighter than blicket: (lug fep) blicket wif.
        ("lug fep blicket wif", "BLUE BLUE BLUE GREEN BLUE BLUE BLUE"),
        ("lug blicket wif fep", "BLUE GREEN GREEN GREEN BLUE"),
        # blicket binds tighter than kiki: dax kiki (lug blicket wif).
        ("dax kiki lug blicket wif", "BLUE GREEN BLUE RED"),
        ("dax blicket lug kiki wif", "GREEN RED BLUE RED"),
        # chains group to the left.
        ("dax blicket lug blicket wif", "RED BLUE RED GREEN RED BLUE RED"),
        ("dax kiki lug kiki wif", "GREEN BLUE RED"),
    ],
)
def test_precedence(command, colours):
    assert colors.interpret(command) == colours


@pytest.mark.parametrize(
    "command",
    ["", "fep", "dax lug", "blicket dax", "dax kiki", "dax blicket kiki lug", "dax fep lug", "walk", "dax fep dax"],
)
def test_bad_commands_raise(command):
    with pytest.raises(DataError, match="not a Colors command"):
        colors.interpret(command)
