"""Benchmarks and scripts are clients of the package, not a second codebase (issue 46): none edits `sys.path`,
none imports a test module, none imports another file of benchmarks/ or scripts/, and none reaches into an
object's private members (`x._name`). What tests and benchmarks share (tiny Hugging Face checkpoints, the plain
reference formulations, FLOP counting, the fairseq baseline) lives in `structseq.testing`; one training update
is `Trainer.step()`.

The checks read the text, code in strings included: the worker programs that benchmarks hand to
`python -c` edited `sys.path` too."""

from __future__ import annotations

import re
from pathlib import Path

from tests.fixtures.paths import ROOT

CLIENTS = ("benchmarks", "scripts")
#: the test helpers benchmarks used to import from tests/, and where each went
MOVED = {"hf_tiny": "structseq.testing.hf_tiny", "oracles": "structseq.testing.oracles"}
SYS_PATH = re.compile(r"\bsys\.path\b")
IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\w+)|import[ \t]+(\w+))", re.M)


def test_modules() -> set[str]:
    """The names a `tests/` module or package is imported by: `tests` itself, and each module and folder under it by
    its bare name (when a folder of tests/ is on the path), and the moved ones."""
    tests = ROOT / "tests"
    folders = {p.name for p in tests.rglob("*") if p.is_dir() and p.name != "__pycache__"}
    return {"tests"} | {p.stem for p in tests.rglob("*.py")} | folders | set(MOVED)


test_modules.__test__ = False  # a helper, not a test (its name starts with test_)


def problems(rel: str, text: str, names: set[str]) -> list[str]:
    """`rel:line: what` for each `sys.path` use and each import of a test module in `text`."""
    at = lambda m: f"{rel}:{text.count(chr(10), 0, m.start()) + 1}"
    found = [f"{at(m)}: sys.path" for m in SYS_PATH.finditer(text)]
    for m in IMPORT.finditer(text):
        name = m.group(1) or m.group(2)
        if name in names:
            found.append(f"{at(m)}: imports {name} from tests/" + (f" (now {MOVED[name]})" if name in MOVED else ""))
    return found


def test_benchmarks_and_scripts_neither_edit_sys_path_nor_import_tests():
    names = test_modules()
    files = client_files()
    assert len(files) > 20  # the walk finds them (a moved folder cannot make the check vacuous)
    found = [
        line
        for path in files
        for line in problems(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"), names)
    ]
    assert not found, "import the package (structseq.testing for test helpers) instead:\n" + "\n".join(found)


def test_the_check_would_catch_the_old_lines():
    """The lines issue 46 left in benchmarks/ and scripts/ (as of 69534ea), each caught, with its line."""
    old = {
        "bench_dangle.py": 'import sys\nsys.path.insert(0, str(HERE.parent / "tests"))\n'
        "def f():\n    from oracles import dangle_reference as ref\n",
        "bench_lstm.py": "    from oracles.lstm_reference import LSTMSeq2SeqReference\n",
        "check_hf_conventions.py": "from hf_tiny import EXAMPLES as SENTENCES  # noqa: E402\n",
        "bench_compile.py": 'WORKER = r"""\nimport json, sys\nsys.path.insert(0, sys.argv[1])\nfrom bench_train import cfg\n"""\n',
        "mutants.py": 'if __name__ == "__main__":\n    sys.path.insert(0, str(ROOT / "src"))\n',
        "uses_a_fixture.py": "import conftest\nfrom cli_run import run_main\n",
    }
    found = {rel: problems(rel, text, test_modules()) for rel, text in old.items()}
    assert found == {
        "bench_dangle.py": [
            "bench_dangle.py:2: sys.path",
            "bench_dangle.py:4: imports oracles from tests/ (now structseq.testing.oracles)",
        ],
        "bench_lstm.py": ["bench_lstm.py:1: imports oracles from tests/ (now structseq.testing.oracles)"],
        "check_hf_conventions.py": [
            "check_hf_conventions.py:1: imports hf_tiny from tests/ (now structseq.testing.hf_tiny)"
        ],
        "bench_compile.py": ["bench_compile.py:3: sys.path"],
        "mutants.py": ["mutants.py:2: sys.path"],
        "uses_a_fixture.py": [
            "uses_a_fixture.py:1: imports conftest from tests/",
            "uses_a_fixture.py:2: imports cli_run from tests/",
        ],
    }


#: the benchmarks others imported before issue 46, and where what they shared went
SHARED_BEFORE = {"bench_train": "structseq.testing.bench", "fairseq_baseline": "structseq.testing.fairseq_baseline"}
#: private members a client may still use: (file, name) -> why
PRIVATE_ALLOWED = {
    ("benchmarks/bench_commits.py", "_update"): "its worker also runs in an old checkout (--old), whose Trainer "
    "has no step() (as of d15a89c): it takes step when there is one, else _update",
    ("benchmarks/count_ops.py", "_update"): "its worker also runs over an old checkout's sources (--src, as "
    "docs/performance.md counts d15a89c), whose Trainer has no step(): it takes step when there is one, else _update",
}
PRIVATE = re.compile(r"(?<!self)\.(_(?!_)\w+)")  # x._name, not x.__dunder__ nor a client class's own self._name
IMPORT_LINE = re.compile(r"^[ \t]*(?:from|import)[ \t]")


def client_files() -> list[Path]:
    files = [p for folder in CLIENTS for p in sorted((ROOT / folder).rglob("*.py"))]
    return [p for p in files if "work" not in p.relative_to(ROOT).parts]  # benchmarks/work: their outputs


def client_modules() -> set[str]:
    """The names a file of benchmarks/ or scripts/ is imported by from a file beside it, and the former ones."""
    return {p.stem for p in client_files()} | set(SHARED_BEFORE)


def coupling(rel: str, text: str, modules: set[str]) -> list[str]:
    """`rel:line: what` for each import of another client file and each use of a private member (`x._name`
    outside import lines: `torch.utils._python_dispatch` is a module path) not in PRIVATE_ALLOWED."""
    at = lambda start: f"{rel}:{text.count(chr(10), 0, start) + 1}"
    found = []
    for m in IMPORT.finditer(text):
        name = m.group(1) or m.group(2)
        if name in modules:
            found.append(
                f"{at(m.start())}: imports {name}" + (f" (now {SHARED_BEFORE[name]})" if name in SHARED_BEFORE else "")
            )
    start = 0
    for line in text.splitlines(keepends=True):
        if not IMPORT_LINE.match(line):
            found += [
                f"{at(start)}: uses private {m.group(1)}"
                for m in PRIVATE.finditer(line)
                if (rel, m.group(1)) not in PRIVATE_ALLOWED
            ]
        start += len(line)
    return found


def test_benchmarks_and_scripts_import_no_other_client_file_and_use_no_private_member():
    files = client_files()
    assert len(files) > 20 and (ROOT / "benchmarks/bench_train.py") in files  # the walk finds them
    modules = client_modules()
    found = [
        line
        for path in files
        for line in coupling(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"), modules)
    ]
    assert not found, (
        "share code through the package (structseq.testing for benchmark helpers, Trainer.step() for one "
        "update) or keep it in the one file that uses it:\n" + "\n".join(found)
    )
    for rel, name in PRIVATE_ALLOWED:  # an exception that is no longer used goes
        assert f".{name}" in (ROOT / rel).read_text(encoding="utf-8"), (rel, name)


def test_the_coupling_check_would_catch_the_old_lines():
    """The lines of benchmarks/ that imported each other or called the Trainer's private methods (as of
    563c1d3), each caught with its line; the worker of bench_commits.py keeps its listed exception."""
    old = {
        "benchmarks/bench_compile.py": "from bench_train import FAIRSEQ_OPTIM, TRANSFORMER, cfg\n",
        "benchmarks/bench_decode_fairseq.py": "import fairseq_baseline as fb  # beside this file\n",
        "benchmarks/bench_gpu.py": "def f():\n    import bench_train as bt\n    tokens += trainer._update()[1]\n",
        "benchmarks/bench_dangle.py": "    from bench_train import _count_flops\n    b = trainer._next_batch()\n",
        "benchmarks/bench_lstm.py": '    t._autocast = lambda: torch.autocast(device_type="cpu")\n',
        "benchmarks/bench_train.py": "    trainer._epoch_batches = lambda epoch: batches\n",
        "benchmarks/count_ops.py": "from torch.utils._python_dispatch import TorchDispatchMode\n        self._seen = 0\n",
        "benchmarks/bench_commits.py": 'WORKER = r"""\nstep = getattr(t, "step", None) or t._update\nt._next_batch()\n"""\n',
    }
    found = {rel: coupling(rel, text, client_modules()) for rel, text in old.items()}
    assert found == {
        "benchmarks/bench_compile.py": [
            "benchmarks/bench_compile.py:1: imports bench_train (now structseq.testing.bench)"
        ],
        "benchmarks/bench_decode_fairseq.py": [
            "benchmarks/bench_decode_fairseq.py:1: imports fairseq_baseline (now structseq.testing.fairseq_baseline)"
        ],
        "benchmarks/bench_gpu.py": [
            "benchmarks/bench_gpu.py:2: imports bench_train (now structseq.testing.bench)",
            "benchmarks/bench_gpu.py:3: uses private _update",
        ],
        "benchmarks/bench_dangle.py": [
            "benchmarks/bench_dangle.py:1: imports bench_train (now structseq.testing.bench)",
            "benchmarks/bench_dangle.py:2: uses private _next_batch",
        ],
        "benchmarks/bench_lstm.py": ["benchmarks/bench_lstm.py:1: uses private _autocast"],
        "benchmarks/bench_train.py": ["benchmarks/bench_train.py:1: uses private _epoch_batches"],
        "benchmarks/count_ops.py": [],
        "benchmarks/bench_commits.py": ["benchmarks/bench_commits.py:3: uses private _next_batch"],
    }


def test_importing_structseq_loads_no_test_helper_and_no_transformers():
    """`structseq.testing` is for tests and benchmarks: the toolkit never loads it, and its Hugging Face
    builders import transformers only when called."""
    import subprocess
    import sys

    code = (
        "import sys, structseq, structseq.testing.hf_tiny, structseq.testing.oracles, structseq.testing.bench;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('transformers', 'tokenizers')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    code = "import sys, structseq.cli, structseq.api; print(sorted(m for m in sys.modules if 'testing' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "structseq.testing" not in out, out


def test_the_package_finds_its_checkout_in_one_place():
    """`structseq.paths.REPO_ROOT` is the one rule for the repository root: a module that counts its own
    `parents[N]` repeats it and goes wrong when files move (fairseq_venv's benchmarks/work, demo's configs)."""
    from structseq.paths import REPO_ROOT
    from structseq.testing import fairseq_venv

    counted = re.compile(r"__file__\)?(?:\.resolve\(\))?\.parents\[")
    found = [
        p.relative_to(ROOT).as_posix()
        for p in sorted((ROOT / "src" / "structseq").rglob("*.py"))
        if counted.search(p.read_text(encoding="utf-8"))
    ]
    assert found == ["src/structseq/paths.py"]
    assert fairseq_venv.WORK == REPO_ROOT / "benchmarks" / "work" and (REPO_ROOT / "pyproject.toml").is_file()
