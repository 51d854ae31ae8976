"""A tiny synthetic AB (Ajdukiewicz-Bar-Hillel) grammar for testing supertaggers (CCG notation).

    S  -> NP VP             NP -> the (big) N (PPn)          VP -> IV (PPv) | TV NP | SV CP
    CP -> that S : CP/S
    PPn -> with NP : (N\\N)/NP   |  with CP : (N\\N)/CP         (a noun modifier)
    PPv -> with NP : ((NP\\S)\\(NP\\S))/NP | with CP : ((NP\\S)\\(NP\\S))/CP   (a verb-phrase modifier)

Inner NPs and clauses are short (`the N`, `that the N IV`). `splits()` leaves ((NP\\S)\\(NP\\S))/CP out of
training: it occurs only in test, composed of parts that training shows (the VP-modifier result of one
`with`, the CP argument of another and of the clause-taking verbs).
"""

from __future__ import annotations

import random
from pathlib import Path

from structseq.data.dataset import register_dataset
from structseq.data.example import Example

NOUNS = ("dog", "cat", "man", "park", "bird", "tree")
IV = ("sleeps", "runs", "sings")
TV = ("sees", "likes", "chases")
SV = ("says", "thinks")
ADJ = ("big", "small", "old")
UNSEEN = "((NP\\S)\\(NP\\S))/CP"


def _np(rng: random.Random, inner: bool = False) -> list[tuple[str, str]]:
    out = [("the", "NP/N")]
    if not inner and rng.random() < 0.3:
        out.append((rng.choice(ADJ), "N/N"))
    return out + [(rng.choice(NOUNS), "N")]


def _inner_s(rng: random.Random) -> list[tuple[str, str]]:
    """A complement clause `that the N IV` (category CP)."""
    return [("that", "CP/S")] + _np(rng, True) + [(rng.choice(IV), "NP\\S")]


def sentence(rng: random.Random, *, vp_s: bool | None = None) -> list[tuple[str, str]]:
    """One (word, category) sentence; `vp_s`: force (True) or forbid (False) a VP modifier taking an S."""
    words = _np(rng)
    if rng.random() < 0.4:
        s_arg = rng.random() < 0.5
        words += [("with", "(N\\N)/CP" if s_arg else "(N\\N)/NP")] + (_inner_s(rng) if s_arg else _np(rng, True))
    if vp_s or rng.random() < 0.5:
        words.append((rng.choice(IV), "NP\\S"))
        if vp_s or rng.random() < 0.6:
            s_arg = vp_s if vp_s is not None else (rng.random() < 0.5 if vp_s is None else False)
            if vp_s is False:
                s_arg = False
            mod = "((NP\\S)\\(NP\\S))/"
            words += [("with", mod + ("CP" if s_arg else "NP"))] + (_inner_s(rng) if s_arg else _np(rng, True))
    elif rng.random() < 0.5:
        words += [(rng.choice(TV), "(NP\\S)/NP")] + _np(rng)
    else:
        words += [(rng.choice(SV), "(NP\\S)/CP")] + _inner_s(rng)
    return words


def _example(pairs) -> Example:
    return Example(tuple(w for w, _ in pairs), tuple(c for _, c in pairs))


def splits(n_train: int = 800, n_test: int = 100, seed: int = 0) -> dict[str, list[Example]]:
    """train (the UNSEEN category never occurs), test (half the sentences hold it) and dev (like train)."""
    rng = random.Random(seed)
    train = [_example(sentence(rng, vp_s=False)) for _ in range(n_train)]
    dev = [_example(sentence(rng, vp_s=False)) for _ in range(n_test)]
    test = [_example(sentence(rng, vp_s=(i % 2 == 0) or None)) for i in range(n_test)]
    return {"train": train, "dev": dev, "test": test}


@register_dataset(
    "ab-grammar",
    description="a tiny synthetic AB grammar for supertaggers; test holds a category unseen in training",
    splits=("train", "dev", "test"),
    source="generated",
)
def _ab_grammar(split: str, root: Path) -> list[Example]:
    return splits(600, 100, seed=0)[split]
