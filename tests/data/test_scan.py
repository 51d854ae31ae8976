"""SCAN: the interpreter, the generated language and every rule-defined split vs the official files."""

from __future__ import annotations

import gzip
import time
from collections import Counter

import pytest

from structseq.data import scan
from structseq.data.example import Example
from structseq.errors import DataError
from structseq.paths import data_root

ROOT = data_root()
needs_data = pytest.mark.skipif(
    not (ROOT / "scan" / "tasks.txt.gz").is_file(),
    reason=f"SCAN data not found under data root {ROOT} (set STRUCTSEQ_DATA)",
)


def pairs(examples: list[Example]) -> Counter:
    return Counter((ex.source_text, ex.target_text) for ex in examples)


@pytest.mark.parametrize(
    "command, actions",
    [
        ("walk", "I_WALK"),
        ("turn left", "I_TURN_LEFT"),
        ("look right", "I_TURN_RIGHT I_LOOK"),
        ("turn opposite right", "I_TURN_RIGHT I_TURN_RIGHT"),
        ("turn around left", "I_TURN_LEFT I_TURN_LEFT I_TURN_LEFT I_TURN_LEFT"),
        ("jump opposite left", "I_TURN_LEFT I_TURN_LEFT I_JUMP"),
        ("run twice", "I_RUN I_RUN"),
        ("jump around left twice", " ".join(["I_TURN_LEFT I_JUMP"] * 8)),
        (
            "walk opposite right thrice after run left",
            "I_TURN_LEFT I_RUN" + " I_TURN_RIGHT I_TURN_RIGHT I_WALK" * 3,
        ),
        ("look and turn right twice", "I_LOOK I_TURN_RIGHT I_TURN_RIGHT"),
        ("look after turn right twice", "I_TURN_RIGHT I_TURN_RIGHT I_LOOK"),
    ],
)
def test_interpret_hand_written(command, actions):
    assert scan.interpret(command) == actions


@pytest.mark.parametrize(
    "command",
    [
        "",
        "turn",
        "fly",
        "walk twice twice",
        "walk left right",
        "walk and",
        "and walk",
        "walk and run and look",
        "walk after run after look",
        "walk around",
        "twice",
        "walk opposite",
        "turn left twice and",
    ],
)
def test_interpret_rejects_commands_outside_the_grammar(command):
    with pytest.raises(DataError, match="not a SCAN command"):
        scan.interpret(command)


def test_generation_is_fast_deterministic_and_consistent_with_interpret():
    start = time.perf_counter()
    scan._language.cache_clear()
    commands = scan.all_commands()
    assert time.perf_counter() - start < 2.0
    assert len(commands) == len(set(commands)) == 20_910
    assert commands == scan.all_commands()
    for ex in scan.all_examples()[::97]:
        assert scan.interpret(ex.source_text) == ex.target_text


@needs_data
def test_generated_language_equals_tasks_file():
    assert pairs(scan.all_examples()) == pairs(scan.read_scan_file(ROOT / "scan" / "tasks.txt.gz"))


@needs_data
@pytest.mark.parametrize("name", sorted(scan.GENERATED))
def test_rule_split_equals_official_files(name):
    generated, official = scan.SPLITS[name](None), scan.read_official(name, ROOT)
    for part in ("train", "test"):
        assert pairs(generated[part]) == pairs(official[part]), (name, part)


def test_primitive_repeats_and_dropped_template_commands():
    jump, turn_left = scan.SPLITS["scan-jump"](None), scan.SPLITS["scan-turn-left"](None)
    assert pairs(jump["train"])[("jump", "I_JUMP")] == 1467
    assert pairs(turn_left["train"])[("turn left", "I_TURN_LEFT")] == 2189
    assert ("jump",) not in {ex.source for ex in jump["test"]}
    around = scan.SPLITS["scan-around-right"](None)
    assert len(around["train"]) + len(around["test"]) == 20_910 - 1209
    everywhere = [ex.source_text for part in around.values() for ex in part]
    assert not any("turn around right" in c for c in everywhere)
    assert all("around right" in ex.source_text for ex in around["test"])


def test_generated_splits_ignore_the_data_root(tmp_path):
    assert scan.SPLITS["scan-length"](tmp_path) == scan.SPLITS["scan-length"](None)


@needs_data
def test_simple_split_reads_official_files():
    split = scan.SPLITS["scan-simple"](ROOT)
    assert (len(split["train"]), len(split["test"])) == (16_728, 4_182)
    assert pairs(split["train"]) + pairs(split["test"]) == pairs(scan.all_examples())


def test_simple_split_without_files_says_where_to_get_them(tmp_path):
    with pytest.raises(DataError) as err:
        scan.simple_split(tmp_path)
    msg = str(err.value)
    assert "brendenlake/SCAN" in msg and "simple_split/tasks_train_simple.txt" in msg
    assert str(tmp_path) in msg


def test_read_scan_file_plain_and_gzip(tmp_path):
    text = "IN: jump twice OUT: I_JUMP I_JUMP\n\nIN: turn left OUT: I_TURN_LEFT\n"
    plain, packed = tmp_path / "a.txt", tmp_path / "a.txt.gz"
    plain.write_text(text)
    with gzip.open(packed, "wt") as f:
        f.write(text)
    expected = [Example.from_text("jump twice", "I_JUMP I_JUMP"), Example.from_text("turn left", "I_TURN_LEFT")]
    assert scan.read_scan_file(plain) == scan.read_scan_file(packed) == expected


@pytest.mark.parametrize(
    "bad_line, problem",
    [
        ("jump OUT: I_JUMP", "missing 'IN:'"),
        ("IN: jump I_JUMP", "missing 'OUT:'"),
        ("IN:  OUT: I_JUMP", "empty command"),
        ("IN: jump OUT:   ", "empty action sequence"),
    ],
)
def test_read_scan_file_errors_name_file_and_line(tmp_path, bad_line, problem):
    path = tmp_path / "bad.txt"
    path.write_text(f"IN: walk OUT: I_WALK\nIN: run OUT: I_RUN\n{bad_line}\n")
    with pytest.raises(DataError, match=problem) as err:
        scan.read_scan_file(path)
    assert str(err.value).startswith(f"{path}:3: ")
    assert err.value.line == 3


def test_read_scan_file_missing(tmp_path):
    with pytest.raises(DataError, match="not found"):
        scan.read_scan_file(tmp_path / "nope.txt")


def test_read_official_unknown_name():
    with pytest.raises(DataError, match="unknown SCAN split"):
        scan.read_official("scan-nope")


def test_official_files_cover_every_split():
    assert set(scan.OFFICIAL_FILES) == set(scan.SPLITS)
