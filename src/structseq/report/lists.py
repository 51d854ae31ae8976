"""The lists of README.md generated from the registries, so that they cannot drift from the code: every task,
model family, dataset and metric a plain install knows. Only entries defined under `structseq.` are listed:
plugins from $STRUCTSEQ_PLUGINS (and a test's throw-away registration) load as usual and are left out, without
touching the environment of the process (the tables render in the caller's process).

    structseq report lists tasks | archs | datasets | metrics | extensions

`structseq report tables --check` (run by the suite) reruns it for each generated block that names it.
"""

from __future__ import annotations

import argparse
import functools
import inspect
from typing import Literal

import typer

from .kinds import FORMAT


def _first_line(text: str | None) -> str:
    return " ".join((text or "").strip().split("\n\n")[0].split())


def _itself(entry):
    return entry


def _build(entry):
    """A model family's or a head's builder: the function its module registers."""
    return entry.build


def builtin(registry, defined_by=_itself) -> dict:
    """The entries of `registry` whose code (`defined_by(entry)`: the class or function that the entry registers,
    a `functools.partial`'s function) is a module of this package, in the order they were registered."""
    out = {}
    for name, entry in registry.items():
        code = defined_by(entry)
        while isinstance(code, functools.partial):
            code = code.func
        if code.__module__.startswith("structseq."):
            out[name] = entry
    return out


def tasks() -> list[str]:
    from structseq.registry import ARCHS, TASKS

    rows = ["| task | what it is | model families |", "|---|---|---|"]
    for name, cls in sorted(builtin(TASKS).items()):
        archs = ", ".join(f"`{a}`" for a, entry in builtin(ARCHS, _build).items() if name in entry.tasks)
        doc = _first_line(inspect.getdoc(inspect.getmodule(cls)))
        rows.append(f"| `{name}` | {doc} | {archs} |")
    return rows


def archs() -> list[str]:
    from structseq.registry import ARCHS

    rows = ["| model family (`model.arch`) | tasks | module |", "|---|---|---|"]
    for name, arch in sorted(builtin(ARCHS, _build).items()):
        rows.append(f"| `{name}` | {', '.join(arch.tasks)} | `{arch.build.__module__}` |")
    return rows


def datasets() -> list[str]:
    from structseq.data.dataset import DATASETS

    rows = ["| dataset | splits | source | what it is |", "|---|---|---|---|"]
    for name, ds in sorted(builtin(DATASETS, lambda ds: ds.loader).items()):
        rows.append(f"| `{name}` | {', '.join(ds.splits)} | {ds.source} | {ds.description} |")
    return rows


def metrics() -> list[str]:
    from structseq.registry import METRICS

    rows = ["| metric | scale | higher is better | what it measures |", "|---|---|---|---|"]
    for name, m in sorted(builtin(METRICS, lambda m: m.compute).items()):
        rows.append(f"| `{name}` | {m.scale} | {'yes' if m.higher_is_better else 'no'} | {_first_line(m.doc)} |")
    return rows


def extensions() -> list[str]:
    from structseq.registry import HEADS, LEARNERS, OPTIMIZERS, PROCESSORS, SCHEDULES, STRATEGIES

    rows = ["| extension point | config key | registered |", "|---|---|---|"]
    for registry, defined_by in (
        (HEADS, _build),
        (LEARNERS, _itself),
        (STRATEGIES, _itself),
        (PROCESSORS, _build),
        (OPTIMIZERS, _itself),
        (SCHEDULES, _itself),
    ):
        found = builtin(registry, defined_by)
        names = ", ".join(f"`{n}`" + (_own_keys(found[n]) if registry is STRATEGIES else "") for n in sorted(found))
        rows.append(f"| {registry.kind} | `{registry.key}` | {names} |")
    return rows


def _own_keys(strategy) -> str:
    """A strategy's own decode keys (`register_strategy(options=)`), as ` (decode.KEY, ...)`; '' for none."""
    import dataclasses

    if strategy.options is None:
        return ""
    return " (" + ", ".join(f"decode.{f.name}" for f in dataclasses.fields(strategy.options)) + ")"


def _default(f):
    import dataclasses

    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def processors() -> list[str]:
    import dataclasses
    import json

    from structseq.registry import GRAMMARS, PROCESSORS

    rows = ["| processor (`decode.processors.NAME`) | settings (default) | rank | what it does |", "|---|---|---:|---|"]
    for name, p in sorted(builtin(PROCESSORS, _build).items(), key=lambda e: e[1].rank):
        keys = ", ".join(f"`{f.name}` ({json.dumps(_default(f))})" for f in dataclasses.fields(p.options))
        rows.append(f"| `{name}` | {keys} | {p.rank} | {_first_line(p.doc)} |")
    grammars = ", ".join(f"`{n}`" for n in sorted(GRAMMARS.names()))
    rows.append(
        f"| `decode.grammar: NAME` | {grammars} | 50 | only tokens that keep the output a sentence of the grammar |"
    )
    return rows


LISTS = {
    "tasks": tasks,
    "processors": processors,
    "archs": archs,
    "datasets": datasets,
    "metrics": metrics,
    "extensions": extensions,
}


#: the lists, as typer reads a choice
Which = Literal[tuple(sorted(LISTS))]


def command(
    name: Which = typer.Argument(..., metavar="LIST", help=", ".join(sorted(LISTS))),
    format: str = FORMAT,
) -> argparse.Namespace:
    """One of the README's lists, read from the registries: every task, model family, dataset, metric or
    extension point a plain install knows (plugins left out).

    Example: structseq report lists metrics"""
    return argparse.Namespace(**locals())


def render(a: argparse.Namespace) -> str:
    return "\n".join(LISTS[a.name]())
