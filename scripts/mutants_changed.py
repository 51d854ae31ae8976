"""Mutation testing of a change with a library, mutmut 3 (`make mutants-changed BASE=REV [BUDGET=MINUTES]`).

    python scripts/mutants_changed.py --base d15a89c                  # the functions changed since d15a89c
    python scripts/mutants_changed.py --base main~3 --budget-minutes 20 --module src/structseq/outputs.py
    python scripts/mutants_changed.py --base d15a89c --module src/structseq/compose/*.py --jobs 1
    python scripts/mutants_changed.py --base d15a89c --module src/structseq/outputs.py --retry  # after new tests
    python scripts/mutants_changed.py --base d15a89c --list           # what would be mutated, and the tests chosen

Where `scripts/mutants.py` replays hand-written bugs (it cannot find what nobody thought of), this runs mutmut's
own operators (operators, constants, comparisons, arguments, return values, ...) on every function or method whose
lines the change touches, and runs, for each mutant, only the tests that reach that function (mutmut records which
tests call which function in one instrumented run first). The work happens in a copy of the checkout under
`.mutants-work/BASE/` (ignored by git), so the working tree is never touched.

One copy serves every call for a base, whatever its `--module`: mutmut mutates all the changed files there and
sees one unchanging configuration, so it keeps its verdicts and its test-to-function record from call to call.
A call names to mutmut only the functions that still have an undecided mutant (mutmut reruns whatever it is
named), so `--budget-minutes` (default 55) can stop it and the next call goes on; `--retry` also reruns the
survivors, after tests were added for them. Several modules in one call share mutmut's start (its instrumented
stats run, the clean run of the tests, the forced failure), which costs minutes on this suite.

Tests are chosen statically: every test file (tests/ and its folders) that imports a changed module, or a module
that imports one directly (the CLI's commands included), plus `--tests`; the copy's suite is the union of the
files chosen so far, the others ignored through PYTEST_ADDOPTS, so a call that adds test files costs only the
stats of the new tests. Tests run in the test process through `structseq.cli.main`, so the mutated code is what
they reach and mutmut's stats see it; `PYTHONPATH` points at the mutated copy, so a test's subprocess reaches it
too, but mutmut does not count a function reached only from a subprocess as reached ("no tests").

Result: `results/mutants/changed-<BASE>.json` (or `--out`), one entry per changed module: killed, survived, no
tests, timeouts, not yet run, and score = killed / (killed + survived + no tests), equivalent mutants (listed with
why in `scripts/mutants_equivalent.yaml`) left out of both; a module this copy has decided nothing of keeps its
entry of the earlier record. `structseq report mutants FILE` renders it (docs/reliability.md). Exit 1 when a
module decided so far scores under `--goal` (default 0.9).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from importlib import metadata
from pathlib import Path

from structseq.paths import data_root
from structseq.testing.process import run_with_budget

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutants-work"
EQUIVALENT = Path(__file__).with_name("mutants_equivalent.yaml")
SITE = Path(__file__).with_name("mutants_site")  # its sitecustomize.py: see there
#: tests that read the package's source text (owners of a wording, import layers, file sizes): a mutated file holds
#: every mutant of its functions beside the original, so they fail on the copy whatever the mutant (mutmut's stats
#: run needs every chosen test to pass); not chosen, `--tests` can still name one
SOURCE_TEXT_TESTS = {"test_one_owner.py", "test_architecture.py", "test_generic_code.py", "test_file_size.py"}
SEPARATOR = "\u01c1"  # mutmut's class separator in a method's key: xǁClassǁmethod
# mutmut's exit codes (mutmut/stats.py status_by_exit_code), grouped as the score counts them
KILLED = {1, 3, -24, 24, 36, 152, 255, 37, -11, -9}  # failed tests, timeouts, crashes: the bug was noticed
SURVIVED = {0}
NO_TESTS = {5, 33}


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def changed_lines(base: str, path: str) -> set[int] | None:
    """The line numbers of `path` (today's text) that differ from `base`; None for a file new since `base`."""
    if subprocess.run(["git", "cat-file", "-e", f"{base}:{path}"], cwd=ROOT, capture_output=True).returncode:
        return None
    lines: set[int] = set()
    for m in re.finditer(r"^@@ -\S+ \+(\d+)(?:,(\d+))? @@", git("diff", "-U0", base, "--", path), re.M):
        start, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
        lines.update(range(start, start + count) if count else {start})
    return lines


def function_keys(source: str, touched: set[int] | None) -> list[str]:
    """mutmut's keys (`x_name`, `xǁClassǁname`) of the module-level functions and methods whose lines (decorators
    included) meet `touched`; every one when `touched` is None. Nested functions belong to their enclosing one."""

    def span(node) -> set[int]:
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        return set(range(first, node.end_lineno + 1))

    keys = []
    for node in ast.parse(source).body:
        funcs = [(node, None)] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        if isinstance(node, ast.ClassDef):
            funcs = [(f, node.name) for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for func, cls in funcs:
            if touched is None or span(func) & touched:
                keys.append(f"x{SEPARATOR}{cls}{SEPARATOR}{func.name}" if cls else f"x_{func.name}")
    return keys


def module_name(path: str) -> str:
    parts = Path(path).with_suffix("").parts[1:]  # src/structseq/a/b.py -> structseq.a.b
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(source: str, module: str, is_package: bool = False) -> set[str]:
    """The structseq modules a file imports (absolute and relative forms), as dotted names; `is_package`: the file
    is the package's `__init__.py`, whose relative imports start from the package itself."""
    found: set[str] = set()
    package = module if is_package else module.rsplit(".", 1)[0] if module else ""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m.startswith("structseq")}


def choose_tests(modules: set[str], extra: list[str]) -> list[str]:
    """Test files importing a changed module, or a package module that imports one directly (not those of
    SOURCE_TEXT_TESTS)."""
    reach = set(modules)
    for path in (ROOT / "src").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if imports_of(path.read_text(encoding="utf-8"), module_name(rel), path.name == "__init__.py") & modules:
            reach.add(module_name(rel))
    chosen = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        if path.name in SOURCE_TEXT_TESTS:
            continue
        if imports_of(path.read_text(encoding="utf-8"), "") & reach:
            chosen.append(path.relative_to(ROOT).as_posix())
    return sorted(set(chosen) | set(extra))


def plan(base: str, only: list[str]) -> dict[str, list[str]]:
    """{file: [mutmut keys]} of the functions changed since `base` (restricted to `only` when given)."""
    files = git("diff", "--name-only", base, "--", "src/structseq").split()
    files = [f for f in files if f.endswith(".py") and (ROOT / f).exists() and (not only or f in only)]
    out = {}
    for f in files:
        keys = function_keys((ROOT / f).read_text(encoding="utf-8"), changed_lines(base, f))
        if keys:
            out[f] = keys
    return out


def load_equivalent() -> dict[str, str]:
    """{mutant name: why it is equivalent} from scripts/mutants_equivalent.yaml."""
    if not EQUIVALENT.exists():
        return {}
    from structseq.textio import read_text
    from structseq.yamlio import load_yaml

    table = load_yaml(read_text(EQUIVALENT), EQUIVALENT) or {}
    if not isinstance(table, dict) or not all(isinstance(v, str) and v.strip() for v in table.values()):
        raise SystemExit(f"error: {EQUIVALENT}: expected a mapping of mutant name to the reason it is equivalent")
    return table


def summarise(metas: dict[str, dict[str, int | None]], wanted: dict[str, list[str]], equivalent: dict) -> dict:
    """Per module: counts of each outcome among the mutants of the wanted functions, and the score."""
    result = {}
    for path, keys in wanted.items():
        module = module_name(path)
        codes = metas.get(path, {})
        counts = defaultdict(int)
        survivors = []
        for key, code in sorted(codes.items()):
            name = key.rpartition(".")[2]  # mutmut's .meta files name mutants module.x_function__mutmut_N
            if not any(name.startswith(f"{k}__mutmut_") for k in keys):
                continue
            full = f"{module}.{name}"
            if full in equivalent:
                counts["equivalent"] += 1
            elif code in KILLED:
                counts["killed"] += 1
            elif code in SURVIVED:
                counts["survived"] += 1
                survivors.append(full)
            elif code in NO_TESTS:
                counts["no_tests"] += 1
                survivors.append(full)
            else:
                counts["not_run"] += 1
        decided = counts["killed"] + counts["survived"] + counts["no_tests"]
        result[module] = {
            **{k: counts[k] for k in ("killed", "survived", "no_tests", "not_run", "equivalent")},
            "functions": len(keys),
            "score": round(counts["killed"] / decided, 4) if decided else None,
            "survivors": survivors,
        }
    return result


def read_metas(copy: Path) -> dict[str, dict[str, int | None]]:
    """{source path: {mutant name: exit code}} from mutmut's .meta files in the copy."""
    metas = {}
    for meta in (copy / "mutants" / "src").rglob("*.py.meta"):
        rel = meta.relative_to(copy / "mutants").as_posix()[: -len(".meta")]
        metas[rel] = json.loads(meta.read_text(encoding="utf-8")).get("exit_code_by_key", {})
    return metas


def read_state(work: Path, base: str) -> dict:
    """What the copy in `work` (one per base) holds: the files mutmut mutates there and the test files chosen
    so far."""
    state = work / "state.json"
    if state.exists():
        return json.loads(state.read_text(encoding="utf-8"))
    return {"base": base, "files": [], "tests": []}


def write_state(work: Path, state: dict) -> None:
    work.mkdir(parents=True, exist_ok=True)
    tmp = work / ".state.json.tmp"
    tmp.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, work / "state.json")


def ignored_tests(root: Path, tests: list[str]) -> list[str]:
    """Every test file under `root`/tests that is not among `tests` (pytest's --ignore of them, through
    PYTEST_ADDOPTS, restricts the run to `tests` without changing mutmut's configuration)."""
    keep = set(tests)
    every = (p.relative_to(root).as_posix() for p in sorted((root / "tests").rglob("test_*.py")))
    return [t for t in every if t not in keep]


def prepare_copy(work: Path, files: list[str], new_files: list[str]) -> Path:
    """The checkout's files (tracked and untracked, not ignored) in WORK/repo, with mutmut's configuration.

    Every call gives mutmut the same configuration (all the changed files mutated, test selection `tests`), so
    mutmut keeps its verdicts and its record of which test calls which function from call to call: a call on
    other modules, or with more test files, costs only the stats of the new tests (the test files a call
    chooses are given through PYTEST_ADDOPTS, run_mutmut). A file that joins `files` (`new_files`) is mutated
    afresh, and every test's stats are taken again, as no test reached its trampolines before."""
    copy = work / "repo"
    listed = git("ls-files", "-co", "--exclude-standard", "-z").split("\0")
    records = set(git("ls-files", "-z", "--", "results/mutants").split("\0")) - {""}
    for rel in filter(None, listed):
        src, dst = ROOT / rel, copy / rel
        if rel in records:  # the committed record, which the documents' tables match, not the one runs rewrite
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(git("show", f"HEAD:{rel}"), encoding="utf-8")
        elif src.is_file() and not src.is_symlink():
            if not dst.exists() or dst.read_bytes() != src.read_bytes():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dst)
    kept = set(listed)
    for tree in (copy / "src", copy / "tests", copy / "mutants" / "src", copy / "mutants" / "tests"):
        # a module or test moved or removed since the last call
        for stale in [p for p in tree.rglob("*.py") if p.relative_to(tree.parent).as_posix() not in kept]:
            stale.unlink()
    text = (copy / "pyproject.toml").read_text(encoding="utf-8").split("\n[tool.mutmut]")[0].rstrip()
    # mutmut runs the tests in copy/mutants/, where it puts src/ and tests/: what else they read goes too
    top = sorted({rel.split("/")[0] for rel in listed if rel} - {"src", "tests", "pyproject.toml"})
    config = {
        "source_paths": ["src"],
        "also_copy": top,
        "only_mutate": sorted(files),
        "pytest_add_cli_args_test_selection": ["tests"],
        "pytest_add_cli_args": ["-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly"],
        "process_isolation": "fork",
        "timeout_multiplier": 5.0,
        "timeout_constant": 10.0,
    }
    lines = [f"{k} = {json.dumps(v)}" for k, v in config.items()]
    (copy / "pyproject.toml").write_text(text + "\n\n[tool.mutmut]\n" + "\n".join(lines) + "\n", encoding="utf-8")
    (copy / "mutants" / "src").mkdir(parents=True, exist_ok=True)  # importable before mutmut fills it
    for rel in files:
        # mutmut takes a file newer than its source for mutated: one it copied without mutating (a file new to
        # `files`), or one whose writing a budget cut short (its .meta, written after it, is missing or older)
        mutated, meta = copy / "mutants" / rel, copy / "mutants" / f"{rel}.meta"
        if (
            rel in new_files
            or not meta.exists()
            or (mutated.exists() and meta.stat().st_mtime < mutated.stat().st_mtime)
        ):
            mutated.unlink(missing_ok=True)
            meta.unlink(missing_ok=True)
    if new_files:
        (copy / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    return copy


def to_run(metas: dict[str, dict[str, int | None]], wanted: dict[str, list[str]], retry: bool) -> list[str]:
    """mutmut's names for the mutants this call runs: a glob per wanted function that has a mutant not yet
    decided (or was never mutated), and with `retry` each survivor and mutant no test reached by name.
    mutmut reruns whatever it is named, decided or not: naming only these is what makes a call resume."""
    names = []
    for path, keys in wanted.items():
        module = module_name(path)
        codes = metas.get(path)
        for key in keys:
            prefix = f"{module}.{key}__mutmut_"
            mine = {} if codes is None else {k: c for k, c in codes.items() if k.startswith(prefix)}
            if codes is None or any(c is None for c in mine.values()):
                names.append(f"{prefix}*")
            elif retry:
                names.extend(k for k, c in sorted(mine.items()) if c in SURVIVED | NO_TESTS)
    return names


def run_mutmut(copy: Path, names: list[str], tests: list[str], budget_s: float, jobs: int) -> bool:
    """mutmut on the named mutants with `tests` as the suite until done or out of budget; True when it finished."""
    ignore = " ".join(f"--ignore={t}" for t in ignored_tests(copy, tests))
    env = {
        **os.environ,
        # the mutated copy first; then mutants_site/sitecustomize.py, for the Python processes tests start
        "PYTHONPATH": os.pathsep.join([str(copy / "mutants" / "src"), str(SITE)]),
        "OMP_NUM_THREADS": "1",
        "STRUCTSEQ_DATA": str(data_root().resolve()),
        "PYTEST_ADDOPTS": f"{os.environ.get('PYTEST_ADDOPTS', '')} {ignore}".strip(),
    }
    mutmut = Path(sys.executable).with_name("mutmut")
    cmd = [str(mutmut), "run", "--max-children", str(jobs), *names]
    rc = run_with_budget(cmd, budget_s, grace_s=60, cwd=copy, env=env)
    if rc is None:
        print(f"budget of {budget_s / 60:.0f} min spent: the next call goes on where this one stopped", file=sys.stderr)
    return rc == 0


def merge(old: dict | None, new: dict, unchanged=lambda module, head: True) -> dict:
    """The record `new`, keeping from `old` (an earlier record of the same base) each module this copy has
    decided nothing of (scored in another checkout, or before the copy was made) whose source is the same today
    as at the commit that scored it (`unchanged(module, head)`; an entry's own `head`, else the old record's):
    a module edited since keeps this call's undecided entry, not an old score under the new head. Minutes add up."""
    if not old or old.get("base") != new["base"]:
        return new
    modules = dict(new["modules"])
    for name, entry in old.get("modules", {}).items():
        mine = modules.get(name)
        head = entry.get("head", old.get("head"))
        if (mine is None or mine["score"] is None) and unchanged(name, head):  # nothing decided here
            modules[name] = {**entry, "head": head} if head else entry
    tests = sorted(set(old.get("tests", [])) | set(new["tests"]))
    return {**new, "minutes": round(old.get("minutes", 0) + new["minutes"], 1), "tests": tests, "modules": modules}


def source_unchanged(module: str, head: str | None) -> bool:
    """Whether `module`'s file reads the same today as at commit `head` (False when unknown)."""
    rel = Path("src", *module.split("."))
    for path in (rel.with_suffix(".py"), rel / "__init__.py"):
        if (ROOT / path).exists():
            if not head:
                return False
            then = subprocess.run(["git", "show", f"{head}:{path}"], cwd=ROOT, capture_output=True)
            return then.returncode == 0 and then.stdout == (ROOT / path).read_bytes()
    return True  # a module gone since: its old entry stays as it was recorded


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", required=True, help="the revision the change starts from (e.g. d15a89c, main~5)")
    p.add_argument("--module", nargs="*", default=[], help="only these source files (src/structseq/...)")
    p.add_argument("--tests", nargs="*", default=[], help="test files to add to the static choice")
    p.add_argument("--budget-minutes", type=float, default=55.0, help="stop after this long (resumable)")
    p.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    p.add_argument("--goal", type=float, default=0.9, help="the score each module must reach (exit 1 otherwise)")
    p.add_argument("--out", type=Path, help="the record (default results/mutants/changed-BASE.json)")
    p.add_argument("--retry", action="store_true", help="rerun the survivors too (after adding tests for them)")
    p.add_argument("--work", type=Path, default=WORK, help="where the copies live (default .mutants-work/)")
    p.add_argument("--list", action="store_true", help="print the functions and tests chosen, run nothing")
    args = p.parse_args(argv)
    if args.budget_minutes <= 0 or args.jobs < 1 or not 0 < args.goal <= 1:
        p.error("--budget-minutes must be > 0, --jobs >= 1, --goal in (0, 1]")
    try:
        git("rev-parse", "--verify", f"{args.base}^{{commit}}")
    except subprocess.CalledProcessError:
        p.error(f"--base {args.base!r} is not a revision of this repository")
    everything = plan(args.base, [])
    wanted = {f: keys for f, keys in everything.items() if not args.module or f in args.module}
    if not wanted:
        print(f"no function of src/structseq changed since {args.base}")
        return 0
    tests = choose_tests({module_name(f) for f in wanted}, args.tests)
    if args.list:
        for f, keys in wanted.items():
            print(f"{f}: {len(keys)} functions: {', '.join(keys)}")
        print(f"tests ({len(tests)}): {' '.join(tests)}")
        return 0
    started = time.monotonic()
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", args.base)
    work = args.work / base
    state = read_state(work, args.base)
    files = sorted(f for f in set(state["files"]) | set(everything) if (ROOT / f).is_file())
    suite = sorted(t for t in set(state["tests"]) | set(tests) if (ROOT / t).is_file())  # moved tests drop out
    copy = prepare_copy(work, files, [f for f in files if f not in state["files"]])
    write_state(work, {**state, "files": files, "tests": suite})
    names = to_run(read_metas(copy), wanted, args.retry)
    if names:
        run_mutmut(copy, names, suite, args.budget_minutes * 60, args.jobs)
    metas = read_metas(copy)
    summary = summarise(metas, everything, load_equivalent())
    out = args.out or ROOT / "results" / "mutants" / f"changed-{base}.json"
    record = {
        "base": args.base,
        "head": git("rev-parse", "--short", "HEAD").strip(),
        "tool": f"mutmut {metadata.version('mutmut')}",
        "finished": False,
        "minutes": round((time.monotonic() - started) / 60, 1),
        "tests": suite,
        "modules": summary,
    }
    for entry in summary.values():
        if entry["score"] is not None:
            entry["head"] = record["head"]  # the commit whose source these verdicts are about
    record = merge(json.loads(out.read_text(encoding="utf-8")) if out.exists() else None, record, source_unchanged)
    generated = all(f in metas for f in everything)
    record["finished"] = generated and all(s["not_run"] == 0 for s in record["modules"].values())
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    for m in sorted(module_name(f) for f in wanted):
        s = record["modules"][m]
        score = "-" if s["score"] is None else f"{s['score']:.1%}"
        print(
            f"{m}: {score} ({s['killed']} killed, {s['survived']} survived, {s['no_tests']} no tests, "
            f"{s['not_run']} not run, {s['equivalent']} equivalent)"
        )
    print(f"record: {out}")
    low = [m for m, s in record["modules"].items() if s["score"] is not None and s["score"] < args.goal]
    return 1 if low else 0


if __name__ == "__main__":
    sys.exit(main())
