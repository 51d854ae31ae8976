"""SCAN (Lake & Baroni 2018), embedded: the grammar, its interpreter and the official splits.

The whole language (20,910 commands) is generated from the grammar, so every split except
`simple` (a random draw) is rebuilt from rules and needs no data directory. The rules were
read off the official files of brendenlake/SCAN and are checked pair-for-pair in the tests:

* jump / turn_left (add-primitive): train = commands without the primitive's phrase, plus the
  bare primitive repeated so that it is 10% of train (1467 / 2189 copies); test = every other
  command with the phrase.
* length: train = action sequences of length <= 22, test = longer ones.
* templates (around_right, jump_around_right, opposite_right, right): test = commands with
  `<x> <template>` for x among the primitives of the split; commands with `turn <template>`
  are in *neither* split (1,209 of them); train = the rest.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import lru_cache, partial
from pathlib import Path

from structseq.data.dataset import register_dataset
from structseq.data.example import Example
from structseq.errors import DataError
from structseq.paths import data_root as _default_root

PRIMITIVES = {"walk": "I_WALK", "run": "I_RUN", "jump": "I_JUMP", "look": "I_LOOK"}
TURNS = {"left": "I_TURN_LEFT", "right": "I_TURN_RIGHT"}
REPEATS = {"twice": 2, "thrice": 3}
CONJUNCTIONS = ("and", "after")
#: Action sequences up to this length go to train in the length split.
LENGTH_SPLIT_MAX_TRAIN = 22
#: In the add-primitive splits the bare primitive makes up this fraction of train.
PRIMITIVE_TRAIN_FRACTION = 10

SCAN_REPO = "https://github.com/brendenlake/SCAN"

OFFICIAL_FILES: dict[str, tuple[str, str]] = {
    "scan-simple": ("scan/simple_split/tasks_train_simple.txt", "scan/simple_split/tasks_test_simple.txt"),
    "scan-length": ("scan/length_split/tasks_train_length.txt", "scan/length_split/tasks_test_length.txt"),
    "scan-jump": (
        "scan/add_prim_split/tasks_train_addprim_jump.txt",
        "scan/add_prim_split/tasks_test_addprim_jump.txt",
    ),
    "scan-turn-left": (
        "scan/add_prim_split/tasks_train_addprim_turn_left.txt.gz",
        "scan/add_prim_split/tasks_test_addprim_turn_left.txt.gz",
    ),
    "scan-around-right": (
        "scan/template_split/tasks_train_template_around_right.txt",
        "scan/template_split/tasks_test_template_around_right.txt",
    ),
    "scan-jump-around-right": (
        "scan/template_split/tasks_train_template_jump_around_right.txt.gz",
        "scan/template_split/tasks_test_template_jump_around_right.txt.gz",
    ),
    "scan-opposite-right": (
        "scan/template_split/tasks_train_template_opposite_right.txt.gz",
        "scan/template_split/tasks_test_template_opposite_right.txt.gz",
    ),
    "scan-right": (
        "scan/template_split/tasks_train_template_right.txt.gz",
        "scan/template_split/tasks_test_template_right.txt.gz",
    ),
}


# --------------------------------------------------------------------------- grammar


def _verb_phrase(action: str, modifier: str | None, direction: str | None) -> tuple[str, ...]:
    """Meaning of V -> U | (U|turn) [opposite|around] (left|right); `action` is a primitive or 'turn'."""
    if direction is None:
        return (PRIMITIVES[action],)
    turn = TURNS[direction]
    act = () if action == "turn" else (PRIMITIVES[action],)
    if modifier is None:
        return (turn, *act)
    if modifier == "opposite":
        return (turn, turn, *act)
    return (turn, *act) * 4  # around


def _verb_phrases() -> list[tuple[str, tuple[str, ...]]]:
    """All 34 verb phrases V with their meanings, in a fixed order."""
    out = [(word, _verb_phrase(word, None, None)) for word in PRIMITIVES]
    for action in (*PRIMITIVES, "turn"):
        for modifier in (None, "opposite", "around"):
            for direction in TURNS:
                words = " ".join(w for w in (action, modifier, direction) if w)
                out.append((words, _verb_phrase(action, modifier, direction)))
    return out


def _sentences() -> list[tuple[str, tuple[str, ...]]]:
    """All 102 S -> V | V twice | V thrice with their meanings."""
    out = []
    for words, meaning in _verb_phrases():
        out.append((words, meaning))
        out.extend((f"{words} {rep}", meaning * n) for rep, n in REPEATS.items())
    return out


def _parse_verb_phrase(words: list[str], command: str) -> tuple[str, ...]:
    def bad(why: str) -> DataError:
        return DataError(f"not a SCAN command: {command!r} ({why})")

    if not words:
        raise bad("empty phrase")
    action, rest = words[0], words[1:]
    if action not in PRIMITIVES and action != "turn":
        raise bad(f"expected walk/run/jump/look/turn, got {action!r}")
    if not rest:
        if action == "turn":
            raise bad("'turn' needs left or right")
        return _verb_phrase(action, None, None)
    modifier = rest[0] if rest[0] in ("opposite", "around") else None
    tail = rest[1:] if modifier else rest
    if len(tail) != 1 or tail[0] not in TURNS:
        raise bad(f"expected left or right after {' '.join(words[: len(words) - len(tail)])!r}")
    return _verb_phrase(action, modifier, tail[0])


def _parse_sentence(words: list[str], command: str) -> tuple[str, ...]:
    if words and words[-1] in REPEATS:
        return _parse_verb_phrase(words[:-1], command) * REPEATS[words[-1]]
    return _parse_verb_phrase(words, command)


def interpret_tokens(command: str) -> tuple[str, ...]:
    """Like `interpret`, returning the action tokens."""
    words = command.split()
    if not words:
        raise DataError("not a SCAN command: empty command")
    conj = [i for i, w in enumerate(words) if w in CONJUNCTIONS]
    if len(conj) > 1:
        raise DataError(f"not a SCAN command: {command!r} (at most one 'and'/'after')")
    if not conj:
        return _parse_sentence(words, command)
    i = conj[0]
    first, second = _parse_sentence(words[:i], command), _parse_sentence(words[i + 1 :], command)
    return first + second if words[i] == "and" else second + first


def interpret(command: str) -> str:
    """Action sequence of a SCAN command; DataError if the command is outside the grammar."""
    return " ".join(interpret_tokens(command))


@lru_cache(maxsize=1)
def _language() -> tuple[Example, ...]:
    """The whole language as Examples: S alone, then `S and S`, then `S after S` (deterministic)."""
    sents = [(tuple(w.split()), m) for w, m in _sentences()]
    out = [Example(w, m) for w, m in sents]
    pairs = list(itertools.product(sents, repeat=2))
    out.extend(Example((*w1, "and", *w2), m1 + m2) for (w1, m1), (w2, m2) in pairs)
    out.extend(Example((*w1, "after", *w2), m2 + m1) for (w1, m1), (w2, m2) in pairs)
    return tuple(out)


def all_examples() -> list[Example]:
    """All 20,910 SCAN pairs, generated from the grammar."""
    return list(_language())


def all_commands() -> list[str]:
    """All 20,910 SCAN commands (the inputs of `scan/tasks.txt.gz`)."""
    return [ex.source_text for ex in _language()]


# --------------------------------------------------------------------------- official file format


def read_scan_file(path: str | Path) -> list[Example]:
    """Read the official `IN: <command> OUT: <actions>` format (plain or .gz); blank lines are skipped."""
    from structseq.data.limits import admit
    from structseq.textio import open_checked

    out = []
    with open_checked(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            if not line.startswith("IN:"):
                raise DataError(f"missing 'IN:' at the start of the line: {line[:60]!r}", path, lineno)
            cmd, sep, actions = line[3:].partition("OUT:")
            if not sep:
                raise DataError("missing 'OUT:'", path, lineno)
            if not cmd.strip():
                raise DataError("empty command after 'IN:'", path, lineno)
            if not actions.strip():
                raise DataError("empty action sequence after 'OUT:'", path, lineno)
            admit(out, Example.from_text(cmd, actions), lineno, path)
    return out


def read_official(name: str, data_root: Path | None = None) -> dict[str, list[Example]]:
    """Read the official train/test files of split `name` (a key of OFFICIAL_FILES)."""
    if name not in OFFICIAL_FILES:
        raise DataError(f"unknown SCAN split {name!r}; known: {', '.join(OFFICIAL_FILES)}")
    root = Path(data_root) if data_root is not None else _default_root()
    out = {}
    for part, rel in zip(("train", "test"), OFFICIAL_FILES[name]):
        path = root / rel
        if not path.is_file():
            upstream = rel.removeprefix("scan/")
            raise DataError(f"SCAN file missing; download {upstream} from {SCAN_REPO} and put it here", path)
        out[part] = read_scan_file(path)
    return out


def simple_split(data_root: Path | None = None) -> dict[str, list[Example]]:
    """The simple split is a random 80/20 draw, so it can only be read from the official files."""
    return read_official("scan-simple", data_root)


# --------------------------------------------------------------------------- rule-defined splits


def _has(example: Example, phrase: str) -> bool:
    return f" {phrase} " in f" {example.source_text} "


def _add_primitive(phrase: str) -> dict[str, list[Example]]:
    """Train: commands without `phrase`, plus the bare primitive as 10% of train; test: the rest."""
    lang = _language()
    train = [ex for ex in lang if not _has(ex, phrase)]
    test = [ex for ex in lang if _has(ex, phrase) and ex.source_text != phrase]
    train += [Example(tuple(phrase.split()), interpret_tokens(phrase))] * (len(train) // (PRIMITIVE_TRAIN_FRACTION - 1))
    return {"train": train, "test": test}


def _template(template: str, primitives: tuple[str, ...]) -> dict[str, list[Example]]:
    """Test: commands with `<x> template`; commands with `turn template` are dropped from both."""
    held_out = [f"{p} {template}" for p in primitives]
    train, test = [], []
    for ex in _language():
        if _has(ex, f"turn {template}"):
            continue
        (test if any(_has(ex, h) for h in held_out) else train).append(ex)
    return {"train": train, "test": test}


def length_split(data_root: Path | None = None) -> dict[str, list[Example]]:
    """Train: action sequences of at most 22 actions; test: longer ones."""
    lang = _language()
    return {
        "train": [ex for ex in lang if len(ex.target) <= LENGTH_SPLIT_MAX_TRAIN],
        "test": [ex for ex in lang if len(ex.target) > LENGTH_SPLIT_MAX_TRAIN],
    }


def jump_split(data_root: Path | None = None) -> dict[str, list[Example]]:
    return _add_primitive("jump")


def turn_left_split(data_root: Path | None = None) -> dict[str, list[Example]]:
    return _add_primitive("turn left")


def around_right_split(data_root: Path | None = None) -> dict[str, list[Example]]:
    return _template("around right", tuple(PRIMITIVES))


def jump_around_right_split(data_root: Path | None = None) -> dict[str, list[Example]]:
    return _template("around right", ("jump",))


def opposite_right_split(data_root: Path | None = None) -> dict[str, list[Example]]:
    return _template("opposite right", tuple(PRIMITIVES))


def right_split(data_root: Path | None = None) -> dict[str, list[Example]]:
    return _template("right", tuple(PRIMITIVES))


SplitFn = Callable[[Path | None], dict[str, list[Example]]]

#: Dataset name -> builder; all but scan-simple are generated and ignore the data root.
SPLITS: dict[str, SplitFn] = {
    "scan-simple": simple_split,
    "scan-length": length_split,
    "scan-jump": jump_split,
    "scan-turn-left": turn_left_split,
    "scan-around-right": around_right_split,
    "scan-jump-around-right": jump_around_right_split,
    "scan-opposite-right": opposite_right_split,
    "scan-right": right_split,
}
#: The splits that need no data directory.
GENERATED = frozenset(SPLITS) - {"scan-simple"}


def _load(name: str, split: str, root: Path) -> list[Example]:
    return SPLITS[name](root)[split]


for _name in SPLITS:
    _generated = _name in GENERATED
    register_dataset(
        _name,
        description=f"SCAN {_name[5:]} split (Lake & Baroni 2018)",
        splits=("train", "test"),
        source="generated" if _generated else "files",
        note="" if _generated else "a random 80/20 draw: read from the official files (brendenlake/SCAN)",
        files={} if _generated else dict(zip(("train", "test"), ((p,) for p in OFFICIAL_FILES[_name]))),
    )(partial(_load, _name))
