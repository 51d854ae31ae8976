"""The score object every metric returns (a number plus the signature that makes it reproducible), and the
inputs object every registered metric reads (`MetricInputs`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
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


# ---------------------------------------------------------------- what a registered metric reads

#: How a signature states its score's scale: `|scale:fraction` (in [0, 1]) or `|scale:percent` (in [0, 100],
#: sacrebleu's BLEU and chrF). `structseq.registry.register_metric(..., scale=)` names the scale; the report
#: appends it to every signature of the metric's result (`with_scale`).
SCALE_KEY = "scale"


def with_scale(sig: str, scale: str) -> str:
    """`sig` ending in `|scale:SCALE`; a signature that already states a scale must state this one."""
    marker = f"|{SCALE_KEY}:"
    if marker in sig:
        stated = sig.split(marker, 1)[1].split("|", 1)[0]
        if stated != scale:
            raise ValueError(f"signature {sig!r} states scale {stated!r}, but its metric is registered as {scale!r}")
        return sig
    return f"{sig}{marker}{scale}"


def stated_scale(sig: str) -> str | None:
    """The scale a signature states, or None (records written before signatures stated it)."""
    marker = f"|{SCALE_KEY}:"
    return sig.split(marker, 1)[1].split("|", 1)[0] if marker in sig else None


def _text(sentence: Sentence) -> str:
    return sentence if isinstance(sentence, str) else " ".join(sentence)


@dataclass
class MetricInputs:
    """Everything a registered metric may read, built once per evaluation by the task (`Task.metric_inputs`).

    `hypotheses` / `references`: one per example, as text or as tokens (`hyp_text`, `ref_text`, `hyp_tokens`,
    `ref_tokens` give either form); `sources` likewise. `categories`: the examples' categories (None: none).
    `meta`: per-example columns that every example carries (e.g. CoGnition's `compound`). `dataset`, `split`,
    `data_root`: where the examples came from; `dataset_spec`: the registered dataset entry (None for files) and
    `load_split(name)`: that dataset's examples of another split (pooled references read train and dev).
    `bleu_tokenize`: sacrebleu's tokenizer (`data.bleu_tokenize`, else the dataset's); `tokenized`: outputs are
    the data's own tokens, so sacrebleu's detokenisation warning is noise. `extras`: task-specific inputs (a
    supertagger's k-best lists and training counts; a CTER scorer to use instead of the released one).

    Metrics computed from one shared pass (the supertagging scores) keep it with `memo`."""

    hypotheses: Sequence[Sentence]
    references: Sequence[Sentence]
    sources: Sequence[Sentence] = ()
    categories: Sequence[Hashable] | None = None
    meta: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    dataset: str = ""
    split: str = ""
    data_root: Any = None
    dataset_spec: Any = None
    load_split: Callable[[str], Sequence[Any]] | None = None
    bleu_tokenize: str = "13a"
    tokenized: bool = False
    extras: Mapping[str, Any] = field(default_factory=dict)
    _memo: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        check_parallel(self.hypotheses, self.references)

    @property
    def n(self) -> int:
        return len(self.hypotheses)

    @property
    def hyp_text(self) -> list[str]:
        return [_text(h) for h in self.hypotheses]

    @property
    def ref_text(self) -> list[str]:
        return [_text(r) for r in self.references]

    @property
    def hyp_tokens(self) -> list[tuple[str, ...]]:
        return [tokens(h) for h in self.hypotheses]

    @property
    def ref_tokens(self) -> list[tuple[str, ...]]:
        return [tokens(r) for r in self.references]

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """`compute()` once per inputs object (several metrics read one pass)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]
