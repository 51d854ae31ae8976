"""tests/ mirrors src/structseq/ (issue 56 item 2): every test file lies under the folder of its subject's package
(or is `tests/test_MODULE[_TOPIC].py` for a top-level module), or in one of the stated extra folders (cli, repo);
every folder is a package; the rule is tests/README.md's and scripts/tests_layout.py's."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from tests.fixtures.paths import ROOT, SRC

TESTS = ROOT / "tests"


def _layout():
    spec = importlib.util.spec_from_file_location("tests_layout", ROOT / "scripts" / "tests_layout.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_test_file_lies_where_its_subject_lives():
    """Checked here directly (not through the script): the first folder is a package of structseq or cli/repo,
    a deeper folder mirrors a package, a flat file names a top-level module."""
    packages = {p.parent.relative_to(SRC).as_posix() for p in SRC.rglob("__init__.py") if p.parent != SRC}
    modules = {p.stem for p in SRC.glob("*.py") if not p.stem.startswith("__")}
    wrong = []
    for path in sorted(TESTS.rglob("test_*.py")):
        rel = path.relative_to(TESTS)
        folder = rel.parent.as_posix()
        if folder == ".":
            stem = rel.stem.removeprefix("test_")
            ok = any(stem == m or stem.startswith(m + "_") for m in modules)
        else:
            ok = folder in packages or folder in {"cli", "repo"}
        if not ok:
            wrong.append(rel.as_posix())
    assert not wrong, f"not where their subject lives (tests/README.md; scripts/tests_layout.py moves them): {wrong}"


def test_every_folder_of_tests_is_a_package():
    folders = [p for p in TESTS.rglob("*") if p.is_dir() and "__pycache__" not in p.parts and p.name[0] not in "._"]
    folders = [p for p in folders if any(p.rglob("*.py"))]  # recorded fixtures (old runs) hold no Python
    assert (TESTS / "__init__.py").is_file()
    assert [p.relative_to(ROOT).as_posix() for p in folders if not (p / "__init__.py").is_file()] == []


def test_the_layout_script_agrees_and_places_new_flat_files_by_their_name():
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "tests_layout.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    layout = _layout()
    assert layout.destination("test_decode_new_strategy.py") == "decode/test_new_strategy.py"
    assert layout.destination("test_outputs_more.py") == "test_outputs_more.py"  # a top-level module's: stays
    assert layout.destination("test_behaviour_something.py") is None  # a category, not a subject: no place
    assert layout.misplaced("behaviour/test_x.py") and layout.misplaced("test_reliability_x.py")
    assert layout.misplaced("decode/processors/test_x.py") is None and layout.misplaced("repo/test_x.py") is None
