"""What every reader checks on each example it makes: no reserved strings, no sequence over a maximum length.

Reserved strings: `<pad> <s> </s> <unk>` are the vocabulary's special symbols; as data they would silently
become special ids (`</s>` inside a target would end it), so a line holding one as a token is a DataError
naming `file:line`. (Inside a longer token, e.g. `a</s>`, they are ordinary text.)

Length: readers apply the limit of the innermost `length_limit(...)` block (none outside one). Training
skips over-long examples and counts them (`skip=True`, `data.max_length`); evaluation and prediction make
them an error naming the line.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from structseq.data.example import Example
from structseq.data.vocab import SPECIALS
from structseq.errors import DataError

RESERVED = frozenset(SPECIALS)


@dataclass
class LengthLimit:
    max_length: int | None = None
    skip: bool = False
    skipped: list[str] = field(default_factory=list)  # `file:line` of each skipped example


_LIMIT: ContextVar[LengthLimit | None] = ContextVar("structseq_length_limit", default=None)


@contextmanager
def length_limit(max_length: int | None, skip: bool = False) -> Iterator[LengthLimit]:
    """Readers inside this block refuse (or, with `skip`, drop and count) examples with a source or target
    longer than `max_length` tokens (None: no limit)."""
    limit = LengthLimit(max_length, skip)
    token = _LIMIT.set(limit)
    try:
        yield limit
    finally:
        _LIMIT.reset(token)


def check_tokens(tokens: Sequence[str], name: str, where: object, line: int | None,
                 max_length: int | None = None) -> None:
    """A DataError for a reserved token in `tokens`, or (with `max_length`) for too many of them."""
    if not RESERVED.isdisjoint(tokens):
        bad = next(t for t in tokens if t in RESERVED)
        raise DataError(f"reserved token {bad!r} in the {name}: {' '.join(SPECIALS)} are the toolkit's special "
                        "symbols and cannot be data", where, line)
    if max_length is not None and len(tokens) > max_length:
        raise DataError(f"{name} has {len(tokens)} tokens, more than the maximum length {max_length} "
                        "(data.max_length)", where, line)


def admit(out: list[Example], example: Example, line: int, source_path: object, target_path: object = None) -> None:
    """Append `example` (read from `line`) to `out` after the checks above; a skipped example is counted."""
    target_path = source_path if target_path is None else target_path
    sides = (("source", example.source, source_path), ("target", example.target, target_path))
    for name, tokens, where in sides + (("context", getattr(example, "context", None) or (), source_path),):
        check_tokens(tokens, name, where, line)
    limit = _LIMIT.get()
    if limit is not None and limit.max_length is not None:
        for name, tokens, where in sides:
            if len(tokens) > limit.max_length:
                if limit.skip:
                    limit.skipped.append(f"{where}:{line}")
                    return
                check_tokens(tokens, name, where, line, limit.max_length)
    out.append(example)
