"""Token vocabularies with fixed special symbols, serialisable as plain lists."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)


class Vocab:
    """Maps tokens to ids. Ids 0-3 are always <pad>, <s>, </s>, <unk>."""

    pad, bos, eos, unk = 0, 1, 2, 3

    def __init__(self, tokens: Sequence[str]):
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with {SPECIALS}, got {tuple(tokens[:4])}")
        self.itos = list(tokens)
        self.stoi = {t: i for i, t in enumerate(self.itos)}
        if len(self.stoi) != len(self.itos):
            raise ValueError("duplicate tokens in vocabulary")

    @classmethod
    def build(cls, sequences: Iterable[Sequence[str]], min_freq: int = 1, extra: Sequence[str] = ()) -> Vocab:
        """Tokens sorted by descending frequency, ties broken alphabetically (deterministic); then the `extra`
        tokens not already in, in their order (tokens known to exist though no training example has them)."""
        counts = Counter(tok for seq in sequences for tok in seq)
        for s in SPECIALS:
            counts.pop(s, None)
        kept = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        return cls(list(SPECIALS) + kept + [t for t in dict.fromkeys(extra) if t not in kept and t not in SPECIALS])

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: str) -> bool:
        return token in self.stoi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.itos == other.itos

    def encode(self, tokens: Sequence[str]) -> list[int]:
        return [self.stoi.get(t, self.unk) for t in tokens]

    def decode(self, ids: Iterable[int], strip: bool = True) -> list[str]:
        """Ids to tokens; with `strip`, stop at </s> and drop <s>/<pad>."""
        out = []
        for i in ids:
            i = int(i)
            if strip and i == self.eos:
                break
            if strip and i in (self.pad, self.bos):
                continue
            out.append(self.itos[i])
        return out

    def to_list(self) -> list[str]:
        return list(self.itos)


Vocabs = Mapping[str, "Vocab"]  # vocabularies by name ("src", "tgt", "words", ...), as checkpoints hold them


class NamedVocabs:
    """Mixin for holders of `vocabs` (name -> Vocab): the seq2seq names as attributes."""

    vocabs: dict[str, Vocab]

    @property
    def src_vocab(self) -> Vocab:
        return self.vocabs["src"]

    @property
    def tgt_vocab(self) -> Vocab:
        return self.vocabs["tgt"]
