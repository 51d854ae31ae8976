"""What every reader checks on each example it makes: no reserved strings, no sequence over a maximum length.

Reserved strings: `<pad> <s> </s> <unk>` are the vocabulary's special symbols, `<sep>` joins source and
context in the sequential context model and `<brk>` separates context sentences; as data they would silently
become special ids (`</s>` inside a target would end it), so a line holding one as a token is a DataError
naming `file:line`. (`<brk>` is allowed in a context, between its sentences; inside a longer token, e.g.
`a</s>`, they are ordinary text.)

Length: every input a model sees is bounded (`input_limits`): a source or target by `data.max_length`, else
the model's `model.max_length` (`MAX_LENGTH` by default: attention memory grows with the square of the
length), a context by the model's `model.max_context_length` (`MAX_CONTEXT_LENGTH`) unless
`task.max_context_tokens` trims it. Readers apply the limits of the innermost `length_limit(...)` block (none
outside one). Training skips over-long examples and counts them (`skip=True`); evaluation and prediction
make them an error naming the line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from structseq.data.example import Example
from structseq.data.vocab import SPECIALS
from structseq.errors import DataError
from structseq.fields import declared

#: the default longest source or target (tokens) of a model, and the longest context of a context model
MAX_LENGTH, MAX_CONTEXT_LENGTH = 1024, 4096
SEP, BRK = "<sep>", "<brk>"  # source <sep> context (sequential context model); between context sentences
RESERVED = frozenset(SPECIALS) | {SEP, BRK}
_SHOWN = " ".join((*SPECIALS, SEP, BRK))
FUSED = "fused input (source + target)"  # the side `over_limit` names for `LengthLimit.fused`


@dataclass
class LengthLimit:
    max_length: int | None = None
    skip: bool = False
    max_context: int | None = None
    length_key: str = "data.max_length"  # the setting each limit comes from, named in errors
    context_key: str = "model.max_context_length"
    skipped: list[str] = field(default_factory=list)  # `file:line` of each skipped example
    #: how a source or target is counted against `max_length` (side name, tokens -> count; None: its tokens),
    #: e.g. a pretrained tokenizer's pieces (`Task.input_measure`); `unit` names the count in messages
    measure: Callable[[str, Sequence[str]], int] | None = None
    unit: str = "tokens"
    #: an input the model builds from source and target together (rdangle-pretrained's fused input): its
    #: positions (example -> count, the target possibly empty) bounded by `max_fused` (`Task.input_measure`)
    fused: Callable[[Example], int] | None = None
    max_fused: int | None = None
    fused_key: str = "the model's positions"


def input_limits(cfg) -> dict:
    """The `length_limit` keywords of a config: source/target tokens (`data.max_length`, else the model's
    `max_length`, else MAX_LENGTH) and context tokens (the model's `max_context_length` when it reads
    contexts, unless `task.max_context_tokens` trims them: then no limit on what is read)."""
    most, context = declared(cfg.model, "max_length", "model."), declared(cfg.model, "max_context_length", "model.")
    if cfg.data.max_length is not None:
        length_key, length = "data.max_length", cfg.data.max_length
    else:
        length_key, length = most or ("data.max_length", MAX_LENGTH)
    return {
        "max_length": length,
        "length_key": length_key,
        "max_context": None if context is None or declared(cfg.task, "context_trim") else context[1],
        "context_key": context[0] if context is not None else "model.max_context_length",
    }


_LIMIT: ContextVar[LengthLimit | None] = ContextVar("structseq_length_limit", default=None)


@contextmanager
def length_limit(
    max_length: int | None,
    skip: bool = False,
    max_context: int | None = None,
    length_key: str = "data.max_length",
    context_key: str = "model.max_context_length",
    measure: Callable[[str, Sequence[str]], int] | None = None,
    unit: str = "tokens",
    **fused,
) -> Iterator[LengthLimit]:
    """Readers inside this block refuse (or, with `skip`, drop and count) examples with a source or target
    longer than `max_length` tokens (or `measure`'s count), a context longer than `max_context` or a fused
    input past `max_fused` (`LengthLimit.fused`; None: no limit)."""
    limit = LengthLimit(max_length, skip, max_context, length_key, context_key, measure=measure, unit=unit, **fused)
    token = _LIMIT.set(limit)
    try:
        yield limit
    finally:
        _LIMIT.reset(token)


def check_tokens(
    tokens: Sequence[str],
    name: str,
    where: object,
    line: int | None,
    max_length: int | None = None,
    key: str = "data.max_length",
) -> None:
    """A DataError for a reserved token in `tokens` (`<brk>` is allowed in a context), or (with
    `max_length`) for too many of them; `key` names the setting the maximum comes from."""
    reserved = RESERVED - {BRK} if name == "context" else RESERVED
    if not reserved.isdisjoint(tokens):
        bad = next(t for t in tokens if t in reserved)
        allowed = f" ({BRK} only between context sentences)" if bad == BRK else ""
        raise DataError(
            f"reserved token {bad!r} in the {name}: {_SHOWN} are the toolkit's special symbols and "
            f"cannot be data{allowed}",
            where,
            line,
        )
    if max_length is not None and len(tokens) > max_length:
        raise DataError(
            f"{name} has {len(tokens)} tokens, more than the maximum length {max_length} ({key})", where, line
        )


def over_limit(example: Example, limit: LengthLimit) -> tuple[str, int, int, str] | None:
    """(side, its length, the maximum, the setting) of the first side of `example` over `limit`, or None."""
    context = example.context or ()
    for name, tokens, most, key in (
        ("source", example.source, limit.max_length, limit.length_key),
        ("target", example.target, limit.max_length, limit.length_key),
        ("context", context, limit.max_context, limit.context_key),
    ):
        if most is None or not tokens:
            continue
        n = limit.measure(name, tokens) if limit.measure is not None and name != "context" else len(tokens)
        if n > most:
            return name, n, most, key
    if limit.fused is not None and limit.max_fused is not None:
        n = limit.fused(example)
        if n > limit.max_fused:
            return FUSED, n, limit.max_fused, limit.fused_key
    return None


def unit_of(limit: LengthLimit, side: str) -> str:
    """What `over_limit`'s count of `side` counts, for messages."""
    return {"context": "tokens", FUSED: "positions"}.get(side, limit.unit)


def check_input(example: Example, limits: dict, where: object, line: int) -> None:
    """A DataError naming `where:line` for a reserved token in an input's source or context, or either longer
    than `limits` (`length_limit`'s keywords)."""
    check_tokens(example.source, "source", where, line)
    check_tokens(example.context or (), "context", where, line)
    limit = LengthLimit(**limits)
    over = over_limit(example, limit)
    if over is not None:
        name, n, most, key = over
        raise DataError(
            f"{name} has {n} {unit_of(limit, name)}, more than the maximum length {most} ({key})", where, line
        )


def admit(out: list[Example], example: Example, line: int, source_path: object, target_path: object = None) -> None:
    """Append `example` (read from `line`) to `out` after the checks above; a skipped example is counted."""
    target_path = source_path if target_path is None else target_path
    context = example.context or ()
    paths = {"source": source_path, "target": target_path, "context": source_path, FUSED: source_path}
    for name, tokens in (("source", example.source), ("target", example.target), ("context", context)):
        check_tokens(tokens, name, paths[name], line)
    limit = _LIMIT.get()
    over = over_limit(example, limit) if limit is not None else None
    if over is not None:
        if limit.skip:
            limit.skipped.append(f"{paths[over[0]]}:{line}")
            return
        name, n, most, key = over
        message = f"{name} has {n} {unit_of(limit, name)}, more than the maximum length {most} ({key})"
        raise DataError(message, paths[name], line)
    out.append(example)
