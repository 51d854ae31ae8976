"""How a command walks the package: the modules it enters and how often it comes back to each package (issue 56,
docs/architecture.md).

    python scripts/analysis/module_walk.py train CONFIG -o RUN_DIR   # the walk of a training run's config
    python scripts/analysis/module_walk.py predict RUN_DIR < LINES   # the walk of predict's runs

It runs `structseq ARGS` in this process under `sys.setprofile` and keeps every call from a function of one
module of structseq into a function of another module (its package: `structseq.train`, `structseq.run`, ...; a
top-level module counts as its own package); module code run by an import is left out, and `train` is followed until its
first update (`Trainer.step`): the setup. Printed per package: `modules` (how many of its modules were entered),
`entries` (how many distinct call sites, caller function -> callee function, enter one of its modules from another
module) and `returns` (how many
times the walk, read as the sequence of those call sites in first-seen order, comes back to the package after
leaving it).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict


def package(module: str) -> str:
    """`structseq.train.loop` -> `structseq.train`; `structseq.api` -> itself."""
    return ".".join(module.split(".")[:2])


def summarise(edges: list[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """Per package entered: `modules`, `entries`, `returns` (the module docstring) of `edges`, the distinct
    (caller module, callee module) call sites in first-seen order (one per site: a pair may repeat)."""
    out: dict[str, dict] = defaultdict(lambda: {"modules": set(), "entries": 0, "returns": 0})
    last = None
    for _, callee in edges:
        p = package(callee)
        out[p]["modules"].add(callee)
        out[p]["entries"] += 1
        if last is not None and last != p and out[p]["entries"] > 1:
            out[p]["returns"] += 1
        last = p
    return {p: {**v, "modules": len(v["modules"])} for p, v in sorted(out.items())}


class Walk:
    """The call sites crossing a package boundary, recorded until a function named `stop` is called."""

    def __init__(self, stop: str | None = None):
        self.stop, self.stopped, self.seen, self.edges = stop, False, set(), []

    def __call__(self, frame, event, arg) -> None:
        if event != "call" or self.stopped:
            return
        callee = frame.f_globals.get("__name__", "")
        if not callee.startswith("structseq") or frame.f_code.co_name == "<module>":
            return
        if getattr(frame.f_code, "co_qualname", frame.f_code.co_name) == self.stop:
            self.stopped = True
            return
        caller = frame.f_back
        while caller is not None and not caller.f_globals.get("__name__", "").startswith("structseq"):
            caller = caller.f_back
        if caller is None or caller.f_code.co_name == "<module>":
            return
        source = caller.f_globals["__name__"]
        if source == callee:
            return
        site = (caller.f_code, frame.f_code)
        if site not in self.seen:
            self.seen.add(site)
            self.edges.append((source, callee))


def main(argv: list[str]) -> int:
    from structseq.cli import main as structseq

    walk = Walk(stop="Trainer.step" if argv[0] == "train" else None)
    command = ["structseq", *argv]
    sys.argv = command
    sys.setprofile(walk)
    try:
        structseq()
    except SystemExit:
        pass
    finally:
        sys.setprofile(None)
    packages = summarise(walk.edges)
    total = {k: sum(p[k] for p in packages.values()) for k in ("modules", "entries", "returns")}
    print(json.dumps({"command": command[1:], "total": total, "packages": packages}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
