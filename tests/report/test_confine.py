"""`structseq report tables DOC --root R [--check]`: what a document says never makes a block write outside R, and
under --check nothing is written at all. A hostile document for each script that writes (reproduce_lexicon's
`--out`, with and without `--report-only`; seed_errors' `--keep`) and a generic one (a script writing through
every call a script has: open, mkdir, copy, rename, symlink, a folder linked out of the root, a child process)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from structseq.errors import StructseqError
from structseq.report import tables
from tests.fixtures.paths import ROOT

RUNS = ROOT / "results" / "lexicon" / "colors-spread-predictions"
PREDICTIONS = "results/preds"

#: a script that writes OUT (its second argument) by the means named by its first
GENERIC = r"""
import os, shutil, subprocess, sys
from pathlib import Path
how, out = sys.argv[1], Path(sys.argv[2])
print("| table |")
if how == "open":
    open(out, "w").write("x")
elif how == "mkdir":
    os.makedirs(out / "deep", exist_ok=True)
elif how == "path":
    out.write_bytes(b"x")
elif how == "copy":
    shutil.copyfile(__file__, out)
elif how == "rename":
    Path("moved.txt").write_text("x")
    os.replace("moved.txt", out)
elif how == "symlink":
    os.symlink(__file__, out)
elif how == "linked":  # a folder inside the root that links out of it
    os.symlink(out.parent, "link")
    Path("link/file").write_text("x")
elif how == "subprocess":
    subprocess.run(["touch", str(out)])
elif how == "system":
    os.system(f"touch {out}")
elif how == "fdopen":
    os.close(os.open(out, os.O_WRONLY | os.O_CREAT))
elif how == "dirfd":  # a folder's descriptor, then a file relative to it (os.open's audit event has no dir_fd)
    folder = os.open(out.parent if out.parent.exists() else out.parent.parent, os.O_RDONLY)
    os.close(os.open(out.name, os.O_WRONLY | os.O_CREAT, dir_fd=folder))
"""
HOWS = ("open", "mkdir", "path", "copy", "rename", "symlink", "linked", "subprocess", "system", "fdopen", "dirfd")


def _repo(tmp_path: Path) -> Path:
    """A repository root with the two scripts, the generic one, and two runs' predictions for seed_errors."""
    root = tmp_path / "repo"
    (root / "scripts" / "analysis").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "reproduce_lexicon.py", root / "scripts")
    shutil.copy(ROOT / "scripts" / "analysis" / "seed_errors.py", root / "scripts" / "analysis")
    (root / "scripts" / "w52_generic.py").write_text(GENERIC, encoding="utf-8")
    for run in sorted(RUNS.glob("colors-lstm-lex-simple-threads1-s*"))[:2]:
        shutil.copytree(run, root / PREDICTIONS / run.name)
    return root


def _tree(folder: Path) -> dict[str, bytes | str]:
    """Every path under `folder`: a file's bytes, a link's target, a folder's mark."""
    out: dict[str, bytes | str] = {}
    for p in sorted(folder.rglob("*")):
        key = str(p.relative_to(folder))
        out[key] = f"-> {p.readlink()}" if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes()
    return out


def _hostile(outside: str) -> list[str]:
    return [
        f"python scripts/reproduce_lexicon.py table2 --datasets colors --print --out {outside}",
        f"python scripts/reproduce_lexicon.py table2 --datasets colors --report-only --out {outside}",
        f"python scripts/analysis/seed_errors.py {PREDICTIONS} --keep {outside}",
        *(f"python scripts/w52_generic.py {how} {outside}/w52" for how in HOWS),
    ]


@pytest.mark.parametrize(("check", "exists"), [(True, False), (False, True)])
def test_no_block_writes_outside_the_root(tmp_path, check, exists):
    """Each hostile block is refused naming the document's line, with or without --check, and nothing appears
    outside the root (the outside folder absent, or there and left empty); relative and absolute paths alike."""
    root = _repo(tmp_path)
    outside = tmp_path / "X"
    if exists:
        outside.mkdir()
    doc = root / "doc.md"
    before = _tree(tmp_path)
    for command in [*_hostile("../X"), *_hostile(str(outside))[:3]]:
        doc.write_text(f"text\n<!-- generated: {command} -->\nx\n<!-- /generated -->\n", encoding="utf-8")
        try:
            tables.update(doc, check=check, root=root)
        except StructseqError as e:
            assert re.match(r"doc.md:2: `.*` refused: a generated block (writes only|starts no process)", str(e))
        else:  # --print into a folder that exists writes nothing (its mkdir is a no-op): rendered
            assert exists and "--print" in command, command
        assert _tree(tmp_path / "X") == {} if exists else not outside.exists(), command
        for leftover in ("link", "moved.txt"):  # the generic script's own files under the root
            (root / leftover).unlink(missing_ok=True)
    doc.unlink()
    if check:
        assert _tree(tmp_path) == before  # under --check not even under the root


def test_check_leaves_the_tree_byte_identical_and_a_plain_run_writes_under_the_root(tmp_path):
    """`--check` on a document whose blocks would write under the root (a kept copy, a report) exits 2 naming the
    block and changes no byte anywhere; without --check the same blocks write their files under the root and
    the document is regenerated. Through the command line, as CI runs it."""
    root = _repo(tmp_path)
    blocks = [
        f"python scripts/analysis/seed_errors.py {PREDICTIONS}",  # reads only: renders under --check
        f"python scripts/analysis/seed_errors.py {PREDICTIONS} --keep results/kept",
        "python scripts/reproduce_lexicon.py table2 --datasets colors --report-only --out results/w52",
        "python scripts/w52_generic.py open inside.txt",
    ]
    text = "".join(f"<!-- generated: {b} -->\nstale\n<!-- /generated -->\n" for b in blocks)
    (root / "doc.md").write_text(text, encoding="utf-8")
    before = _tree(tmp_path)

    def report(*args):
        command = [sys.executable, "-m", "structseq", "report", "tables", "doc.md", "--root", str(root), *args]
        return subprocess.run(command, capture_output=True, text=True)

    done = report("--check")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "doc.md:4:" in done.stderr and "its temporary folder under --check" in done.stderr
    assert _tree(tmp_path) == before
    rec = {"config": "c.yaml", "overrides": [], "split": "test", "seed": 1, "run_dir": "runs/s1", "steps": 100}
    rec["metrics"] = {"exact_match": {"score": 0.5}}
    (root / "r.jsonl").write_text(json.dumps(rec) + "\n", encoding="utf-8")
    (root / "c.jsonl").write_text(json.dumps({**rec, "step": 50}) + "\n", encoding="utf-8")
    plotted = "structseq report results r.jsonl --curve c.jsonl --curve-only --plot docs/curve.png"  # in-process
    readers = "".join(f"<!-- generated: {b} -->\nstale\n<!-- /generated -->\n" for b in (blocks[0], plotted))
    (root / "doc.md").write_text(readers, encoding="utf-8")
    before = _tree(tmp_path)
    assert report("--check").returncode == 1 and _tree(tmp_path) == before  # stale, and still nothing written
    assert report().returncode == 0 and (root / "docs" / "curve.png").read_bytes().startswith(b"\x89PNG")

    (root / "doc.md").write_text(text, encoding="utf-8")
    done = report()
    assert done.returncode == 0, done.stderr
    kept = sorted(p.relative_to(root / "results" / "kept") for p in (root / "results" / "kept").rglob("*.tsv"))
    assert len(kept) == 2 and (root / "results" / "w52" / "table2-paper.md").is_file()
    assert (root / "inside.txt").read_text() == "x" and "stale" not in (root / "doc.md").read_text()
    assert report("--check").returncode == 2  # the writing blocks still write: --check refuses them
