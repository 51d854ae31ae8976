"""Typed config sections: dataclass fields that carry their help text and bounds, and the validation that
turns a nested dict into dataclasses. A leaf: it knows no model, task or registry (a section that picks its
schema by a key, e.g. `model` by `arch`, is resolved by the function the caller passes in).

    @dataclass
    class MyConfig:
        arch: str = option("my-model", "model family")
        width: int = option(64, "model width", ge=1)
"""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import Any

from structseq.errors import ConfigError
from structseq.yamlio import load_yaml

#: what a field may declare it is (`option(..., role=...)`), so that generic code finds it without knowing its
#: name: a `width` or `heads` of a model (sizes a test shrinks), the longest input a model takes (`max_length`,
#: `max_context_length`), the context length a task trims to (`context_trim`), its output head section (`head`),
#: the seed of a decoding strategy's draws (`seed`: evaluation names always show it)
ROLES = ("width", "heads", "max_length", "max_context_length", "context_trim", "head", "seed")


def option(
    default,
    help: str,
    *,
    ge=None,
    gt=None,
    le=None,
    lt=None,
    choices=None,
    length=None,
    pattern=None,
    path: bool = False,
    role=None,
    **kw,
):
    """A config field with its help text and the values it accepts, checked when a config is loaded:
    numbers (each item of a list) within `ge`/`gt`/`le`/`lt`, a string one of `choices` (a tuple, or a
    function returning one) or matching `pattern` (a pair: regular expression, its description), a list of
    `length` items. None (for `X | None` fields) is always valid. `path`: a local folder a trained run keeps
    reading (a pretrained base), stored absolute when training starts and movable at evaluation
    (`structseq.config.absolute_paths`, `moved_paths`). `role`: one of `ROLES` (see
    `declared`)."""
    if role is not None and role not in ROLES:
        raise ValueError(f"option role must be one of {', '.join(ROLES)}, not {role!r}")
    limits = {
        k: v
        for k, v in dict(ge=ge, gt=gt, le=le, lt=lt, choices=choices, length=length, pattern=pattern, role=role).items()
        if v is not None
    }
    metadata = {"help": help, **limits, **({"path": True} if path else {})}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata, **kw)
    return field(default=default, metadata=metadata, **kw)


def path_keys(section, prefix: str = "") -> dict[str, object]:
    """The dotted keys of a config section (nested sections included) declared `option(..., path=True)`,
    with their values."""
    out: dict[str, object] = {}
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if f.metadata.get("path"):
            out[prefix + f.name] = value
        elif dataclasses.is_dataclass(value):
            out.update(path_keys(value, f"{prefix}{f.name}."))
    return out


def declared(section: Any, role: str, prefix: str = "") -> tuple[str, Any] | None:
    """(prefix + name, value) of the field of config section `section` declared with `role`, or None when it
    declares none, its value is None, or `section` is no config section: how the config and the readers find,
    say, a model's longest input whatever the model calls it."""
    if not dataclasses.is_dataclass(section):
        return None
    for f in dataclasses.fields(section):
        if f.metadata.get("role") == role and getattr(section, f.name) is not None:
            return prefix + f.name, getattr(section, f.name)
    return None


def chosen(factory: Callable[[], Any], by: str, kind: str, help: str):
    """A section whose schema is picked by its key `by` from the `kind` registry (e.g. `model.head.type`)."""
    return field(default_factory=factory, metadata={"help": help, "choose": (by, kind)})


def entries(kind: str, help: str):
    """A mapping of names from the `kind` registry to each one's settings (its schema, as `chosen` finds it), e.g.
    `decode.processors: {top_k: {k: 5}}`: each name validated (an unknown one lists the choices), each entry's
    keys under `KEY.NAME.` (null or {}: its defaults); built as {name: schema instance}."""
    return field(default_factory=dict, metadata={"help": help, "entries": kind})


def _build_entries(value: Any, kind: str, key: str, schemas: Schemas, lenient: bool, hint: str) -> dict:
    value = {} if value is None else value
    if not isinstance(value, dict):
        raise ConfigError(f"'{key}' must be a mapping of {kind} names to their settings, got {value!r}")
    table = schemas(kind)
    out = {}
    for name, settings in value.items():
        if name not in table:
            raise ConfigError(f"'{key}.{name}': unknown {kind} '{name}'; choices: {', '.join(sorted(table))}{hint}")
        out[name] = build_section(table[name], settings, f"{key}.{name}.", schemas, lenient, hint)
    return out


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_union(value: Any, hint: Any, key: str) -> Any:
    args = typing.get_args(hint)
    if value is None and type(None) in args:
        return None
    errors = []
    for a in args:
        if a is type(None):
            continue
        try:
            return check_type(value, a, key)
        except ConfigError as e:
            errors.append(str(e))
    raise ConfigError(errors[0] if errors else f"'{key}': invalid value {value!r}")


def _check_float(value: Any, key: str) -> float:
    if isinstance(value, str) and _is_float(value):  # PyYAML reads `5e-4` (no dot), `inf`, `1e999` as strings
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"'{key}' must be a number, got {type(value).__name__} {value!r}")
    try:
        value = float(value)
    except OverflowError:  # an integer too large for a float
        value = math.inf
    if not math.isfinite(value):
        raise ConfigError(f"'{key}' must be a finite number, got {value!r}")
    return value


_PLAIN = {
    int: ("an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)),
    bool: ("true or false", lambda v: isinstance(v, bool)),
    dict: ("a mapping", lambda v: isinstance(v, dict)),
    str: ("a string", lambda v: isinstance(v, str)),
}


def check_type(value: Any, hint: Any, key: str) -> Any:
    """`value` converted to the field type `hint`, or a ConfigError naming `key`."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _check_union(value, hint, key)
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"'{key}' must be a list, got {type(value).__name__} {value!r}")
        (item,) = typing.get_args(hint)
        return [check_type(v, item, f"{key}[{i}]") for i, v in enumerate(value)]
    if hint is float:
        return _check_float(value, key)
    if hint in _PLAIN:
        what, ok = _PLAIN[hint]
        if not ok(value):
            if hint is bool:
                raise ConfigError(f"'{key}' must be true or false, got {value!r}")
            raise ConfigError(f"'{key}' must be {what}, got {type(value).__name__} {value!r}")
        return dict(value) if hint is dict else value
    return value


_OPS = {
    "ge": (">=", lambda x, b: x >= b),
    "gt": (">", lambda x, b: x > b),
    "le": ("<=", lambda x, b: x <= b),
    "lt": ("<", lambda x, b: x < b),
}


def check_value(value: Any, meta: Mapping, key: str) -> None:
    """A ConfigError naming `key` and the valid range or choices when `value` breaks a field's limits
    (`option`'s ge, gt, le, lt, choices, length, pattern); None always passes."""
    if value is None:
        return
    if "length" in meta and isinstance(value, list) and len(value) != meta["length"]:
        raise ConfigError(f"'{key}' must be a list of {meta['length']} items, got {value!r}")
    bounds = [(op, meta[op]) for op in _OPS if op in meta]
    for item in value if isinstance(value, list) else [value]:
        if bounds and isinstance(item, (int, float)) and not isinstance(item, bool):
            if not all(_OPS[op][1](item, b) for op, b in bounds):
                valid = " and ".join(f"{_OPS[op][0]} {b}" for op, b in bounds)
                what = f"each item of '{key}'" if isinstance(value, list) else f"'{key}'"
                raise ConfigError(f"{what} must be {valid}, got {item!r}")
    if isinstance(value, str):
        choices = meta.get("choices")
        choices = choices() if callable(choices) else choices
        if choices is not None and value not in choices:
            raise ConfigError(f"'{key}': invalid value {value!r}; choices: {', '.join(choices)}")
        if "pattern" in meta and not re.fullmatch(meta["pattern"][0], value):
            raise ConfigError(f"'{key}': invalid value {value!r}; choices: {meta['pattern'][1]}")


#: kind -> {name: schema}: how a `chosen` section finds the schema its key names
Schemas = Callable[[str], Mapping[str, type]]


def _chosen_schema(f: dataclasses.Field, value: Any, key: str, schemas: Schemas, hint: str) -> type:
    """The schema a `chosen` section's key names; unknown names list the choices and `hint` (e.g. how plugins
    are loaded)."""
    by, kind = f.metadata["choose"]
    table = schemas(kind)
    name = value.get(by, getattr(f.default_factory(), by)) if isinstance(value, dict) else None
    if not isinstance(name, str) or name not in table:
        raise ConfigError(f"'{key}.{by}': unknown {kind} '{name}'; choices: {', '.join(sorted(table))}{hint}")
    return table[name]


def build_section(
    cls: type, values: dict | None, prefix: str, schemas: Schemas, lenient: bool = False, hint: str = ""
) -> Any:
    """`values` validated into dataclass `cls`: unknown keys (unless `lenient`), types and bounds are
    ConfigErrors naming the dotted key `prefix + name`; `hint` ends the message of an unknown schema name."""
    values = {} if values is None else values
    if not isinstance(values, dict):
        raise ConfigError(f"'{prefix.rstrip('.')}' must be a mapping, got {values!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for k in values:
        if k not in names and not lenient:
            raise ConfigError(f"unknown key '{prefix}{k}'; valid keys: {', '.join(sorted(names))}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        key = prefix + f.name
        if "choose" in f.metadata:
            value = values.get(f.name)
            if isinstance(value, str):  # `task: seq2seq` is `task: {type: seq2seq}`
                value = {f.metadata["choose"][0]: value}
            value = {} if value is None else value
            schema = _chosen_schema(f, value, key, schemas, hint)
            kwargs[f.name] = build_section(schema, value, key + ".", schemas, lenient, hint)
        elif "entries" in f.metadata:
            value = values.get(f.name)
            kwargs[f.name] = _build_entries(value, f.metadata["entries"], key, schemas, lenient, hint)
        elif dataclasses.is_dataclass(hints[f.name]):
            schema = section_schema(f, hints[f.name])
            kwargs[f.name] = build_section(schema, values.get(f.name), key + ".", schemas, lenient, hint)
        elif f.name in values:
            value = values[f.name]
            if typing.get_origin(hints[f.name]) is list and isinstance(value, str):
                value = [value]  # a single path where a list is expected
            kwargs[f.name] = check_type(value, hints[f.name], key)
            check_value(kwargs[f.name], f.metadata, key)
    return cls(**kwargs)


def section_schema(f: dataclasses.Field, hint: type) -> type:
    """The schema of a nested section: its type, or what its `schema` metadata (a function) returns where the
    keys are known only once the registries are (the `decode` section with each strategy's own keys)."""
    return f.metadata["schema"]() if "schema" in f.metadata else hint


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def apply_overrides(d: dict, overrides: list[str], short: Mapping[str, str] = {}) -> dict:
    """`section.key=value` strings (value parsed as YAML) applied to a nested dict copy; malformed text is a
    ConfigError naming the override. `short`: sections that may be written as a name (`task: supertag` is
    `task: {type: supertag}`), expanded before a key is set inside them."""
    d = copy.deepcopy(d or {})
    for item in overrides:
        if not isinstance(item, str) or "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value (e.g. optim.lr=1e-3)")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        if not all(_KEY.fullmatch(p) for p in parts):
            raise ConfigError(f"override {item!r}: {key.strip()!r} is not a dotted key such as optim.lr")
        value = load_yaml(raw, f"override {item!r}") if raw.strip() else ""
        node = d
        for p in parts[:-1]:
            if node.get(p) is None:  # a missing or empty (`optim:`) section
                node[p] = {}
            elif isinstance(node[p], str) and p in short:
                node[p] = {short[p]: node[p]}
            node = node[p]
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: '{p}' is not a section")
        node[parts[-1]] = value
    return d


def walk_fields(cls: type, prefix: str = "") -> list[tuple[str, dataclasses.Field, Any]]:
    """(dotted key, field, type hint) of every plain field of `cls` and its nested sections (not `chosen` or
    `entries` ones): what `structseq config` lists and the bounds test walks."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if "choose" in f.metadata or "entries" in f.metadata:
            continue
        if dataclasses.is_dataclass(hints[f.name]):
            out += walk_fields(section_schema(f, hints[f.name]), f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, f, hints[f.name]))
    return out
