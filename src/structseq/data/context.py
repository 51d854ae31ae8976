"""Data with a context: the embedded ctx-commands task and readers for document-level MT sets.

ctx-commands (generated, no files). A short command S uses fixed primitives (walk run jump look -> WALK RUN
JUMP LOOK), modifiers (twice, thrice), connectives (`A and B` = A B, `A after B` = B A) and *defined words*:
nonce words whose meaning is given only in the context C of that example, e.g. `dax means jump walk .`. The
same nonce word means different things in different examples, so the target cannot be produced without
reading C. C is long and noisy: the relevant definitions sit among definitions of words the command does
not use (distractors) and filler sentences, tens to hundreds of tokens. Splits:

  train / valid / test   contexts of 20-100 tokens, relevant definitions in the first half of the sentences
  longer                 contexts of 150-400 tokens (longer than any training context)
  position               training lengths, relevant definitions only in the second half (unseen positions)
  combination            a defined word under `thrice` (training uses `thrice` on primitives only)
  train-anywhere         a diagnostic training set: as train, but the relevant definitions anywhere in the
                         context (train on it with `data.train: train-anywhere`; `position` is then no longer unseen)
  train-anywhere-large   the same with 60,000 examples (10x): is a model that fails data-starved or unable?

Document-level MT (Maruf et al. 2019, `<d>` files): each sentence's context is the previous N source
sentences of its document joined by `<brk>`, never crossing a `<d>` boundary. DiscEvalMT (Bawden et al.
2018): contrastive pairs; `Example.target` is the correct current-sentence translation, `meta["contrast"]`
the incorrect one, `category` the phenomenon, and the context the previous source sentence (split `test`)
or the previous *target* sentence (split `test-tgtctx`: in the anaphora set only that side differs).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from structseq.data.dataset import Dataset
from structseq.data.example import Example
from structseq.data.limits import BRK, admit  # BRK: between context sentences
from structseq.errors import DataError
from structseq.textio import iter_lines, read_text

# ---------------------------------------------------------------------------------------------- ctx-commands
PRIMITIVES = {"walk": "WALK", "run": "RUN", "jump": "JUMP", "look": "LOOK"}
REPEAT = {"twice": 2, "thrice": 3}
_ONSETS, _VOWELS, _CODAS = "bdfgklmnprstvwz", "aeiou", ("x", "g", "p", "n", "k", "b", "m")
NONCE = tuple(
    sorted(
        {o + v + c for o in _ONSETS for v in _VOWELS for c in _CODAS}
        - {
            "bag",
            "bog",
            "bug",
            "big",
            "bin",
            "ban",
            "bun",
            "den",
            "din",
            "dog",
            "dug",
            "fan",
            "fin",
            "fun",
            "gun",
            "gum",
            "kin",
            "lag",
            "leg",
            "log",
            "lug",
            "man",
            "men",
            "mob",
            "mug",
            "nun",
            "pan",
            "pen",
            "pin",
            "pun",
            "pub",
            "rag",
            "ram",
            "rib",
            "rim",
            "rob",
            "rub",
            "run",
            "sin",
            "sun",
            "tan",
            "ten",
            "tin",
            "ton",
            "tub",
            "van",
            "vim",
            "wag",
            "wig",
            "win",
            "won",
            "zen",
            "zip",
            "tab",
            "fig",
            "bib",
            "gab",
            "kab",
            "rig",
            "sub",
            "web",
            "wax",
            "box",
            "fox",
            "mix",
            "sex",
            "tax",
            "six",
            "pig",
            "peg",
            "dim",
            "him",
            "gem",
            "sum",
            "rum",
            "gob",
            "job",
            "mop",
            "pop",
            "top",
            "zap",
            "map",
            "nap",
            "lap",
            "gap",
            "tap",
            "sap",
            "cap",
            "dip",
            "lip",
            "tip",
            "rip",
            "sip",
            "nip",
            "pup",
            "sup",
            "bat",
        }
    )
)[:60]
FILLER_SUBJECTS = ("the robot", "a child", "the teacher", "my friend", "the old man", "a small dog", "the pilot")
FILLER_VERBS = ("saw", "painted", "lifted", "found", "carried", "dropped", "liked", "ignored")
FILLER_OBJECTS = (
    "a red box",
    "the green door",
    "two blue cups",
    "a heavy stone",
    "the yellow kite",
    "an empty bottle",
    "the wooden chair",
    "a paper map",
)
FILLER_TAILS = ("", "yesterday", "near the river", "in the garden", "after lunch", "without a word")


def _meaning(rng: random.Random) -> tuple[str, ...]:
    return tuple(rng.choice(sorted(PRIMITIVES)) for _ in range(rng.choice((1, 2, 2, 3))))


def _definition(word: str, meaning: tuple[str, ...]) -> list[str]:
    return [word, "means", *meaning, "."]


def _filler(rng: random.Random) -> list[str]:
    words = (
        f"{rng.choice(FILLER_SUBJECTS)} {rng.choice(FILLER_VERBS)} {rng.choice(FILLER_OBJECTS)} "
        f"{rng.choice(FILLER_TAILS)}".split()
    )
    return [*words, "."]


def _phrase(rng: random.Random, defined: list[str], split: str, force_defined: bool) -> list[str]:
    atom = defined.pop() if force_defined else rng.choice(sorted(PRIMITIVES))
    mods = ["", "twice"] + (["thrice"] if atom in PRIMITIVES or split == "combination" else [])
    if split == "combination" and atom not in PRIMITIVES:
        mods = ["thrice"]
    mod = rng.choice(mods)
    return [atom] + ([mod] if mod else [])


def _execute(command: list[str], meanings: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    def phrase(words: list[str]) -> list[str]:
        head = words[0]
        acts = [PRIMITIVES[head]] if head in PRIMITIVES else [PRIMITIVES[w] for w in meanings[head]]
        return acts * (REPEAT[words[1]] if len(words) > 1 else 1)

    for conj in ("and", "after"):
        if conj in command:
            i = command.index(conj)
            a, b = phrase(command[:i]), phrase(command[i + 1 :])
            return tuple(a + b if conj == "and" else b + a)
    return tuple(phrase(command))


SPLIT_SETTINGS = {  # split -> (seed, size, (min, max) context tokens, relevant definitions in: first | second half | any)
    "train": (11, 6000, (20, 100), "first"),
    "valid": (12, 300, (20, 100), "first"),
    "test": (13, 500, (20, 100), "first"),
    "longer": (14, 500, (150, 400), "first"),
    "position": (15, 500, (20, 100), "second"),
    "combination": (16, 500, (20, 100), "first"),
    "train-anywhere": (17, 6000, (20, 100), "any"),
    "train-anywhere-large": (18, 60000, (20, 100), "any"),
}


def commands_example(rng: random.Random, split: str, lengths: tuple[int, int], where: str) -> Example:
    n_defined = rng.choice((1, 1, 2))
    words = rng.sample(NONCE, n_defined + 8)
    defined, distractors = words[:n_defined], words[n_defined:]
    meanings = {w: _meaning(rng) for w in words}
    pool = list(defined)
    rng.shuffle(pool)
    n_phrases = max(n_defined, rng.choice((1, 2)))
    phrases = []
    for i in range(n_phrases):
        phrases.append(_phrase(rng, pool, split, force_defined=bool(pool) and (i == 0 or n_defined == 2)))
    rng.shuffle(phrases)
    command = phrases[0] if len(phrases) == 1 else phrases[0] + [rng.choice(("and", "after"))] + phrases[1]
    # the context: relevant definitions among distractor definitions and filler sentences
    target_len = rng.randint(*lengths)
    noise: list[list[str]] = []
    total = sum(len(_definition(w, meanings[w])) for w in defined)
    d = iter(distractors)
    while total < target_len:
        w = next(d, None)
        s = _definition(w, meanings[w]) if w is not None and rng.random() < 0.5 else _filler(rng)
        noise.append(s)
        total += len(s)
    while len(noise) < len(defined):  # each half of the sentences can hold every relevant definition
        noise.append(_filler(rng))
    n = len(noise) + len(defined)
    half = n // 2
    slots = {"first": range(half), "second": range(half, n), "any": range(n)}[where]
    chosen = sorted(rng.sample(slots, len(defined)))
    sentences: list[list[str]] = []
    rel, it = iter(defined), iter(noise)
    for i in range(n):
        if i in chosen:
            w = next(rel)
            sentences.append(_definition(w, meanings[w]))
        else:
            sentences.append(next(it))
    context = tuple(t for s in sentences for t in s)
    return Example(
        tuple(command),
        _execute(command, meanings),
        split,
        context,
        {"relevant_sentences": " ".join(map(str, chosen)), "n_sentences": str(n)},
    )


def commands_split(
    split: str, size: int | None = None, lengths: tuple[int, int] | None = None, seed: int | None = None
) -> list[Example]:
    """One split of ctx-commands (deterministic); `size`, `lengths` (context tokens) and `seed` replace the
    split's settings (e.g. a small quick variant for tests)."""
    if split not in SPLIT_SETTINGS:
        raise DataError(f"ctx-commands has no split '{split}'; splits: {', '.join(SPLIT_SETTINGS)}")
    default_seed, n, default_lengths, where = SPLIT_SETTINGS[split]
    lengths = lengths or default_lengths
    rng = random.Random(default_seed if seed is None else seed)
    out, seen = [], set()
    while len(out) < (size or n):
        e = commands_example(rng, split, lengths, where)
        key = (e.source, e.context)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def commands_contrastive(split: str = "test", size: int | None = None) -> list[Example]:
    """Contrastive pairs from ctx-commands (to test a contrastive scorer without en-fr data): the incorrect
    target executes the command with a defined word read as a *distractor* definition of the same context
    (category `distractor`), or with the definition of the right word but the modifier of a primitive
    dropped (category `modifier`) when the context has no distractor definition."""
    out = []
    for e in commands_split(split, size):
        ctx = list(e.context)
        defs = {ctx[i - 1]: tuple(ctx[i + 1 : ctx.index(".", i)]) for i, t in enumerate(ctx) if t == "means"}
        used = [w for w in e.source if w in defs]
        others = [m for w, m in defs.items() if w not in e.source and m != defs[used[0]]]
        if others:
            wrong = _execute(list(e.source), {**defs, used[0]: others[0]})
            kind = "distractor"
        else:
            wrong = _execute([w for w in e.source if w not in REPEAT], defs)
            kind = "modifier"
        if wrong != e.target:
            out.append(Example(e.source, e.target, kind, e.context, {**e.meta, "contrast": " ".join(wrong)}))
    return out


# ---------------------------------------------------------------------------------------------- documents
def read_documents(source_path: str | Path, target_path: str | Path, n_context: int = 2) -> list[Example]:
    """Line-aligned `<d>` document files (Maruf et al. 2019): one example per sentence whose context is the
    previous `n_context` source sentences of its document, joined by `<brk>` (None for a document's first
    sentence). `meta`: `doc` (0-based document number) and `sent` (0-based sentence number in it)."""
    src = [line for _, line in iter_lines(source_path)]
    tgt = [line for _, line in iter_lines(target_path)]
    if len(src) != len(tgt):
        raise DataError(f"{len(src)} lines but {target_path} has {len(tgt)}", source_path)
    out: list[Example] = []
    history: list[str] = []
    doc = -1
    for i, (s, t) in enumerate(zip(src, tgt)):
        s_mark, t_mark = s.strip() == "<d>", t.strip() == "<d>"
        if s_mark != t_mark:
            raise DataError(
                f"document marker '<d>' on one side only (source: {s_mark}, target: {t_mark})", source_path, i + 1
            )
        if s_mark:
            doc, history = doc + 1, []
            continue
        if doc < 0:
            raise DataError("text before the first '<d>' document marker", source_path, i + 1)
        if not s.split() or not t.split():
            raise DataError("empty sentence", source_path, i + 1)
        prev = history[-n_context:] if n_context > 0 else []
        context = f" {BRK} ".join(prev) if prev else None
        admit(
            out,
            Example.from_text(s, t, context=context, meta={"doc": str(doc), "sent": str(len(history))}),
            i + 1,
            source_path,
            target_path,
        )
        history.append(s)
    return out


def read_contrastive(path: str | Path, context_side: str = "source") -> list[Example]:
    """A DiscEvalMT JSON file (anaphora or lexical choice) as contrastive examples: source = current English
    sentence, target = its correct (or semi-correct) translation, meta["contrast"] = the incorrect one,
    category = the phenomenon, meta["block"] = the block id; context = the previous sentence on
    `context_side` ("source": English, "target": the candidate's French previous sentence)."""
    if context_side not in ("source", "target"):
        raise ValueError(f"context_side must be source or target, not {context_side!r}")
    try:
        blocks = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise DataError(f"cannot read contrastive set: {e}", path) from None
    if not isinstance(blocks, dict):
        raise DataError(f"expected a JSON object of blocks (DiscEvalMT), found {type(blocks).__name__}", path)
    out = []
    for block_id, block in blocks.items():
        try:
            out.extend(_contrastive_block(block_id, block, context_side, path))
        except (KeyError, TypeError, AttributeError, IndexError) as e:
            raise DataError(
                f"block {block_id}: not a DiscEvalMT block ({type(e).__name__}: {e}); expected "
                "'src' and 'trg' (anaphora) or 'examples' (lexical choice)",
                path,
            ) from None
    return out


def _contrastive_block(block_id, block: dict, context_side: str, path) -> list[Example]:
    """The examples of one block of `read_contrastive`."""
    out = []
    if "examples" in block:  # lexical choice: a phenomenon per block, several examples
        pairs = [(ex["src"], ex["trg"], block.get("type", "lexical-choice")) for ex in block["examples"]]
    else:  # anaphora: one source pair, several target pairs each with its type
        pairs = [(block["src"], trg, trg.get("type", "anaphora")) for trg in block["trg"]]
    for src, trg, kind in pairs:
        good = trg.get("correct") or trg.get("semi-correct")
        bad = trg["incorrect"]
        if good is None or len(src) != 2 or len(good) != 2 or len(bad) != 2:
            raise DataError(
                f"block {block_id}: expected [previous, current] sentences with a correct and an incorrect translation",
                path,
            )
        if context_side == "target" and good[0] != bad[0]:
            raise DataError(f"block {block_id}: candidates differ in their previous target sentence", path)
        context = src[0] if context_side == "source" else good[0]
        out.append(
            Example.from_text(
                src[1], good[1], category=kind, context=context, meta={"contrast": bad[1], "block": str(block_id)}
            )
        )
    return out


# ---------------------------------------------------------------------------------------------- registry
MARUF = {
    "maruf-ted": ("IWSLT2017", "TED talks (IWSLT 2017)"),
    "maruf-news": ("NC-2016", "News Commentary v11"),
    "maruf-europarl": ("Europarl7", "Europarl v7"),
}
DISCEVAL = {"discevalmt-anaphora": "anaphora.json", "discevalmt-lexical-choice": "lexical-choice.json"}
MARUF_CONTEXT = 2  # previous source sentences (the paper's setting)


def _maruf(folder: str, split: str, root: Path) -> list[Example]:
    d = root / "doclevel_mt" / "maruf2019_en_de" / folder
    return read_documents(
        d / f"concatenated_en2de_{split}_en.txt", d / f"concatenated_en2de_{split}_de.txt", MARUF_CONTEXT
    )


def _maruf_all(split: str, root: Path) -> list[Example]:
    return [e for folder, _ in MARUF.values() for e in _maruf(folder, split, root)]


def _disceval(file: str, split: str, root: Path) -> list[Example]:
    return read_contrastive(
        root / "doclevel_mt" / "discevalmt_en_fr" / file, "target" if split == "test-tgtctx" else "source"
    )


def _commands(split: str, root: Path) -> list[Example]:
    if split == "test-contrastive":
        return commands_contrastive("test")
    return commands_split(split)


def context_datasets() -> dict:
    """The registry entries of this module (`structseq.data.registry` adds them)."""
    from functools import partial

    table = {
        "ctx-commands": Dataset(
            "ctx-commands",
            "commands whose nonce words are defined in a long noisy context (embedded; Wang et al. "
            "2019-style context task); test-contrastive: pairs for the contrastive scorer",
            (*SPLIT_SETTINGS, "test-contrastive"),
            _commands,
            "generated",
            sizes={split: size for split, (_, size, _, _) in SPLIT_SETTINGS.items()},
        )
    }
    for name, (folder, what) in MARUF.items():
        base = f"doclevel_mt/maruf2019_en_de/{folder}/concatenated_en2de"
        table[name] = Dataset(
            name,
            f"{what} en-de documents (Maruf et al. 2019), context = {MARUF_CONTEXT} previous source sentences",
            ("dev", "test"),
            partial(_maruf, folder),
            "files",
            note="no training set here (Maruf's train sets are not in the shared data): train on dev, test on test",
            files={s: (f"{base}_{s}_en.txt", f"{base}_{s}_de.txt") for s in ("dev", "test")},
        )
    table["maruf-all"] = Dataset(
        "maruf-all",
        "TED + News + Europarl en-de documents (Maruf et al. 2019) together (dev: about 14.7k sentences)",
        ("dev", "test"),
        _maruf_all,
        "files",
        note=table["maruf-ted"].note,
        files={s: tuple(f for n in MARUF for f in table[n].files[s]) for s in ("dev", "test")},
    )
    for name, file in DISCEVAL.items():
        table[name] = Dataset(
            name,
            f"DiscEvalMT {file[:-5]} en-fr contrastive pairs (Bawden et al. 2018); test: previous source "
            "sentence as context, test-tgtctx: previous target sentence",
            ("test", "test-tgtctx"),
            partial(_disceval, file),
            "files",
            note="contrastive evaluation only; no en-fr training data here",
            files={s: (f"doclevel_mt/discevalmt_en_fr/{file}",) for s in ("test", "test-tgtctx")},
        )
    return table
