"""The lists of README.md generated from the registries, so that they cannot drift from the code: every task,
model family, dataset and metric a plain install knows (plugins from $STRUCTSEQ_PLUGINS are left out).

    structseq report lists tasks | archs | datasets | metrics | extensions

`structseq report tables --check` (run by the suite) reruns it for each generated block that names it.
"""

from __future__ import annotations

import argparse
import inspect
import os


def _first_line(text: str | None) -> str:
    return " ".join((text or "").strip().split("\n\n")[0].split())


def tasks() -> list[str]:
    from structseq.registry import ARCHS, TASKS

    rows = ["| task | what it is | model families |", "|---|---|---|"]
    for name, cls in sorted(TASKS.items()):
        archs = ", ".join(f"`{a}`" for a, entry in ARCHS.items() if name in entry.tasks)
        doc = _first_line(inspect.getdoc(inspect.getmodule(cls)))
        rows.append(f"| `{name}` | {doc} | {archs} |")
    return rows


def archs() -> list[str]:
    from structseq.registry import ARCHS

    rows = ["| model family (`model.arch`) | tasks | module |", "|---|---|---|"]
    for name, arch in sorted(ARCHS.items()):
        rows.append(f"| `{name}` | {', '.join(arch.tasks)} | `{arch.build.__module__}` |")
    return rows


def datasets() -> list[str]:
    from structseq.data.registry import datasets as table

    rows = ["| dataset | splits | source | what it is |", "|---|---|---|---|"]
    for name, ds in sorted(table().items()):
        rows.append(f"| `{name}` | {', '.join(ds.splits)} | {ds.source} | {ds.description} |")
    return rows


def metrics() -> list[str]:
    from structseq.registry import METRICS

    rows = ["| metric | scale | higher is better | what it measures |", "|---|---|---|---|"]
    for name, m in sorted(METRICS.items()):
        rows.append(f"| `{name}` | {m.scale} | {'yes' if m.higher_is_better else 'no'} | {_first_line(m.doc)} |")
    return rows


def extensions() -> list[str]:
    from structseq.registry import HEADS, LEARNERS, OPTIMIZERS, SCHEDULES, STRATEGIES

    rows = ["| extension point | config key | registered |", "|---|---|---|"]
    for registry in (HEADS, LEARNERS, STRATEGIES, OPTIMIZERS, SCHEDULES):
        rows.append(f"| {registry.kind} | `{registry.key}` | {', '.join(f'`{n}`' for n in sorted(registry))} |")
    return rows


LISTS = {"tasks": tasks, "archs": archs, "datasets": datasets, "metrics": metrics, "extensions": extensions}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("list", choices=sorted(LISTS))


def render(a: argparse.Namespace) -> str:
    os.environ.pop("STRUCTSEQ_PLUGINS", None)  # the built-in names only (when the registries are not loaded yet)
    return "\n".join(LISTS[a.list]())
