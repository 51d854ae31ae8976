"""scripts/mutants.py selects mutants by source file (`--module`) and a stale mutant's report names the pattern
that no longer matches (the code moved: the table needs the new text), so a rebase that strands a mutant says
where; `--only`/`--module` naming nothing are errors."""

import importlib.util
import json
import subprocess
import sys

import pytest

from structseq.errors import ConfigError
from tests.fixtures.paths import ROOT


def _mutants():
    spec = importlib.util.spec_from_file_location("scripts_mutants_w43", ROOT / "scripts" / "mutants.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_module_selects_by_file_and_stale_mutants_name_their_pattern(tmp_path, capsys):
    mutants = _mutants()
    repo = tmp_path / "repo"
    (repo / "src" / "toy").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "src" / "toy" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    (repo / "src" / "toy" / "other.py").write_text("X = 1\n")
    (repo / "tests" / "test_toy.py").write_text("from toy import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    table = tmp_path / "mutants.yaml"
    table.write_text("""
- {id: moved, file: src/toy/__init__.py, edits: [['return a \\+ b', 'return a'], ['def mul', 'def div']], tests: [tests/test_toy.py]}
- {id: elsewhere, file: src/toy/other.py, edits: [['X = 1', 'X = 2']], tests: [tests/test_toy.py]}
""")
    out = tmp_path / "m.json"
    args = ["--root", str(repo), "--table", str(table), "--out", str(out)]
    assert mutants.main([*args, "--module", "toy/__init__"]) == 0
    (moved,) = json.loads(out.read_text())["mutants"]  # only the mutant of the file asked for
    assert moved["status"] == "stale" and moved["unmatched"] == "def mul"  # the second pattern, after the first
    assert "pattern not found: def mul" in capsys.readouterr().out
    assert mutants.unmatched("abc", [["b", "x"], ["c", "y"]]) == "" and mutants.unmatched("", [["q", ""]]) == "q"
    with pytest.raises(ConfigError, match="--module: no mutant of a file matching nowhere"):
        mutants.main([*args, "--module", "nowhere"])
    with pytest.raises(ConfigError, match="--only: no mutant nope"):
        mutants.main([*args, "--only", "nope"])
