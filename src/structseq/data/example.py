"""One source/target pair, the unit every reader produces."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Example:
    """A tokenised pair. `category` keeps a per-example label (e.g. COGS generalisation type)."""

    source: tuple[str, ...]
    target: tuple[str, ...]
    category: str | None = None
    extra: tuple[str, ...] = field(default=())

    @classmethod
    def from_text(cls, source: str, target: str, category: str | None = None, extra=()) -> "Example":
        return cls(tuple(source.split()), tuple(target.split()), category, tuple(extra))

    @property
    def source_text(self) -> str:
        return " ".join(self.source)

    @property
    def target_text(self) -> str:
        return " ".join(self.target)
