"""The score object every metric returns: a number plus the signature that makes it reproducible."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Tokens = Sequence[str]
#: A sentence given either as one space-tokenised string or as its tokens.
Sentence = str | Tokens


@dataclass(frozen=True)
class Score:
    """A corpus-level score. `signature` names every setting, as sacrebleu does, so that two
    numbers are only compared when their signatures match."""

    name: str
    score: float
    signature: str
    n: int
    details: Mapping[str, Any] = field(default_factory=dict)

    def __float__(self) -> float:
        return float(self.score)

    def __str__(self) -> str:
        return f"{self.signature} = {self.score:.4f}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form: score, signature, n and any metric-specific details."""
        return {"score": float(self.score), "signature": self.signature, "n": self.n, **self.details}


def signature(name: str, **settings: object) -> str:
    """`name|key:value|...` in the given order, the format of sacrebleu's signatures."""
    return "|".join([name, *(f"{k}:{v}" for k, v in settings.items())])


def tokens(sentence: Sentence) -> tuple[str, ...]:
    """Tokens of a sentence: strings are split on whitespace, token sequences kept as they are."""
    if isinstance(sentence, str):
        return tuple(sentence.split())
    return tuple(sentence)


def check_parallel(hyps: Sequence[object], refs: Sequence[object], what: str = "references") -> int:
    """Fail early on the two mistakes that otherwise give a silently wrong score."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} {what}")
    if len(hyps) == 0:
        raise ValueError("no hypotheses to score")
    return len(hyps)
