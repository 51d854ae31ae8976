"""Generic code asks the task and model contracts (`Task`, `Model`, capabilities declared at `register_arch`)
and never guesses: no `getattr`/`hasattr` probing of a task, model or head outside the tasks' and models' own
modules, and no branch on an arch's name outside the models (issue 46 item 1; `compare`'s task kinds are item 4's)."""

from __future__ import annotations

import re
from pathlib import Path

from structseq.registry import ARCHS

SRC = Path(__file__).resolve().parent.parent / "src" / "structseq"
#: the modules that own task- and model-specific code (tasks/, models/, nn/); data/ and the config modules read
#: model fields of the *config* by name, which is issue 46 item 6, not probing of a built object
OWN = ("tasks/", "models/", "nn/", "data/", "config.py", "fields.py")
PROBE = re.compile(r"\b(?:getattr|hasattr)\(\s*((?:\w+\.)*(?:task|model|head)\b(?:\.\w+)*)\s*,")


def generic_files():
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if not rel.startswith(OWN):
            yield rel, path.read_text(encoding="utf-8")


def test_generic_code_never_probes_a_task_model_or_head():
    found = [
        f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for rel, text in generic_files()
        for m in PROBE.finditer(text)
        if not m.group(1).startswith(("cfg.", "config."))
    ]
    assert not found, "probing in generic code (declare it on Task / Model instead):\n" + "\n".join(found)


def test_no_code_branches_on_an_arch_name_outside_the_models():
    names = "|".join(re.escape(n) for n in sorted(ARCHS.names(), key=len, reverse=True))
    branch = re.compile(rf"""(?:==|!=)\s*["']({names})["']|["']({names})["']\s*(?:==|!=)|\.arch\s+in\s""")
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(("models/", "nn/")):  # a model module may test its own arch names (its variants)
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in branch.finditer(text)]
    assert not found, "branches on an arch name (declare a capability at register_arch):\n" + "\n".join(found)


def test_the_checks_would_catch_the_old_probes():
    """The patterns match the probes issue 46 lists (d15a89c), so an empty result means something."""
    old = [
        'ids = getattr(self.task, "ids", None)',
        'if not hasattr(task, "output_formats"):',
        'if reverse and not getattr(run.task.options, "reverse", False):',
        'head = getattr(self.model, "head", None)',
    ]
    assert all(PROBE.search(line) for line in old)
    names = "|".join(re.escape(n) for n in ARCHS.names())
    assert re.search(rf"""==\s*["']({names})["']""", 'return self.cfg.model.arch == "supertag-tree"')
