"""Registries: each kind of extension registers where it is defined, with a decorator, and the config
loader, the trainer and the CLI look names up here (they never import the modules that define them).

    from structseq.registry import register_arch

    @register_arch("gru", config=GRUConfig)
    def build_gru(cfg, vocabs, train_examples=None): ...

A lookup imports only what it needs, so that validating a config imports the packages the config names and no
others: first every plugin module named in the environment variable STRUCTSEQ_PLUGINS (module names or .py
files, separated by commas); then, for one name, the built-in module whose source registers that name
(`_index`: read, not imported); listing a kind's names (or a name found nowhere else) imports every module of
the kind's own packages (`Registry.packages`, all of them `BUILTIN`). A name registered twice is an error
naming both definitions.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import os
import pkgutil
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from structseq.errors import ConfigError, StructseqError

T = TypeVar("T")

#: packages (every module of each) and modules that define the built-in models, heads, tasks, metrics, lexicon
#: learners, datasets, optimisers, schedules and decoding strategies
BUILTIN = (
    "structseq.models",
    "structseq.tasks",
    "structseq.metrics",
    "structseq.lexicon",
    "structseq.data",
    "structseq.train.optim",
    "structseq.decode.strategies",
    "structseq.decode.processors",
)
PLUGINS_ENV = "STRUCTSEQ_PLUGINS"
#: the end of an unknown-name error: where names come from besides the built-in packages
PLUGIN_HINT = f" (plugin modules are loaded from ${PLUGINS_ENV})"

_discovered = False  # the plugins are imported (the first lookup of any kind does it)
_failure: Exception | None = None  # what failed to import: raised again by every later lookup
_imported: set[str] = set()  # the built-in packages (and modules) every module of which is imported


class RegistryError(StructseqError):
    """A name registered twice, or a registration that breaks its kind's contract."""


def _where(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return f"{module}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


class Registry(Generic[T]):
    """Names of one kind (`model`, `task`, ...) and what each stands for. `key` is the config key that names
    them, for error messages (e.g. `model.arch`); `packages` the built-in packages (or modules) whose modules
    register them, `decorator` the name of the function they register with (`register_arch`): a lookup of one
    name imports the module that registers it, a listing every module of `packages` (module docstring)."""

    def __init__(self, kind: str, key: str, packages: tuple[str, ...] = (), decorator: str | None = None):
        self.kind, self.key = kind, key
        self.packages, self.decorator = tuple(packages), decorator
        self._items: dict[str, T] = {}

    def add(self, name: str, item: T) -> T:
        if not isinstance(name, str) or not name:
            raise RegistryError(f"a {self.kind} needs a non-empty name, got {name!r}")
        if name in self._items:
            raise RegistryError(
                f"{self.kind} '{name}' is registered twice: by {_where(self._items[name])} and by "
                f"{_where(item)}; choose another name"
            )
        self._items[name] = item
        return item

    def remove(self, name: str) -> None:
        """Forget `name` (tests that register a throw-away extension clean up with this)."""
        self._items.pop(name, None)

    def _find(self, name: object) -> bool:
        """Whether `name` is registered, once the plugins, the built-in module whose source registers it
        (`_index`) and, when neither did, every module of the kind's packages are imported."""
        _load_plugins()
        module = _index().get((self.decorator, name)) if isinstance(name, str) else None
        if module is not None:
            _import((module,), every_module=False)
        if name not in self._items:
            self.discover()
        return name in self._items

    def discover(self) -> None:
        """Import the plugins and every module of the kind's packages: all of its names registered."""
        _load_plugins()
        _import(self.packages)

    def get(self, name: str) -> T:
        """The entry for `name`, or a ConfigError naming the config key and the choices."""
        if not self._find(name):
            raise ConfigError(
                f"'{self.key}': unknown {self.kind} '{name}'; choices: {', '.join(sorted(self._items))}" + PLUGIN_HINT
            )
        return self._items[name]

    __getitem__ = get

    def check_names(self, names: Iterable[str], key: str | None = None) -> None:
        """A ConfigError naming `key` (default: the registry's config key), every name of `names` not registered
        and the choices, unless all are: the one wording of a list of names (`task.metrics`, `--metric`)."""
        unknown = [n for n in names if not self._find(n)]
        if unknown:
            raise ConfigError(
                f"'{key or self.key}': no registered {self.kind} {', '.join(map(repr, unknown))}; choices: "
                + ", ".join(sorted(self._items))
                + PLUGIN_HINT
            )

    def __contains__(self, name: object) -> bool:
        return self._find(name)

    def __iter__(self) -> Iterator[str]:
        self.discover()
        return iter(list(self._items))

    def __len__(self) -> int:
        self.discover()
        return len(self._items)

    def items(self) -> list[tuple[str, T]]:
        self.discover()
        return list(self._items.items())

    def names(self) -> list[str]:
        return list(self)

    def table(self) -> dict[str, T]:
        """The live name -> entry dict, discovered (a test may patch an entry in it for its duration)."""
        self.discover()
        return self._items


# ---------------------------------------------------------------- the kinds


#: an architecture's capability: its training step compiles into a few whole graphs, one per batch shape, with
#: no graph break, so `train.compile: auto` compiles it on CUDA (`structseq.train.compiled`); the LSTM declares
#: it not (it breaks its graph at packing and cuDNN's LSTM: 41 breaks, slower than eager)
COMPILES = "compiles"
#: an architecture's capability: it decodes category trees (the supertagger's tree decoder), so its task predicts,
#: scores and formats trees (`structseq.tasks.supertag`)
TREES = "trees"
#: an architecture's capability: its model is a Hugging Face model, so `structseq export` writes a Hugging Face folder
HF_EXPORT = "huggingface-export"
#: an architecture's capability: its config has the Transformer's keys and its model the layout a stock Marian model
#: holds (`structseq.export_marian`)
MARIAN_LAYOUT = "marian-layout"


@dataclass(frozen=True)
class Arch:
    """A model family: its `model` schema, its builder `(config, vocabs, train_examples) -> Model`, the
    tasks whose batches it reads, whether it hands attention weights to an output head (copy and lexical
    heads need them), and its capabilities, which generic code asks for instead of testing names: `TREES`
    (the supertagger decodes category trees), `HF_EXPORT` (`structseq export` writes a Hugging Face
    folder), `MARIAN_LAYOUT` (a Transformer's layout, exported as Marian), `COMPILES` (its training step compiles into whole graphs, one per batch shape: `train.compile:
    auto` compiles only these)."""

    name: str
    config: type
    build: Callable[..., Any]
    tasks: tuple[str, ...] = ("seq2seq",)
    attention: bool = False
    capabilities: frozenset[str] = frozenset()

    def check_serves(self, task: str) -> None:
        """A ConfigError naming the archs that do serve `task`, unless this one does: the one statement of the
        rule (the config loader checks it; `build_model(..., task=)` states it for a config built by hand)."""
        if task not in self.tasks:
            serving = [name for name, a in ARCHS.items() if task in a.tasks]
            raise ConfigError(
                f"'model.arch': '{self.name}' does not serve task '{task}' (it serves "
                f"{', '.join(self.tasks)}); architectures for '{task}': {', '.join(serving)}"
            )


@dataclass(frozen=True)
class Head:
    """An output head: its `model.head` schema, its builder `(config, d_model, src_vocab, tgt_vocab,
    train_examples) -> nn.Module`, and whether it reads the model's attention weights."""

    name: str
    config: type
    build: Callable[..., Any]
    needs_attention: bool = False


@dataclass(frozen=True)
class Metric:
    """A metric: `compute(inputs) -> {score, signature, ...} | None` (None: it does not apply to these
    inputs), the scale of its score (`fraction` in [0, 1] or `percent` in [0, 100]), and whether higher
    is better (for checkpoint selection)."""

    name: str
    compute: Callable[..., Any]
    scale: str = "fraction"
    higher_is_better: bool = True
    doc: str = field(default="", compare=False)


ARCHS: Registry[Arch] = Registry("model", "model.arch", ("structseq.models",), "register_arch")
HEADS: Registry[Head] = Registry("head", "model.head.type", ("structseq.models",), "register_head")
TASKS: Registry[type] = Registry("task", "task.type", ("structseq.tasks",), "register_task")
METRICS: Registry[Metric] = Registry("metric", "metric", ("structseq.metrics", "structseq.tasks"), "register_metric")
LEARNERS: Registry[Callable[..., Any]] = Registry(
    "lexicon learner", "model.head.lexicon", ("structseq.lexicon",), "register_learner"
)
OPTIMIZERS: Registry[Callable[..., Any]] = Registry(
    "optimizer", "optim.optimizer", ("structseq.train.optim",), "register_optimizer"
)
SCHEDULES: Registry[Callable[..., Any]] = Registry(
    "schedule", "optim.schedule", ("structseq.train.optim",), "register_schedule"
)
STRATEGIES: Registry[type] = Registry(
    "decoding strategy", "decode.strategy", ("structseq.decode.strategies",), "register_strategy"
)


@dataclass(frozen=True)
class Processor:
    """A per-step logits processor: its settings (`options`, a dataclass of `structseq.fields.option`s, the
    section `decode.processors.NAME`), its builder `(options, space) -> LogitsProcessor` (`space`: the model's
    `structseq.decode.processors.OutputSpace`) and its `rank`: where it applies among the configured ones (the
    order of transformers' `generate`, so the same settings give the same outputs)."""

    name: str
    options: type
    build: Callable[..., Any]
    rank: int
    doc: str = field(default="", compare=False)


PROCESSORS: Registry[Processor] = Registry(
    "logits processor", "decode.processors", ("structseq.decode.processors",), "register_processor"
)


@dataclass(frozen=True)
class Grammar:
    """A language every output must belong to (`decode.grammar`): lark grammar text (`start` its start rule)
    over the output words, which `structseq.decode.processors.grammar` turns into a per-step constraint."""

    name: str
    text: str
    start: str = "start"
    doc: str = field(default="", compare=False)


GRAMMARS: Registry[Grammar] = Registry(
    "grammar", "decode.grammar", ("structseq.decode.processors",), "register_grammar"
)


def register_arch(
    name: str,
    *,
    config: type,
    tasks: tuple[str, ...] = ("seq2seq",),
    attention: bool = False,
    capabilities: tuple[str, ...] = (),
):
    """Decorator of a model builder: `arch: NAME` in a config builds with it (`Arch` says what each field means)."""

    def deco(build):
        ARCHS.add(name, Arch(name, config, build, tuple(tasks), attention, frozenset(capabilities)))
        return build

    return deco


def register_head(name: str, *, config: type, needs_attention: bool = False):
    """Decorator of a head builder: `model.head.type: NAME` builds with it."""

    def deco(build):
        HEADS.add(name, Head(name, config, build, needs_attention))
        return build

    return deco


def _named_class(registry: Registry, name: str):
    """A class decorator that names the class and registers it."""

    def deco(cls):
        cls.name = name
        registry.add(name, cls)
        return cls

    return deco


def register_task(name: str):
    """Class decorator of a `Task` subclass: `task: NAME` picks it."""
    return _named_class(TASKS, name)


SCALES = ("fraction", "percent")


def register_metric(name: str, *, scale: str = "fraction", higher_is_better: bool = True):
    """Decorator of a metric function; tasks and datasets name the metrics they report."""
    if scale not in SCALES:
        raise RegistryError(f"metric '{name}': scale must be one of {', '.join(SCALES)}, not {scale!r}")

    def deco(fn):
        METRICS.add(name, Metric(name, fn, scale, higher_is_better, (fn.__doc__ or "").strip()))
        return fn

    return deco


def register_strategy(name: str, options: type | None = None):
    """Class decorator of a `structseq.decode.strategies.Strategy`: `decode.strategy: NAME` picks it.
    `options`: a dataclass of `structseq.fields.option`s, the strategy's own `decode` keys (validated and listed
    like every key; refused under another strategy), read from `settings.options`."""

    def deco(cls):
        cls.options = options
        return _named_class(STRATEGIES, name)(cls)

    return deco


def register_processor(name: str, *, options: type, rank: int):
    """Decorator of a processor builder `(options, space) -> LogitsProcessor`: `decode.processors.NAME: {...its
    options}` adds it to every search (`structseq.decode.processors`)."""

    def deco(build):
        PROCESSORS.add(name, Processor(name, options, build, rank, (build.__doc__ or "").strip()))
        return build

    return deco


def register_grammar(name: str, text: str, *, start: str = "start", doc: str = "") -> Grammar:
    """Register lark grammar `text` (the output words as its terminals' input, separated by spaces) as
    `decode.grammar: NAME`."""
    return GRAMMARS.add(name, Grammar(name, text, start, doc))


def register_learner(name: str):
    """Decorator of a lexicon learner `(pairs, **settings) -> Lexicon`: `model.head.lexicon: NAME`."""

    def deco(fn):
        LEARNERS.add(name, fn)
        return fn

    return deco


def register_optimizer(name: str):
    """Decorator of an optimiser builder `(optim config, param groups) -> torch.optim.Optimizer`:
    `optim.optimizer: NAME`."""

    def deco(fn):
        OPTIMIZERS.add(name, fn)
        return fn

    return deco


def register_schedule(name: str):
    """Decorator of a schedule `(optim config, model width, max_steps) -> (step -> lr factor)`: `optim.schedule:
    NAME`."""

    def deco(fn):
        SCHEDULES.add(name, fn)
        return fn

    return deco


# ---------------------------------------------------------------- discovery


def _import_plugin(spec: str) -> None:
    if spec.endswith(".py"):
        path = Path(spec).resolve()
        name = f"structseq_plugin_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
        if name in sys.modules:
            return
        if not path.is_file():
            raise ConfigError(f"${PLUGINS_ENV}: plugin file not found: {spec}")
        module_spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        try:
            module_spec.loader.exec_module(module)
        except Exception as e:
            del sys.modules[name]
            raise ConfigError(f"${PLUGINS_ENV}: plugin {spec} failed to load: {type(e).__name__}: {e}") from e
        return
    try:
        importlib.import_module(spec)
    except ModuleNotFoundError as e:
        raise ConfigError(f"${PLUGINS_ENV}: cannot import plugin module '{spec}' ({e})") from None
    except Exception as e:  # whatever the plugin's own code raises, as for a .py path
        raise ConfigError(f"${PLUGINS_ENV}: plugin {spec} failed to load: {type(e).__name__}: {e}") from e


def _load_plugins() -> None:
    """Import the plugins named in $STRUCTSEQ_PLUGINS, once; a failure is raised again on every later lookup (a
    retry would re-register what ran before it)."""
    global _discovered, _failure
    if _failure is not None:
        raise _failure
    if _discovered:
        return
    _discovered = True  # a plugin's own lookups see what is registered so far
    try:
        for spec in filter(None, (s.strip() for s in os.environ.get(PLUGINS_ENV, "").split(","))):
            _import_plugin(spec)
    except Exception as e:
        _failure = e
        raise


def _import(names: Iterable[str], every_module: bool = True) -> None:
    """Import each module or package of `names` (`every_module`: and every module of a package), once; a failure
    is raised again on every later lookup."""
    global _failure
    if _failure is not None:
        raise _failure
    for name in names:
        if name in _imported:
            continue
        if every_module:
            _imported.add(name)  # a module's own lookups during discovery see what is registered so far
        try:
            module = importlib.import_module(name)
            if every_module:
                for info in pkgutil.iter_modules(getattr(module, "__path__", ()), name + "."):
                    importlib.import_module(info.name)
        except Exception as e:
            _failure = e
            raise


#: a registration by a literal name in a module's source: `@register_arch("transformer", ...)`
_REGISTERS = re.compile(r"""\b(register_\w+)\(\s*["']([^"'\s]+)["']""")


@functools.cache
def _index() -> dict[tuple[str, str], str]:
    """(decorator, name) -> the built-in module whose source registers `name` with `decorator` by a literal, read
    from the source files of `BUILTIN` without importing them: how a lookup of one name imports only its module.
    A name registered by a computed string (a grammar per file, a family of datasets or metrics) is found by
    importing its kind's packages."""
    root = Path(__file__).resolve().parent
    out: dict[tuple[str, str], str] = {}
    for package in BUILTIN:
        path = root.joinpath(*package.split(".")[1:])
        if path.is_dir():
            files = [(f, package if f.name == "__init__.py" else f"{package}.{f.stem}") for f in path.glob("*.py")]
            files += [(f, f"{package}.{f.parent.name}") for f in path.glob("*/__init__.py")]
        else:
            files = [(path.with_suffix(".py"), package)]
        for file, module in sorted(files):
            for decorator, name in _REGISTERS.findall(file.read_text(encoding="utf-8")):
                out.setdefault((decorator, name), module)
    return out


def discover() -> None:
    """Import every module of the built-in packages and the plugins, once, so that every registration has run."""
    _import(BUILTIN)
    _load_plugins()
