"""The shape of the package: no import cycles (function-level imports counted), rooms of a bounded size, the
registries and the model contract, and teacher-forced = incremental for every registered autoregressive
model (not a hand-written list)."""

from __future__ import annotations

import ast
import dataclasses
import io
import tokenize
import typing
from pathlib import Path

import pytest
import torch

from structseq.config import config_from_dict
from structseq.data.example import Example
from structseq.errors import ConfigError
from structseq.models import build_model
from structseq.registry import ARCHS, TASKS, Registry, RegistryError, register_arch
from structseq.run import layout
from structseq.tasks import get_task
from tests.fixtures.paths import ROOT as REPO

SRC = REPO / "src" / "structseq"
MAX_FILE_LINES = 450
MAX_FUNCTION_LINES = 80


def _modules() -> dict[str, Path]:
    out = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every structseq module `name` imports, at any depth of its code (function-level imports too)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` (module -> imported modules), or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in graph:
        if root in state:
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif nxt not in state:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_among_structseq_modules():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    # a package's __init__ runs before its submodules: importing `a.b` also imports `a`
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def code_lines(text: str) -> tuple[set[int], ast.Module]:
    """The line numbers holding code: no blank lines, comments or docstrings. A size in these lines does not
    change when the formatter wraps a call over more lines than a person would."""
    tree = ast.parse(text)
    docs: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                docs.update(range(first.lineno, first.end_lineno + 1))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in skip:
            lines.update(n for n in range(tok.start[0], tok.end[0] + 1) if n not in docs)
    return lines, tree


#: the files and folders of a run directory (`structseq.run.layout` names them)
RUN_FILES = {
    layout.LOCK,
    layout.MARKER,
    layout.CONFIG,
    layout.METRICS,
    layout.HISTORY,
    layout.DATA_FILES,
    layout.CHECKPOINTS,
    layout.PREDICTIONS,
    layout.TENSORBOARD,
}


def _run_file_literal(node: ast.AST) -> str | None:
    """The text of a string (or f-string, `{}` for its fields) naming a run directory's file: one of
    `RUN_FILES` (or a path under one), or a checkpoint `*.pt`; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = node.value
    elif isinstance(node, ast.JoinedStr):
        text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    else:
        return None
    return text if text.split("/")[0] in RUN_FILES or text.endswith(".pt") else None


def run_file_paths(source: str) -> list[tuple[int, str]]:
    """(line, name) of each path `source` builds to a run directory's file: `X / "config.yaml"`,
    `X.glob("*.pt")`, `os.path.join(X, "checkpoints")`, `X.joinpath(...)`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            parts = [node.right]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            parts = node.args if node.func.attr in ("glob", "rglob", "joinpath", "join") else []
        else:
            continue
        found += [(node.lineno, text) for part in parts if (text := _run_file_literal(part))]
    return found


def test_the_run_file_finder_finds_planted_paths():
    source = 'p = run / "checkpoints" / f"{name}.pt"\nq = run.glob("*.pt")\nr = os.path.join(run, "config.yaml")\n'
    assert sorted(line for line, _ in run_file_paths(source)) == [1, 1, 2, 3]
    assert run_file_paths('metrics["predictions"] = str(path)\nprint(f"{out}/predictions/")\n') == []


def test_no_module_outside_structseq_run_spells_a_run_directorys_files():
    """A run directory's files are named in `structseq.run` only (`layout`): every other module reads and
    writes them through its functions (issue 56), so the layout has one owner."""
    found = [
        f"{path.relative_to(SRC.parent)}:{line}: {text}"
        for path in sorted(SRC.rglob("*.py"))
        if (SRC / "run") not in path.parents
        for line, text in run_file_paths(path.read_text(encoding="utf-8"))
    ]
    assert not found, "run directory files named outside structseq.run (use structseq.run.layout):\n" + "\n".join(found)


def test_code_lines_leave_out_docstrings_comments_and_blanks():
    text = 'def f(a,\n      b):\n    """Doc."""\n    # note\n\n    return (a +\n            b)\n'
    lines, _ = code_lines(text)
    assert lines == {1, 2, 6, 7}


def test_no_source_file_or_function_too_long():
    """Files of at most MAX_FILE_LINES code lines, function bodies (after the signature and docstring) of at
    most MAX_FUNCTION_LINES: one job each."""
    too_long = []
    for path in sorted(SRC.rglob("*.py")):
        lines, tree = code_lines(path.read_text(encoding="utf-8"))
        rel = path.relative_to(SRC.parent)
        if len(lines) > MAX_FILE_LINES:
            too_long.append(f"{rel}: {len(lines)} code lines")
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = sum(node.body[0].lineno <= line <= node.end_lineno for line in lines)
                if n > MAX_FUNCTION_LINES:
                    too_long.append(f"{rel}:{node.lineno} {node.name}: {n} code lines")
    assert not too_long, "split these (one job each):\n" + "\n".join(too_long)


# ---------------------------------------------------------------- registries and the model contract


def test_a_name_registered_twice_is_refused_naming_both():
    reg = Registry("widget", "x.widget")
    reg.add("a", len)
    with pytest.raises(RegistryError, match="widget 'a' is registered twice: by builtins.len and by builtins.max"):
        reg.add("a", max)


def test_a_plugin_that_fails_to_load_is_one_error_naming_it(tmp_path):
    import subprocess
    import sys

    bad = tmp_path / "broken_plugin.py"
    bad.write_text("import structseq.nosuch_module\n")
    env = {"STRUCTSEQ_PLUGINS": str(bad), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-m", "structseq.cli", "config", "lstm"],
        capture_output=True,
        text=True,
        env={**__import__("os").environ, **env},
        timeout=120,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "broken_plugin.py failed to load: ModuleNotFoundError" in out.stderr


def test_infinite_numbers_given_as_text_are_refused():
    for text in ("inf", "1e999", "nan"):
        with pytest.raises(ConfigError, match="'optim.lr' must be a finite number"):
            config_from_dict({"optim": {"lr": text}})


def test_unknown_names_list_the_choices():
    with pytest.raises(ConfigError, match="'model.arch': unknown model 'nosuch'; choices: .*transformer"):
        config_from_dict({"model": "nosuch"})


@dataclasses.dataclass
class _NoAttentionConfig:
    arch: str = "no-attention-probe"
    head: typing.Any = None


def test_a_head_that_needs_attention_on_a_model_without_it_fails_at_config_time():
    from structseq.models.heads import head_option

    @dataclasses.dataclass
    class Cfg:
        arch: str = "no-attention-probe"
        head: typing.Any = head_option()

    register_arch("no-attention-probe", config=Cfg)(lambda cfg, vocabs, train=None: None)
    try:
        config_from_dict({"model": {"arch": "no-attention-probe"}})  # a softmax head: fine
        with pytest.raises(ConfigError, match="'model.head.type': a copy head reads attention weights"):
            config_from_dict({"model": {"arch": "no-attention-probe", "head": {"type": "copy"}}})
    finally:
        ARCHS.remove("no-attention-probe")


def test_a_builder_that_breaks_the_contract_is_named_at_build_time():
    register_arch("widthless-probe", config=_NoAttentionConfig)(lambda cfg, vocabs, train=None: torch.nn.Linear(2, 2))
    try:
        cfg = config_from_dict({"model": {"arch": "widthless-probe"}})
        with pytest.raises(ConfigError, match="'widthless-probe' has no positive integer `width`"):
            build_model(cfg.model, {})
    finally:
        ARCHS.remove("widthless-probe")


def test_every_model_has_the_contract_defaults():
    """`train.init_from` calls `pretrained_state` and the optimiser `param_groups` on every model (the
    supertaggers once lacked the first: an AttributeError at run time)."""
    for name, arch in _buildable():
        cfg = config_from_dict({"task": arch.tasks[0], "model": _tiny(arch)})
        model = build_model(cfg.model, _vocabs(cfg))
        state, renamed = model.pretrained_state(model.state_dict())
        assert set(state) == set(model.state_dict()) and renamed == [], name
        groups = model.param_groups()
        assert sum(p.numel() for g in groups for p in g["params"]) == sum(
            p.numel() for p in model.parameters() if p.requires_grad
        ), name


# ---------------------------------------------------------------- every registered autoregressive model

#: the sizes of the fields a model declares as a `width` or a number of `heads` (`option(..., role=...)`)
_SMALL = {"width": 16, "heads": 2}


def _tiny(arch) -> dict:
    """The arch's schema with widths shrunk, depths at most 2 and dropouts 0 (keys it does not have are skipped)."""
    fields = {f.name: f for f in dataclasses.fields(arch.config)}
    out = {"arch": arch.name}
    for key, field in fields.items():
        default = field.default
        if field.metadata.get("role") in _SMALL:
            out[key] = _SMALL[field.metadata["role"]]
        elif key.endswith("layers") and isinstance(default, int) and not isinstance(default, bool):
            out[key] = min(default, 2) if default else default
        elif "dropout" in key and isinstance(default, float):
            out[key] = 0.0
    if out.get("encoder_layers") is not None and "source_layers" in fields:  # interleave: layers within depth
        out.update(decoder_layers=2, source_layers=[1], context_layers=[2])
    return out


EXAMPLES = [
    Example.from_text("a b c d", "x y z x y", context="c d e f g"),
    Example.from_text("b c", "y y z x x y z", context="a a"),
    Example.from_text("d a a b c", "z", context="g f e"),
]


def _vocabs(cfg):
    return get_task(cfg).build_vocabs(EXAMPLES)


def _buildable() -> list[tuple[str, typing.Any]]:
    """The registered archs that build from their schema's defaults: not those whose schema declares keys the
    builder needs set (`build_requires`, e.g. a local pretrained checkpoint folder; tested in their own files)."""
    return [(name, arch) for name, arch in ARCHS.items() if not getattr(arch.config, "build_requires", ())]


def test_an_arch_that_needs_a_key_says_so_when_built_without_it():
    needy = [(name, arch) for name, arch in ARCHS.items() if getattr(arch.config, "build_requires", ())]
    for name, arch in needy:
        cfg = config_from_dict({"task": arch.tasks[0], "model": {"arch": name}})
        key = arch.config.build_requires[0]
        with pytest.raises(ConfigError, match=f"'model.{key}' is required"):
            build_model(cfg.model, {})


def _autoregressive_archs() -> list[str]:
    names = []
    for name, arch in _buildable():
        cfg = config_from_dict({"task": arch.tasks[0], "model": _tiny(arch)})
        if getattr(build_model(cfg.model, _vocabs(cfg)), "autoregressive", False):
            names.append(name)
    return names


def test_the_list_of_autoregressive_archs_is_complete():
    assert {"transformer", "lstm", "dangle", "rdangle-shr", "rdangle-sep", "context-transformer"} <= set(
        _autoregressive_archs()
    )
    assert TASKS.get("seq2seq").name == "seq2seq"


@pytest.mark.parametrize("name", _autoregressive_archs())
def test_teacher_forced_equals_incremental_for_every_registered_arch(name):
    torch.manual_seed(0)
    arch = ARCHS.get(name)
    cfg = config_from_dict({"task": arch.tasks[0], "model": _tiny(arch)})
    task = get_task(cfg)
    vocabs = task.build_vocabs(EXAMPLES)
    model = build_model(cfg.model, vocabs, EXAMPLES).eval()
    with torch.no_grad():  # relative tables start at zero: randomise them so the test sees them
        for pname, p in model.named_parameters():
            if pname.endswith("table"):
                p.normal_(0, 0.5)
    batch = task.batch(EXAMPLES, vocabs)
    full = model(batch)
    steps = model.incremental_log_probs(batch)
    mask = batch["tgt_in"].ne(0)
    assert torch.allclose(full[mask], steps[mask], atol=1e-5), (full - steps)[mask].abs().max()
