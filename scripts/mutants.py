"""Mutation testing as a habit: does the test suite notice realistic bugs? (`make mutants`)

    python scripts/mutants.py                     # every mutant of scripts/mutants.yaml; score in results/mutants.json
    python scripts/mutants.py --only resume-no-python-rng --out /tmp/m.json
    python scripts/mutants.py --module significance search --out /tmp/m.json   # the mutants of these files
    python scripts/mutants.py --list                  # the table, with each mutant's state in the code of today

Each mutant of the table (scripts/mutants.yaml) is a hand-written bug: regex replacements in one source file. The
repository's files (tracked and untracked, not ignored) are copied once into a temporary folder; for each mutant
its file is changed there, its tests run there (`pytest -x`, with that copy's src first on PYTHONPATH, so the
working tree is never touched), and the file restored. A mutant is `killed` when its tests fail, `survived` when
they pass, `timeout` (counted as killed) when they run past --timeout, `stale` when a pattern no longer matches
the code (update the table), `error` when pytest could not run, `pending` when the table says its tests are yet
to come (run them anyway with --all). Before the mutants, the tests of every mutant run once on the unchanged
copy: a mutant whose tests already fail there is `error` (its score would mean nothing). Test files the copy lacks
are left out (listed as `missing_tests`: measuring an older commit with today's table); none left is `error`.

The score is killed / (killed + survived): JSON in --out, and one line on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = Path(__file__).with_name("mutants.yaml")
KEYS = {"id", "file", "edits", "tests", "bug", "pending", "issue"}


def load_table(path: Path) -> list[dict]:
    """The mutants of a table; a malformed entry is an error naming the file and the mutant."""
    from structseq.errors import ConfigError
    from structseq.textio import read_text
    from structseq.yamlio import load_yaml

    table = load_yaml(read_text(path), path)
    if not isinstance(table, list):
        raise ConfigError(f"{path}: expected a list of mutants")
    seen = set()
    for i, m in enumerate(table, 1):
        where = f"{path}: mutant {i} ({m.get('id', 'no id') if isinstance(m, dict) else m!r})"
        if not isinstance(m, dict) or not {"id", "file", "edits", "tests"} <= set(m) or set(m) - KEYS:
            raise ConfigError(f"{where}: expected keys id, file, edits, tests (and bug, pending, issue)")
        if m["id"] in seen:
            raise ConfigError(f"{where}: id given twice")
        seen.add(m["id"])
        if not (
            isinstance(m["edits"], list)
            and m["edits"]
            and all(isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) for x in e) for e in m["edits"])
        ):
            raise ConfigError(f"{where}: edits must be a list of [pattern, replacement] pairs")
        if not isinstance(m["tests"], list) or not m["tests"]:
            raise ConfigError(f"{where}: tests must be a non-empty list of test files or ids")
    return table


def mutate(text: str, edits: list[list[str]]) -> str | None:
    """`text` with every edit applied once (None when a pattern does not match: the mutant is stale)."""
    for pattern, replacement in edits:
        text, n = re.subn(pattern, replacement, text, count=1, flags=re.MULTILINE)
        if n == 0:
            return None
    return text


def unmatched(text: str, edits: list[list[str]]) -> str:
    """The first pattern of `edits` that does not match `text` (after the edits before it), as a stale mutant's
    report names it."""
    for pattern, replacement in edits:
        text, n = re.subn(pattern, replacement, text, count=1, flags=re.MULTILINE)
        if n == 0:
            return pattern
    return ""


def copy_repository(root: Path, dest: Path) -> None:
    """The files of `root` a checkout has (git: tracked and untracked, not ignored; else every file outside
    .git, .venv and caches) copied into `dest`."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True)
    if listed.returncode == 0:
        files = [Path(f) for f in listed.stdout.decode().split("\0") if f]
    else:
        skip = {".git", ".venv", "__pycache__", ".pytest_cache", "runs"}
        files = [
            p.relative_to(root) for p in root.rglob("*") if p.is_file() and not skip & set(p.relative_to(root).parts)
        ]
    for f in files:
        if (root / f).is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / f, dest / f)


def run_tests(copy: Path, tests: list[str], timeout: float) -> tuple[str, float, str]:
    """(passed | failed | timeout | error, seconds, last output lines) of pytest on `tests` inside `copy`."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(copy / "src"), str(copy)]),  # the copy's tests import as tests.*
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *tests]
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - start, ""
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-3:])
    state = {0: "passed", 1: "failed"}.get(done.returncode, "error")
    return state, time.perf_counter() - start, tail


def score(results: list[dict]) -> dict:
    counts = {
        s: sum(r["status"] == s for r in results)
        for s in ("killed", "timeout", "survived", "stale", "pending", "error")
    }
    killed = counts["killed"] + counts["timeout"]
    run = killed + counts["survived"]
    return {
        **counts,
        "score": round(killed / run, 4) if run else None,
        "summary": f"mutants: {killed} of {run} killed (score {killed / run if run else float('nan'):.2f}); "
        f"{counts['stale']} stale, {counts['pending']} pending, {counts['error']} error",
    }


def evaluate(table: list[dict], root: Path, *, run_all: bool = False, timeout: float = 900.0, echo=print) -> list[dict]:
    """The status of each mutant of `table`, tested in a temporary copy of `root`."""
    results = []
    with tempfile.TemporaryDirectory(prefix="structseq-mutants-") as tmp:
        copy = Path(tmp)
        copy_repository(root, copy)
        baseline: dict[tuple, str] = {}
        for m in table:
            r = {"id": m["id"], "file": m["file"], "tests": m["tests"], "bug": m.get("bug", "")}
            results.append(r)
            source = copy / m["file"]
            original = source.read_text(encoding="utf-8") if source.is_file() else None
            mutated = None if original is None else mutate(original, m["edits"])
            if mutated is None:
                r["status"] = "stale"
                r["unmatched"] = unmatched(original, m["edits"]) if original is not None else "(no such file)"
            elif m.get("pending") and not run_all:
                r["status"], r["pending"] = "pending", m["pending"]
            else:
                tests = [t for t in m["tests"] if (copy / t.split("::")[0]).is_file()]
                if len(tests) < len(m["tests"]):  # e.g. measuring an older commit, before those tests existed
                    r["missing_tests"] = [t for t in m["tests"] if t not in tests]
                key = tuple(tests)
                if key and key not in baseline:
                    baseline[key], _, tail = run_tests(copy, tests, timeout)
                    if baseline[key] != "passed":
                        r["baseline"] = tail
                if not key or baseline[key] != "passed":
                    r["status"] = "error"  # no test to run, or its tests fail without the mutant
                else:
                    source.write_text(mutated, encoding="utf-8")
                    try:
                        state, seconds, tail = run_tests(copy, tests, timeout)
                    finally:
                        source.write_text(original, encoding="utf-8")
                    r["status"] = {"failed": "killed", "passed": "survived"}.get(state, state)
                    r["seconds"] = round(seconds, 1)
                    if state == "error":
                        r["output"] = tail
            extra = f"  ({r['seconds']}s)" if "seconds" in r else ""
            if "unmatched" in r:
                extra = f"  {m['file']}: pattern not found: {r['unmatched'][:120]}"
            echo(f"{r['status']:>8}  {m['id']}{extra}")
    return results


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--table", type=Path, default=TABLE, help="the mutants (default: %(default)s)")
    p.add_argument("--root", type=Path, default=ROOT, help="the repository to copy (default: this one)")
    p.add_argument("--out", type=Path, default=ROOT / "results" / "mutants.json", help="the JSON report")
    p.add_argument("--only", nargs="+", metavar="ID", help="only these mutants")
    p.add_argument(
        "--module", nargs="+", metavar="TEXT", help="only the mutants of source files whose path contains TEXT"
    )
    p.add_argument("--all", action="store_true", help="also run the pending mutants")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per test run (default 900)")
    p.add_argument("--list", action="store_true", help="list the mutants and whether each still applies")
    p.add_argument(
        "--merge",
        action="store_true",
        help="update the mutants run now in an existing --out report (keep the others' last results) and rescore",
    )
    a = p.parse_args(argv)
    table = load_table(a.table)
    if a.only:
        from structseq.errors import ConfigError

        unknown = sorted(set(a.only) - {m["id"] for m in table})
        if unknown:
            raise ConfigError(f"--only: no mutant {', '.join(unknown)} in {a.table}")
        table = [m for m in table if m["id"] in a.only]
    if a.module:
        table = [m for m in table if any(t in m["file"] for t in a.module)]
        if not table:
            from structseq.errors import ConfigError

            raise ConfigError(f"--module: no mutant of a file matching {', '.join(a.module)} in {a.table}")
    if a.list:
        for m in table:
            source = a.root / m["file"]
            ok = source.is_file() and mutate(source.read_text(encoding="utf-8"), m["edits"]) is not None
            print(
                f"{m['id']:40} {'applies' if ok else 'STALE':8} {'pending' if m.get('pending') else '':8} {m['file']}"
            )
        return 0
    results = evaluate(table, a.root, run_all=a.all, timeout=a.timeout)
    if a.merge and a.out.is_file():
        fresh = {r["id"]: r for r in results}
        old = json.loads(a.out.read_text(encoding="utf-8"))["mutants"]
        results = [fresh.pop(r["id"], r) for r in old] + list(fresh.values())
    total = score(results)
    git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=a.root, capture_output=True, text=True)
    report = {
        "table": str(a.table.relative_to(a.root) if a.table.is_relative_to(a.root) else a.table),
        "git": git.stdout.strip(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        **total,
        "mutants": results,
    }
    from structseq.outputs import atomic_write

    atomic_write(a.out, json.dumps(report, indent=1) + "\n")
    print(total["summary"])
    return 0


if __name__ == "__main__":
    from structseq.errors import run_cli

    sys.exit(run_cli(main))
