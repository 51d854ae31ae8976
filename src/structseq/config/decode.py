"""The `decode` section's schema: the shared keys (`DecodeConfig`) and every registered strategy's own keys
(`register_strategy(name, options=...)`: e.g. `decode.groups` of diverse-beam, `decode.seed` of sampling), flat,
so `--set decode.groups=3` is validated like every key and `structseq config decode` lists them. A key of a
strategy other than `decode.strategy` is refused unless it keeps its default (`check_decode`): a strategy that
cannot honour a setting refuses it."""

from __future__ import annotations

import dataclasses
import functools
import typing

from structseq.errors import ConfigError
from structseq.registry import STRATEGIES, RegistryError


def strategy_keys() -> dict[str, tuple[str, dataclasses.Field, typing.Any]]:
    """key -> (the strategy that declares it, its field, its type hint), in registration order."""
    out: dict[str, tuple[str, dataclasses.Field, typing.Any]] = {}
    for name, cls in STRATEGIES.items():
        options = cls.options
        if options is None:
            continue
        hints = typing.get_type_hints(options)
        for f in dataclasses.fields(options):
            if f.name in out:
                raise RegistryError(f"strategy '{name}' declares decode.{f.name}, already a key of '{out[f.name][0]}'")
            out[f.name] = (name, f, hints[f.name])
    return out


@functools.lru_cache(maxsize=8)
def _schema(base: type, keys: tuple) -> type:
    fields = [
        (key, hint, dataclasses.field(default=f.default, metadata={**f.metadata, "strategy": owner}))
        for key, (owner, f, hint) in keys
    ]
    return dataclasses.make_dataclass(base.__name__, fields, bases=(base,))


def decode_schema(base: type) -> type:
    """`base` (`DecodeConfig`) with every registered strategy's keys (a name-for-name subclass, cached)."""
    shared = {f.name for f in dataclasses.fields(base)}
    keys = strategy_keys()
    clash = sorted(shared & keys.keys())
    if clash:
        raise RegistryError(f"strategy '{keys[clash[0]][0]}' declares decode.{clash[0]}, a shared decode key")
    return _schema(base, tuple(keys.items()))


def check_decode(decode) -> None:
    """A ConfigError for a key of another strategy than `decode.strategy` set to other than its default."""
    for key, (owner, f, _) in strategy_keys().items():
        value = getattr(decode, key, f.default)
        if owner != decode.strategy and value != f.default:
            raise ConfigError(
                f"'decode.{key}' {value!r}: decode.strategy {decode.strategy or 'null'} does not take it (a "
                f"setting of {owner}); set decode.strategy={owner} or leave it out"
            )
