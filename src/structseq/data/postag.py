"""Part-of-speech taggers over pre-tokenised sentences, for statistics of test sets (`compose stats`) and the
context-use score: TextBlob's offline English tagger, or a user's own as MODULE:FUNCTION."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from structseq.errors import ConfigError, StructseqError

Tagger = Callable[[Sequence[Sequence[str]]], list[list[str]]]


def textblob_tagger() -> Tagger:
    """TextBlob's offline English tagger (Penn tags) over pre-tokenised sentences."""
    try:
        from textblob.en import parser
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise StructseqError("POS statistics need TextBlob: pip install textblob") from error

    def tag(sentences: Sequence[Sequence[str]]) -> list[list[str]]:
        return [[pair[1] for pair in parser.find_tags(list(tokens))] if tokens else [] for tokens in sentences]

    return tag


TAGGERS: dict[str, Callable[[], Tagger]] = {"textblob": textblob_tagger}


def get_tagger(name: str | None) -> Tagger | None:
    """A tagger by name, or a user's as `MODULE:FUNCTION` (a callable: token lists -> Penn tag lists);
    None or "none" disables POS statistics."""
    if name is None or name == "none":
        return None
    if ":" in name:
        import importlib

        module, _, attr = name.partition(":")
        try:
            tagger = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"tagger {name!r}: cannot import it ({e})") from None
        if not callable(tagger):
            raise ConfigError(f"tagger {name!r} is not callable")
        return tagger
    if name not in TAGGERS:
        raise ConfigError(f"unknown tagger {name!r}; choose one of: none, {', '.join(TAGGERS)}, or MODULE:FUNCTION")
    return TAGGERS[name]()
