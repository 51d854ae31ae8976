"""Subword units for raw text (`task.subword` of the seq2seq tasks): a BPE model (Hugging Face `tokenizers`)
learned on a training split (`Subword`), or a given tokenizer (`GivenTokenizer`).

Words are the whitespace tokens of an `Example`. `Subword` splits each into pieces, every piece but a word's
first prefixed with `##` (WordPiece-style continuation marks), so `decode` rebuilds the words exactly.
`GivenTokenizer` encodes the words' text with a `tokenizers` model (a `tokenizer.json`, or the fast tokenizer
of a Hugging Face folder, read locally only) and decodes pieces with that tokenizer's own decoder; what its
normaliser changed (lower case, accents) stays changed. In both, reserved tokens (`<sep>`, `<brk>`, ...) pass
through unsplit. A model is a JSON string (`to_str` / `from_str`) that the task saves in every checkpoint of a
run (its task state), so a run never needs the training data or the tokenizer folder again.

SentencePiece `.model` files are not read: the `sentencepiece` package is not a dependency (a Hugging Face
folder whose fast tokenizer has a `tokenizer.json` works, whatever model it holds).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from structseq.errors import ConfigError

CONT = "##"
#: `task.subword` values: the data's own tokens, BPE learned on the training split, a given tokenizer
KINDS = ("none", "bpe", "tokenizer")


class Subword:
    """BPE learned on a training split, with `##` continuation marks (module docstring)."""

    kind = "bpe"

    def __init__(self, tokenizer, keep: Sequence[str] = ()):
        self.tokenizer, self.keep = tokenizer, frozenset(keep)
        self._cache: dict[str, list[str]] = {}

    @classmethod
    def learn(
        cls, sentences: Iterable[Sequence[str]], vocab_size: int, *, keep: Sequence[str] = (), min_frequency: int = 2
    ) -> Subword:
        """A BPE model of at most `vocab_size` pieces learned on `sentences` (token sequences)."""
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        if vocab_size < 10:
            raise ConfigError(f"'task.subword_vocab_size' must be >= 10, got {vocab_size}")
        tok = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix=CONT))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=["<unk>"],
            continuing_subword_prefix=CONT,
            show_progress=False,
        )
        keep = frozenset(keep)
        tok.train_from_iterator((" ".join(w for w in s if w not in keep) for s in sentences), trainer)
        return cls(tok, keep)

    @classmethod
    def from_str(cls, text: str, keep: Sequence[str] = ()) -> Subword:
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
                    words[-1] += p[len(CONT) :]
                else:
                    words.append(p[len(CONT) :])
            else:
                words.append(p)
        return tuple(words)


class GivenTokenizer:
    """A given `tokenizers.Tokenizer`: words -> its pieces (the words' text encoded without special tokens),
    pieces -> words (its decoder, then whitespace)."""

    kind = "tokenizer"

    def __init__(self, tokenizer, keep: Sequence[str] = ()):
        self.tokenizer, self.keep = tokenizer, frozenset(keep)

    @classmethod
    def from_str(cls, text: str, keep: Sequence[str] = ()) -> GivenTokenizer:
        from tokenizers import Tokenizer

        return cls(Tokenizer.from_str(text), keep)

    def to_str(self) -> str:
        return self.tokenizer.to_str()

    def _runs(self, tokens: Sequence[str]) -> list[tuple[bool, list[str]]]:
        """(is a reserved token, tokens) runs of `tokens`."""
        runs: list[tuple[bool, list[str]]] = []
        for t in tokens:
            kept = t in self.keep
            if kept or not runs or runs[-1][0]:
                runs.append((kept, [t]))
            else:
                runs[-1][1].append(t)
        return runs

    def encode(self, words: Sequence[str]) -> tuple[str, ...]:
        out: list[str] = []
        for kept, run in self._runs(words):
            out += run if kept else self.tokenizer.encode(" ".join(run), add_special_tokens=False).tokens
        return tuple(out)

    def decode(self, pieces: Sequence[str]) -> tuple[str, ...]:
        decoder = self.tokenizer.decoder
        out: list[str] = []
        for kept, run in self._runs(pieces):
            out += run if kept else (decoder.decode(run) if decoder is not None else " ".join(run)).split()
        return tuple(out)


def load_tokenizer(path: str | None, key: str = "task.tokenizer_path"):
    """A `tokenizers.Tokenizer` from a `tokenizers` JSON file, or a Hugging Face tokenizer folder (its
    `tokenizer.json`, else the fast tokenizer `transformers` builds from the folder, local files only); every
    problem is a ConfigError naming `key`."""
    from tokenizers import Tokenizer

    if not path:
        raise ConfigError(
            f"'{key}' is required with task.subword: tokenizer (a tokenizers JSON file or a Hugging "
            "Face tokenizer folder)"
        )
    where = Path(path).expanduser()
    if not where.exists():
        raise ConfigError(
            f"'{key}': {str(path)!r} does not exist; give a local tokenizers JSON file or a Hugging "
            "Face tokenizer folder (nothing is downloaded)"
        )
    file = where / "tokenizer.json" if where.is_dir() else where
    try:
        if file.is_file():
            return Tokenizer.from_file(str(file))
        return _transformers_fast(where, key)
    except ConfigError:
        raise
    except Exception as e:  # a broken file: tokenizers' own exception, ValueError, OSError...
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        raise ConfigError(
            f"'{key}': cannot read a tokenizer from {str(path)!r} ({type(e).__name__}: {first})"
        ) from None


def _transformers_fast(folder: Path, key: str):
    """The `tokenizers.Tokenizer` behind a folder's fast Hugging Face tokenizer (local files only)."""
    try:
        from transformers import AutoTokenizer
    except ImportError:
        raise ConfigError(
            f"'{key}': {str(folder)!r} has no tokenizer.json, and reading its other files needs the "
            "transformers package (pip install 'structseq[hf]')"
        ) from None
    tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        raise ConfigError(
            f"'{key}': {str(folder)!r} holds a slow tokenizer ({type(tok).__name__}) with no "
            "tokenizers equivalent; save it as a fast tokenizer (tokenizer.json)"
        )
    return backend


def from_state(state: dict, keep: Sequence[str] = ()) -> Subword | GivenTokenizer | None:
    """The subword model a task saved (`{"subword": JSON, "subword_kind": "bpe" | "tokenizer"}`; checkpoints
    written before the kind was saved hold BPE), or None."""
    if not state.get("subword"):
        return None
    kind = state.get("subword_kind", "bpe")
    if kind not in ("bpe", "tokenizer"):
        raise ConfigError(f"the checkpoint's subword model is of an unknown kind {kind!r}; choices: bpe, tokenizer")
    return (Subword if kind == "bpe" else GivenTokenizer).from_str(state["subword"], keep)
