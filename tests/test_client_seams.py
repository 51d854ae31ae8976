"""Benchmarks and scripts are clients of the package, not a second codebase (issue 46): none edits `sys.path`
and none imports a test module. What tests and benchmarks share (tiny Hugging Face checkpoints, the plain
reference formulations) lives in `structseq.testing`; a benchmark may still import a file beside it, which
needs no path edit (Python puts a script's own folder first on its import path).

The checks read the text, code in strings included: the worker programs that benchmarks hand to
`python -c` edited `sys.path` too."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIENTS = ("benchmarks", "scripts")
#: the test helpers benchmarks used to import from tests/, and where each went
MOVED = {"hf_tiny": "structseq.testing.hf_tiny", "oracles": "structseq.testing.oracles"}
SYS_PATH = re.compile(r"\bsys\.path\b")
IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(\w+)|import[ \t]+(\w+))", re.M)


def test_modules() -> set[str]:
    """The names a `tests/` module or package is imported by (when tests/ is on the path), and the moved ones."""
    tests = ROOT / "tests"
    return {p.stem for p in tests.glob("*.py")} | {p.name for p in tests.iterdir() if p.is_dir()} | set(MOVED)


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
    files = [p for folder in CLIENTS for p in sorted((ROOT / folder).rglob("*.py"))]
    files = [p for p in files if "work" not in p.relative_to(ROOT).parts]  # benchmarks/work: their outputs
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


def test_importing_structseq_loads_no_test_helper_and_no_transformers():
    """`structseq.testing` is for tests and benchmarks: the toolkit never loads it, and its Hugging Face
    builders import transformers only when called."""
    import subprocess
    import sys

    code = (
        "import sys, structseq, structseq.testing.hf_tiny, structseq.testing.oracles;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('transformers', 'tokenizers')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    code = "import sys, structseq.cli, structseq.api; print(sorted(m for m in sys.modules if 'testing' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "structseq.testing" not in out, out
