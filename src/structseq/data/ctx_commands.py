"""The ctx-commands generator: a task whose inputs cannot be solved without their context (no files).

A short command S uses fixed primitives (walk run jump look -> WALK RUN
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
"""

from __future__ import annotations

import random

from structseq.data.example import Example
from structseq.errors import DataError

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
