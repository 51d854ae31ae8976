"""scripts/mutants_changed.py (`make mutants-changed`): which functions a change touches, in mutmut's own names;
which tests it chooses; how mutmut's outcomes become a score per module; and the report of it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.fixtures.paths import ROOT

spec = importlib.util.spec_from_file_location("mutants_changed", ROOT / "scripts" / "mutants_changed.py")
mc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mc)

SOURCE = """\
import functools


def first(x):
    return x + 1


@functools.cache
def second(x):
    def inner(y):
        return y
    return inner(x)


class Box:
    size = 3

    def grow(self, n):
        return self.size + n

    @property
    def area(self):
        return self.size ** 2
"""


def test_keys_are_mutmuts_own_names():
    """Every function and method, named as mutmut names them (its make_mutant_key is the reference; mutmut is the
    `mutation` extra, which `make mutants-changed` installs)."""
    make_mutant_key = pytest.importorskip("mutmut.utils.format_utils").make_mutant_key

    expected = [
        make_mutant_key("first"),
        make_mutant_key("second"),
        make_mutant_key("grow", "Box"),
        make_mutant_key("area", "Box"),
    ]
    assert mc.function_keys(SOURCE, None) == expected


@pytest.mark.parametrize(
    "touched, keys",
    [
        ({5}, ["x_first"]),  # a line of the body
        ({4}, ["x_first"]),  # the def line itself
        ({8}, ["x_second"]),  # the decorator line belongs to the function
        ({11}, ["x_second"]),  # a nested function belongs to its enclosing one
        ({16}, []),  # a class attribute is no function
        ({19, 21}, ["x\u01c1Box\u01c1grow", "x\u01c1Box\u01c1area"]),
        ({2, 3, 7, 24}, []),  # blank lines and imports, past the end
        (set(), []),
    ],
)
def test_only_the_functions_whose_lines_changed(touched, keys):
    assert mc.function_keys(SOURCE, touched) == keys


def test_changed_lines_and_the_plan_in_a_repository(tmp_path, monkeypatch):
    """Lines added or edited since BASE (a pure deletion marks the line after it); a new file is whole."""

    def git(*a):
        subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)

    pkg = tmp_path / "src" / "structseq"
    pkg.mkdir(parents=True)
    (pkg / "m.py").write_text(SOURCE)
    git("init", "-q")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "0")
    git("add", ".")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "base")
    (pkg / "m.py").write_text(SOURCE.replace("return self.size + n", "return self.size - n"))
    (pkg / "new.py").write_text("def fresh():\n    return 1\n")
    git("add", ".")
    monkeypatch.setattr(mc, "ROOT", tmp_path)
    assert mc.changed_lines("HEAD", "src/structseq/m.py") == {19}
    assert mc.changed_lines("HEAD", "src/structseq/new.py") is None
    assert mc.plan("HEAD", []) == {"src/structseq/m.py": ["x\u01c1Box\u01c1grow"], "src/structseq/new.py": ["x_fresh"]}
    assert mc.plan("HEAD", ["src/structseq/new.py"]) == {"src/structseq/new.py": ["x_fresh"]}


def test_module_names_and_imports():
    assert mc.module_name("src/structseq/report/tables.py") == "structseq.report.tables"
    assert mc.module_name("src/structseq/report/__init__.py") == "structseq.report"
    text = "from . import kinds\nfrom ..outputs import save\nimport structseq.fields\nimport os\n"
    assert mc.imports_of(text, "structseq.report.tables") == {
        "structseq.report",
        "structseq.report.kinds",
        "structseq.outputs",
        "structseq.outputs.save",
        "structseq.fields",
    }


def test_the_score_counts_each_outcome_and_leaves_equivalents_out():
    codes = {
        "x_grow__mutmut_1": 1,  # killed
        "x_grow__mutmut_2": 0,  # survived
        "x_grow__mutmut_3": 33,  # no test reaches it
        "x_grow__mutmut_4": -24,  # timeout: noticed
        "x_grow__mutmut_5": None,  # not run yet
        "x_grow__mutmut_6": 0,  # survived, but listed as equivalent
        "x_grow_more__mutmut_1": 0,  # another function whose name starts the same: not wanted
    }
    codes = {f"structseq.m.{k}": v for k, v in codes.items()}  # as mutmut's .meta files name them
    got = mc.summarise(
        {"src/structseq/m.py": codes}, {"src/structseq/m.py": ["x_grow"]}, {"structseq.m.x_grow__mutmut_6": "why"}
    )["structseq.m"]
    assert {k: got[k] for k in ("killed", "survived", "no_tests", "not_run", "equivalent")} == {
        "killed": 2,
        "survived": 1,
        "no_tests": 1,
        "not_run": 1,
        "equivalent": 1,
    }
    assert got["score"] == 0.5
    assert got["survivors"] == ["structseq.m.x_grow__mutmut_2", "structseq.m.x_grow__mutmut_3"]
    nothing = mc.summarise({}, {"src/structseq/m.py": ["x_grow"]}, {})["structseq.m"]
    assert nothing["score"] is None and nothing["killed"] == 0


def test_tests_are_chosen_by_what_they_import():
    chosen = mc.choose_tests({"structseq.metrics.significance"}, [])
    assert "tests/metrics/test_significance.py" in chosen  # imports it
    assert "tests/repo/test_mutants_changed.py" not in chosen
    # a test reading the source text fails on a mutated file whatever the mutant (it imports structseq.cli)
    assert "tests/repo/test_one_owner.py" not in mc.choose_tests({"structseq.cli"}, [])
    # through a package's __init__.py, whose `from .kinds import ...` is structseq.report.kinds (not structseq.kinds)
    assert "tests/cli/test_small_parsers.py" in mc.choose_tests({"structseq.report.kinds"}, [])
    assert "structseq.report.kinds" in mc.imports_of("from .kinds import run\n", "structseq.report", True)
    assert "tests/extra.py" in mc.choose_tests({"structseq.metrics.significance"}, ["tests/extra.py"])


def render_record(tmp_path, capsys, modules: dict) -> str:
    """`structseq report mutants` of a record holding `modules`: what it prints."""
    record = {
        "base": "d15a89c",
        "head": "abc1234",
        "tool": "mutmut 3.8.1",
        "finished": False,
        "minutes": 3.5,
        "tests": ["tests/a.py"],
        "modules": modules,
    }
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(record))
    from structseq.report import main

    assert main(["mutants", str(path)]) == 0
    return capsys.readouterr().out


def test_report_renders_the_record(tmp_path, capsys):
    entry = {
        "killed": 9,
        "survived": 1,
        "no_tests": 0,
        "not_run": 2,
        "equivalent": 1,
        "functions": 2,
        "score": 0.9,
        "survivors": ["structseq.m.x_f__mutmut_1"],
    }
    out = render_record(tmp_path, capsys, {"structseq.m": entry})
    assert "| `structseq.m` | 2 | 13 | 9 | 1 | 0 | 2 | 1 | 90.0% |" in out
    assert "overall 90.0% of 10 decided mutants" in out and "stopped by its budget" in out


def test_bad_arguments_are_refused():
    for argv in (["--base", "no-such-revision-xyz"], ["--base", "HEAD", "--jobs", "0"]):
        with pytest.raises(SystemExit) as done:
            mc.main(argv)
        assert done.value.code == 2


@pytest.mark.slow
def test_a_whole_run_on_one_small_module(tmp_path):
    """mutmut end to end on one module's changed functions (minutes): a record whose counts add up."""
    out = tmp_path / "r.json"
    subprocess.run(
        [
            sys.executable,
            "scripts/mutants_changed.py",
            "--base",
            "d15a89c",
            "--module",
            "src/structseq/train/device.py",
            "--budget-minutes",
            "15",
            "--work",
            str(tmp_path / "work"),
            "--out",
            str(out),
            "--goal",
            "0.01",
        ],
        cwd=ROOT,
        check=False,
    )
    rec = json.loads(out.read_text())
    m = rec["modules"]["structseq.train.device"]
    assert m["killed"] + m["survived"] + m["no_tests"] + m["not_run"] > 0


def test_tests_in_folders_are_chosen(tmp_path, monkeypatch):
    """Tests that mirror the package (tests/decode/test_x.py) are chosen as the flat ones are."""
    (tmp_path / "src" / "structseq").mkdir(parents=True)
    (tmp_path / "tests" / "decode").mkdir(parents=True)
    (tmp_path / "tests" / "decode" / "test_x.py").write_text("from structseq.decode import beam\n")
    (tmp_path / "tests" / "test_y.py").write_text("import structseq.decode.beam\n")
    (tmp_path / "tests" / "test_z.py").write_text("import structseq.other\n")
    monkeypatch.setattr(mc, "ROOT", tmp_path)
    assert mc.choose_tests({"structseq.decode.beam"}, []) == ["tests/decode/test_x.py", "tests/test_y.py"]
    assert mc.ignored_tests(tmp_path, ["tests/test_y.py"]) == ["tests/decode/test_x.py", "tests/test_z.py"]


def test_a_call_names_only_what_is_not_decided():
    """mutmut reruns every mutant it is named: a call names a function only while one of its mutants is undecided
    (or its file was never mutated), and with --retry the survivors and unreached mutants one by one."""
    m = "structseq.m."
    metas = {
        "src/structseq/m.py": {
            m + "x_done__mutmut_1": 1,
            m + "x_done__mutmut_2": 0,  # survived
            m + "x_done__mutmut_3": 33,  # no test reached it
            m + "x_half__mutmut_1": 1,
            m + "x_half__mutmut_2": None,
            m + "x_other__mutmut_1": None,  # not a wanted function
        }
    }
    wanted = {"src/structseq/m.py": ["x_done", "x_half", "x_bare"], "src/structseq/new.py": ["x_f"]}
    assert mc.to_run(metas, wanted, retry=False) == [m + "x_half__mutmut_*", "structseq.new.x_f__mutmut_*"]
    assert mc.to_run(metas, wanted, retry=True) == [
        m + "x_done__mutmut_2",
        m + "x_done__mutmut_3",
        m + "x_half__mutmut_*",
        "structseq.new.x_f__mutmut_*",
    ]


def _entry(killed, not_run=0):
    score = killed / killed if killed else None
    return {"killed": killed, "survived": 0, "no_tests": 0, "not_run": not_run, "equivalent": 0, "score": score}


def test_a_record_keeps_what_an_earlier_call_scored():
    """A call on other modules (or in another checkout's copy) keeps the modules it decided nothing of; the
    minutes add up; a record of another base is replaced."""
    old = {"base": "b", "minutes": 5.0, "tests": ["tests/a.py"], "modules": {"p.a": _entry(9), "p.gone": _entry(2)}}
    old["modules"]["p.eq"] = _entry(7)
    listed = {**_entry(0, 5), "equivalent": 3}  # equivalents listed, nothing decided here
    modules = {"p.a": _entry(0, 4), "p.b": _entry(3), "p.eq": listed}
    new = {"base": "b", "minutes": 1.5, "tests": ["tests/b.py"], "modules": modules}
    got = mc.merge(old, new)
    assert got["modules"] == {"p.a": _entry(9), "p.gone": _entry(2), "p.b": _entry(3), "p.eq": _entry(7)}
    assert got["minutes"] == 6.5 and got["tests"] == ["tests/a.py", "tests/b.py"]
    redone = {**new, "modules": {"p.a": _entry(1)}}
    assert mc.merge(old, redone)["modules"]["p.a"] == _entry(1)  # decided here: this copy's verdicts win
    assert mc.merge({**old, "base": "other"}, new) == new


def test_report_counts_the_modules_not_run_yet(tmp_path, capsys):
    modules = {
        "structseq.m": {**_entry(4), "functions": 2, "survivors": []},
        "structseq.w1": {**_entry(0, 7), "functions": 3, "survivors": []},
        "structseq.w2": {**_entry(0, 5), "functions": 1, "survivors": []},
        "structseq.w3": {**_entry(0, 2), "equivalent": 1, "functions": 1, "survivors": []},  # only listed ones
    }
    out = render_record(tmp_path, capsys, modules)
    assert "| `structseq.m` | 2 | 4 | 4 | 0 | 0 | 0 | 0 | 100.0% |" in out and "w1`" not in out
    assert "Not run yet: 3 more changed modules (5 functions, 14 mutants made)" in out


@pytest.mark.parametrize(
    "under_test, seen", [("stats", ""), ("structseq.m.x_f__mutmut_3", "structseq.m.x_f__mutmut_3")]
)
def test_a_tests_subprocess_records_no_stats_but_runs_the_mutant(under_test, seen):
    """mutmut's stats recorder fails in a process a test starts in a temporary folder (no configuration there):
    such a process runs the original functions while stats are taken, and the mutant while one is under test."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(mc.SITE), "MUTANT_UNDER_TEST": under_test}
    code = "import os; print(os.environ['MUTANT_UNDER_TEST'])"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == seen


def test_the_copy_holds_the_committed_record_not_the_one_a_run_rewrites(tmp_path, monkeypatch):
    """A run rewrites results/mutants/ in the checkout; the copy's suite checks the documents' tables against
    the records, so the copy takes the committed record (which the committed tables match)."""

    def git(*a):
        subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "results" / "mutants").mkdir(parents=True)
    (tmp_path / "src").mkdir()
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    record = tmp_path / "results" / "mutants" / "changed-b.json"
    record.write_text('{"minutes": 1}\n')
    (tmp_path / "README.md").write_text("committed\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "-m", "0")
    record.write_text('{"minutes": 2}\n')  # a run's rewrite
    (tmp_path / "README.md").write_text("edited\n")  # other files: as they are in the checkout
    monkeypatch.setattr(mc, "ROOT", tmp_path)
    copy = mc.prepare_copy(tmp_path / "work", [], [])
    assert (copy / "results" / "mutants" / "changed-b.json").read_text() == '{"minutes": 1}\n'
    assert (copy / "README.md").read_text() == "edited\n"


def test_an_old_score_is_kept_only_for_a_module_unchanged_since(tmp_path):
    """A module scored at an earlier head and edited since keeps this call's undecided entry (its old score under
    the new head was a score of code that no longer exists, and made the record `finished`); unchanged, the old
    entry stays with the head that scored it. The check reads the file at that commit (`source_unchanged`)."""
    old = {"base": "b", "head": "h1", "minutes": 1.0, "tests": [], "modules": {"p.a": _entry(9), "p.b": _entry(4)}}
    new = {
        "base": "b",
        "head": "h2",
        "minutes": 1.0,
        "tests": [],
        "modules": {"p.a": _entry(0, 7), "p.b": _entry(0, 3)},
    }
    got = mc.merge(old, new, lambda module, head: module == "p.b" and head == "h1")
    assert got["modules"]["p.a"] == _entry(0, 7)
    assert got["modules"]["p.b"] == {**_entry(4), "head": "h1"}
    head = mc.git("rev-parse", "HEAD").strip()
    assert mc.source_unchanged("structseq.errors", head)
    assert not mc.source_unchanged("structseq.errors", None)
    first = mc.git("rev-list", "--max-parents=0", "HEAD").split()[0]
    assert not mc.source_unchanged("structseq.errors", first)  # the file differs from the first commit's (or is absent)
