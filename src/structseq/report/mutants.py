"""Mutation scores of a change (`make mutants-changed BASE=REV`, scripts/mutants_changed.py): per module, the
mutants mutmut made of the changed functions, how many the suite killed, and the survivors still to look at.
Modules of which nothing is decided yet are counted in one line under the table, not listed.

    structseq report mutants results/mutants/changed-d15a89c.json
"""

from __future__ import annotations

import argparse

import typer

from .kinds import FORMAT
from .records import read_json

OUTCOMES = ("killed", "survived", "no_tests", "not_run", "equivalent")


def command(
    record: str = typer.Argument(..., help="a results/mutants/changed-*.json record"), format: str = FORMAT
) -> argparse.Namespace:
    """The mutation score of a change per module (scripts/mutants_changed.py, mutmut): killed, survived,
    unreached, not run yet and equivalent mutants.

    Example: structseq report mutants results/mutants/changed-da0ad07.json"""
    return argparse.Namespace(**locals())


def render(a: argparse.Namespace) -> str:
    rec = read_json(a.record)
    modules = rec["modules"]
    waiting = sorted(n for n, m in modules.items() if m["score"] is None)  # nothing decided: equivalents only
    out = [
        "| module | functions | mutants | killed | survived | no test reaches | not run yet | equivalent | score |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    totals = dict.fromkeys(OUTCOMES, 0)
    for name in sorted(set(modules) - set(waiting)):
        m = modules[name]
        for k in totals:
            totals[k] += m[k]
        n = sum(m[k] for k in totals)
        score = "-" if m["score"] is None else f"{m['score']:.1%}"
        out.append(
            f"| `{name}` | {m['functions']} | {n} | {m['killed']} | {m['survived']} | {m['no_tests']} | "
            f"{m['not_run']} | {m['equivalent']} | {score} |"
        )
    decided = totals["killed"] + totals["survived"] + totals["no_tests"]
    overall = f"{totals['killed'] / decided:.1%}" if decided else "-"
    state = "finished" if rec["finished"] else "stopped by its budget (a rerun goes on)"
    out.append(
        f"\n{rec['tool']}, functions changed from `{rec['base']}` to `{rec['head']}`, {len(rec['tests'])} test files, "
        f"{rec['minutes']} min, {state}; overall {overall} of {decided:,} decided mutants. Score = killed / "
        "(killed + survived + no test reaches); timeouts count as killed, equivalent mutants "
        "(scripts/mutants_equivalent.yaml, each with why) are left out."
    )
    if waiting:
        functions = sum(modules[n]["functions"] for n in waiting)
        made = sum(modules[n]["not_run"] for n in waiting)
        out.append(
            f"Not run yet: {len(waiting)} more changed modules ({functions:,} functions, {made:,} mutants made), "
            "none of whose mutants is decided."
        )
    return "\n".join(out)
