"""`structseq config`: every key of a config schema with its type, default, bounds and help (fairseq's
`--arch X -h`), read from the registries, so plugin models, heads and tasks are listed too."""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from structseq.cli.options import stdout_console
from structseq.config import Config, schemas
from structseq.errors import ConfigError
from structseq.fields import section_schema, walk_fields

console = stdout_console()
KINDS = ("model", "head", "task")
_BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))


def _type_name(hint) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _bounds(meta) -> str:
    parts = [f"{op} {meta[key]}" for key, op in _BOUNDS if key in meta]
    choices = meta.get("choices")
    if choices is not None:
        parts.append("one of " + ", ".join(choices() if callable(choices) else choices))
    if "length" in meta:
        parts.append(f"{meta['length']} items")
    if "pattern" in meta:
        parts.append(meta["pattern"][1])
    return "; ".join(parts)


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
        return dataclasses.asdict(value) if dataclasses.is_dataclass(value) else value
    return None


def schema_rows(cls: type, prefix: str = "") -> list[dict]:
    """One row per key of `cls` (nested sections flattened to dotted keys)."""
    rows = [
        {
            "key": key,
            "type": _type_name(hint),
            "default": _default(f),
            "bounds": _bounds(f.metadata),
            "help": f.metadata.get("help", ""),
        }
        for key, f, hint in walk_fields(cls, prefix)
    ]
    for f in dataclasses.fields(cls):  # a mapping of registered names to their settings: each one's keys
        if "entries" in f.metadata:
            kind = f.metadata["entries"]
            help = f"{f.metadata.get('help', '')} (a mapping of {kind} names to their settings, listed below)"
            rows.append({"key": f"{prefix}{f.name}", "type": "mapping", "default": {}, "bounds": "", "help": help})
            for name, schema in sorted(schemas(f.metadata["entries"]).items()):
                rows += schema_rows(schema, f"{prefix}{f.name}.{name}.")
    for f in dataclasses.fields(cls):  # a section whose schema its own key picks: listed by that name
        if "choose" in f.metadata:
            by, kind = f.metadata["choose"]
            rows.append(
                {
                    "key": f"{prefix}{f.name}",
                    "type": "section",
                    "default": getattr(_default(f), by, None)
                    if not isinstance(_default(f), dict)
                    else _default(f).get(by),
                    "bounds": "",
                    "help": f"{f.metadata.get('help', '')} (its keys: `structseq config {kind.upper()}` for "
                    f"one of {', '.join(sorted(schemas(kind)))})",
                }
            )
    return rows


def find_schema(name: str) -> tuple[str, type]:
    """The schema called `name`: a shared section (data, optim, train, decode), a model arch, a head or a task
    type; an unknown name lists every name."""
    hints = typing.get_type_hints(Config)
    shared = {
        f.name: section_schema(f, hints[f.name]) for f in dataclasses.fields(Config) if "choose" not in f.metadata
    }
    if name in shared:
        return name, shared[name]
    for kind in KINDS:
        table = schemas(kind)
        if name in table:
            return {"model": "model", "head": "model.head", "task": "task"}[kind], table[name]
    every = [*shared, *(n for kind in KINDS for n in schemas(kind))]
    raise ConfigError(f"no config schema named '{name}'; choices: {', '.join(every)}")


def list_schemas() -> dict[str, list[str]]:
    hints = typing.get_type_hints(Config)
    return {
        "sections": [
            f.name
            for f in dataclasses.fields(Config)
            if "choose" not in f.metadata and dataclasses.is_dataclass(hints[f.name])
        ],
        **{kind: sorted(schemas(kind)) for kind in KINDS},
    }


def config(
    name: Optional[str] = typer.Argument(
        None, help="a model arch, head type, task type or section (data, optim, train, decode); none: list the names"
    ),
    as_json: bool = typer.Option(False, "--json", help="print JSON instead of a table"),
):
    """List every key of a config schema with its type, default, bounds and help."""
    if name is None:
        names = list_schemas()
        if as_json:
            print(json.dumps(names, indent=1))
            return
        for kind, items in names.items():
            console.print(f"[bold]{kind}[/]: {', '.join(items)}")
        return
    section, cls = find_schema(name)
    rows = schema_rows(cls, section + ".")
    if as_json:
        print(json.dumps(rows, indent=1, default=str))
        return
    table = Table(title=f"{name} ({section})")
    for column in ("key", "type", "default", "bounds", "help"):
        table.add_column(column, overflow="fold", no_wrap=column == "key")  # the help wraps to the width
    for row in rows:
        table.add_row(
            *(
                escape(str(v))
                for v in (row["key"], row["type"], json.dumps(row["default"], default=str), row["bounds"], row["help"])
            )
        )
    console.print(table)
