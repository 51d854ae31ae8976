"""One example, the unit every reader produces: named, typed fields instead of positional columns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: The fields a reader can fill from a named column; any other column name goes to `meta`.
FIELDS = ("source", "target", "context", "category")


@dataclass(frozen=True)
class Example:
    """A tokenised example.

    source    the input tokens (words for a tagger)
    target    the output tokens (one category per word for a tagger); empty when unknown (prediction)
    context   a second, usually long, input (context-aware models); None when the example has none
    category  a per-example label for per-category scores (e.g. the COGS generalisation type)
    meta      free named strings the evaluation may need (e.g. CoGnition's compound); not compared
    """

    source: tuple[str, ...]
    target: tuple[str, ...] = ()
    category: str | None = None
    context: tuple[str, ...] | None = None
    meta: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_text(
        cls,
        source: str,
        target: str = "",
        category: str | None = None,
        context: str | None = None,
        meta: Mapping[str, str] | None = None,
    ) -> Example:
        return cls(
            tuple(source.split()),
            tuple(target.split()),
            category,
            None if context is None else tuple(context.split()),
            dict(meta or {}),
        )

    @classmethod
    def from_columns(cls, columns: Mapping[str, str]) -> Example:
        """From named text columns (`source`, `target`, `context`, `category`; the rest goes to `meta`)."""
        meta = {k: v for k, v in columns.items() if k not in FIELDS}
        return cls.from_text(
            columns["source"], columns.get("target", ""), columns.get("category"), columns.get("context"), meta
        )

    @property
    def source_text(self) -> str:
        return " ".join(self.source)

    @property
    def target_text(self) -> str:
        return " ".join(self.target)

    @property
    def context_text(self) -> str:
        return " ".join(self.context or ())
