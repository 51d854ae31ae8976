"""Generic code asks the task and model contracts (`Task`, `Model`, capabilities declared at `register_arch`)
and never guesses: no `getattr`/`hasattr` probing of a task, model, head or example outside the tasks' and models'
own modules, no probe of a member the contracts declare, and no branch on an arch's name outside the models
(issue 46 item 1; `compare`'s task kinds are item 4's).

The data and config modules (data/, config/, fields.py) are held to a stricter rule: no `getattr`/`hasattr` by a
literal name at all. What they legitimately do is reflection over a declared schema, always by a computed name:
a config section's dataclass fields (`fields.declared` finds a field by its declared role, `path_keys` the path
fields), the split key a caller names (`getattr(cfg.data, key)`, key in train/valid), a plugin's `module:attr`."""

from __future__ import annotations

import re

from structseq.data.example import Example
from structseq.models.base import Model
from structseq.registry import ARCHS
from structseq.tasks.base import Task
from tests.fixtures.paths import ROOT as REPO

SRC = REPO / "src" / "structseq"
#: the modules that own task- and model-specific code (a model may ask its own parts, base.py checks a plugin
#: model against the contract)
OWN = ("tasks/", "models/", "nn/")
PROBE = re.compile(r"\b(?:getattr|hasattr)\(\s*((?:\w+\.)*(?:task|model|head|example)\b(?:\.\w+)*)\s*,")
LITERAL = re.compile(r"""\b(?:getattr|hasattr)\(\s*([\w.]+)\s*,\s*["'](\w+)["']""")
#: data/, config/ and fields.py: no probe by a literal name (module docstring)
STRICT = ("data/", "config/", "fields.py")
#: (file, object, attribute) probes that are not of our contracts, each for a reason:
FOREIGN = {
    # a Hugging Face tokenizer: only asking tells a fast one (with a `tokenizers` backend) from a slow one, and
    # transformers declares no `is_fast` on its base class (5.x)
    ("data/subword.py", "tok", "backend_tokenizer"),
    # `as_pairs` documents taking any object with .source and .target (a user's own records), or pairs
    ("lexicon/corpus.py", "item", "source"),
    ("lexicon/corpus.py", "item", "target"),
}


def declared_members() -> set[str]:
    """What `Task`, `Model` and `Example` declare: asking whether one of these exists is never needed."""
    return {n for cls in (Task, Model, Example) for n in dir(cls) if not n.startswith("__")}


def generic_files():
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if not rel.startswith(OWN):
            yield rel, path.read_text(encoding="utf-8")


def literal_probes(rel: str, text: str, members: set[str]) -> list[str]:
    """`rel:line: probe` for each probe by a literal name that the rules above refuse in file `rel`."""
    return [
        f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for m in LITERAL.finditer(text)
        if (rel.startswith(STRICT) or m.group(2) in members) and (rel, m.group(1), m.group(2)) not in FOREIGN
    ]


def test_generic_code_never_probes_a_task_model_head_or_example():
    found = [
        f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for rel, text in generic_files()
        for m in PROBE.finditer(text)
    ]
    assert not found, "probing in generic code (declare it on Task / Model / Example instead):\n" + "\n".join(found)


def test_generic_code_never_probes_a_declared_member_and_data_and_config_never_probe():
    members = declared_members()
    assert {"context", "decode_inputs", "autoregressive"} <= members  # the contracts are read (not vacuous)
    files = list(generic_files())
    assert any(rel.startswith("data/") for rel, _ in files) and any(rel == "fields.py" for rel, _ in files)
    found = [line for rel, text in files for line in literal_probes(rel, text, members)]
    assert not found, "probing (use the declared member, or a role via fields.declared):\n" + "\n".join(found)


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
        'context = getattr(example, "context", None) or ()',  # data/limits.py, before this test read data/
    ]
    assert all(PROBE.search(line) for line in old)
    members = declared_members()
    old_literal = {  # file: a line it had (as of 69534ea), each a probe these checks refuse
        "data/limits.py": 'check_tokens(getattr(e, "context", None) or (), "context", where, line)',
        "fields.py": 'hint = getattr(schemas, "hint", "")',
        "evaluation.py": 'if hasattr(run.task, "decode_inputs"):',
    }
    assert all(literal_probes(rel, line, members) for rel, line in old_literal.items())
    # what stays allowed: reflection by a computed name, and the listed foreign objects
    assert not literal_probes("fields.py", "value = getattr(section, f.name)", members)
    assert not literal_probes("data/subword.py", 'backend = getattr(tok, "backend_tokenizer", None)', members)
    names = "|".join(re.escape(n) for n in ARCHS.names())
    assert re.search(rf"""==\s*["']({names})["']""", 'return self.cfg.model.arch == "supertag-tree"')
