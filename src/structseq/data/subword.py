"""Subword units for real text: a BPE model (Hugging Face `tokenizers`) learned on a training split.

Words are the whitespace tokens of an `Example`; each is split into pieces, every piece but a word's first
prefixed with `##` (WordPiece-style continuation marks), so `decode` rebuilds the words exactly. Reserved
tokens (`<sep>`, `<brk>`, ...) pass through unsplit. The model is a JSON string (`to_str` / `from_str`),
which the context task saves in every checkpoint of a run (its task state).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from structseq.errors import ConfigError

CONT = "##"


class Subword:
    def __init__(self, tokenizer, keep: Sequence[str] = ()):
        self.tokenizer, self.keep = tokenizer, frozenset(keep)
        self._cache: dict[str, list[str]] = {}

    @classmethod
    def learn(cls, sentences: Iterable[Sequence[str]], vocab_size: int, *, keep: Sequence[str] = (),
              min_frequency: int = 2) -> "Subword":
        """A BPE model of at most `vocab_size` pieces learned on `sentences` (token sequences)."""
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        if vocab_size < 10:
            raise ConfigError(f"'task.subword_vocab_size' must be >= 10, got {vocab_size}")
        tok = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix=CONT))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=["<unk>"],
                                      continuing_subword_prefix=CONT, show_progress=False)
        keep = frozenset(keep)
        tok.train_from_iterator((" ".join(w for w in s if w not in keep) for s in sentences), trainer)
        return cls(tok, keep)

    @classmethod
    def from_str(cls, text: str, keep: Sequence[str] = ()) -> "Subword":
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_str(text), keep)

    def to_str(self) -> str:
        return self.tokenizer.to_str()

    def encode_word(self, word: str) -> list[str]:
        if word in self.keep:
            return [word]
        pieces = self._cache.get(word)
        if pieces is None:
            pieces = self.tokenizer.encode([word], is_pretokenized=True).tokens or ["<unk>"]
            if len(self._cache) < 1_000_000:
                self._cache[word] = pieces
        return pieces

    def encode(self, words: Sequence[str]) -> tuple[str, ...]:
        return tuple(p for w in words for p in self.encode_word(w))

    @staticmethod
    def decode(pieces: Sequence[str]) -> tuple[str, ...]:
        """Pieces back to words: a `##` piece continues the previous word (one at the start opens a word)."""
        words: list[str] = []
        for p in pieces:
            if p.startswith(CONT) and len(p) > len(CONT):
                if words:
                    words[-1] += p[len(CONT):]
                else:
                    words.append(p[len(CONT):])
            else:
                words.append(p)
        return tuple(words)
