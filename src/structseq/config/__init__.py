"""The run configuration: the shared sections (`data`, `optim`, `train`, `decode`), loaded from YAML with
`key=value` overrides and validated.

A config file has sections `task`, `data`, `model`, `optim`, `train`, `decode`. Some sections pick their
schema by a key from a registry (`structseq.registry`): `task` by `type`, `model` by `arch`, `model.head` by
`type`; so each accepts only its own keys (`task: seq2seq` is short for `task: {type: seq2seq}`). Those
schemas live beside their task, model or head. An unknown key or a value of the wrong type or out of its
bounds raises ConfigError naming the dotted key; so do the checks across keys, the task and the model
(`check_config`), which `config_from_dict` runs on every config it builds. Validating a config imports the
modules of the task, model, head and processors it names and no others (`structseq.registry`).
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structseq.config.decode import check_decode, decode_schema
from structseq.errors import ConfigError, DataError
from structseq.fields import apply_overrides as _apply
from structseq.fields import build_section, chosen, declared, entries, option, path_keys
from structseq.registry import (
    ARCHS,
    GRAMMARS,
    HEADS,
    METRICS,
    OPTIMIZERS,
    PLUGIN_HINT,
    PROCESSORS,
    SCHEDULES,
    STRATEGIES,
    TASKS,
)
from structseq.textio import read_text
from structseq.yamlio import load_yaml

#: the devices a run may name (`train.device`, `--device`): the pattern and how an error lists them
DEVICES = (r"auto|cpu|cuda(:\d+)?", "auto, cpu, cuda, cuda:N")


def _bleu_tokenizers() -> tuple[str, ...]:
    """The tokenizers sacrebleu knows."""
    from sacrebleu.metrics.bleu import _TOKENIZERS

    return tuple(_TOKENIZERS)


@dataclass
class DataConfig:
    dataset: str = option("scan-simple", "registered dataset name (see `structseq data list`) or 'files'")
    train: str = option("train", "training split name, or a file (TSV / SCAN / 'SRC,TGT') when dataset is 'files'")
    valid: str | None = option(
        None, "validation split, file or NAME:SPLIT of any registered dataset; null holds out `valid_fraction` of train"
    )
    valid_fraction: float = option(0.01, "fraction of train held out for validation when `valid` is null", gt=0, lt=1)
    holdout_seed: int | None = option(
        1,
        "the data seed: draws that held-out sample, apart from train.seed, so the seeds of one config share their "
        "validation sample and vocabularies (and ensemble); null: train.seed (how runs before it held out)",
        ge=0,
    )
    test: list[str] = option(
        ["test"], "splits, files or NAME:SPLIT (e.g. cognition:cg-test) that `evaluate` reports (one string or a list)"
    )
    columns: list[str] | None = option(
        None,
        "names of a TSV file's columns (source, target, context, category; other "
        "names go to the example's meta; '-' drops one); null: the file's header "
        "line, else source, target",
    )
    fields: dict[str, str] | None = option(
        None,
        "JSON Lines (.jsonl) files: each example field and the JSON key it "
        "reads, e.g. {source: utterance, target: plan} (fields: source, "
        "target, context, category; another name goes to the example's "
        "meta; '-': KEY,KEY... drops those keys); every key of a line must be mapped and every mapped key "
        "present; null: the keys are the field names",
    )
    bleu_tokenize: str | None = option(
        None,
        "sacrebleu tokenizer (13a, zh, intl, char, none, ...); null: the dataset's "
        "declared one (zh for Chinese targets), else 13a",
        choices=_bleu_tokenizers,
    )
    max_train_examples: int | None = option(None, "use only the first N training examples (quick runs)", ge=1)
    max_length: int | None = option(
        None,
        "maximum tokens of an example's source or target (null: the model's "
        "model.max_length, 1024 by default); longer training examples are skipped "
        "(or an error, see too_long), longer evaluation or prediction input is an "
        "error naming its line",
        ge=1,
    )
    too_long: str = option(
        "skip",
        "training examples over max_length (or a context over "
        "model.max_context_length): skip (counted, with a warning) | error",
        choices=("skip", "error"),
    )
    min_freq: int = option(1, "minimum token count to enter a vocabulary", ge=1)
    share_vocab: bool = option(False, "one vocabulary for source and target (needed to tie all embeddings)")
    extra_target_tokens: list[str] = option(
        [],
        "tokens the target vocabulary holds even if no training example has them (after the "
        "training tokens), e.g. the lexicon paper's Colors outputs PURPLE and PINK, which give "
        "mutual exclusivity its unmapped targets",
    )

    def __post_init__(self):
        """`fields`: identifiers to JSON keys, `source` among them, no key read twice; `extra_target_tokens`: tokens."""
        for t in self.extra_target_tokens:
            if not isinstance(t, str) or not t or t != "".join(t.split()) or (t[0] == "<" and t[-1] == ">"):
                raise ConfigError(
                    f"'data.extra_target_tokens': {t!r} is not a token (a non-empty string without spaces, "
                    "not in angle brackets as the reserved tokens)"
                )
        f = self.fields
        if f is None:
            return
        if not isinstance(f, dict) or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in f.items()):
            raise ConfigError(
                f"'data.fields' must map example fields to JSON keys (non-empty strings), e.g. "
                f"{{source: utterance, target: plan}}; got {f!r}"
            )
        bad = [k for k in f if not k.isidentifier()]
        if bad:
            raise ConfigError(
                f"'data.fields': {bad[0]!r} is not a field name (source, target, context, category, or "
                "an identifier for the example's meta)"
            )
        if "source" not in f:
            raise ConfigError(f"'data.fields' must map 'source' (it maps {', '.join(f)})")
        twice = sorted({v for v in f.values() if list(f.values()).count(v) > 1})
        if twice:
            raise ConfigError(f"'data.fields': JSON key {twice[0]!r} is read by more than one field")


@dataclass
class OptimConfig:
    optimizer: str = option("adam", "adam | adamw (or a registered optimiser)", choices=OPTIMIZERS)
    lr: float = option(5e-4, "peak learning rate (Noam: the scale factor)", gt=0)
    betas: list[float] = option([0.9, 0.98], "Adam betas", ge=0, lt=1, length=2)
    eps: float = option(1e-8, "Adam epsilon", gt=0)
    weight_decay: float = option(0.0, "weight decay (decoupled for adamw)", ge=0)
    schedule: str = option(
        "inverse_sqrt",
        "constant | noam | inverse_sqrt | cosine (or a registered schedule)",
        choices=SCHEDULES,
    )
    warmup: int = option(4000, "warm-up updates", ge=0)
    min_lr: float = option(0.0, "final learning rate of the cosine schedule", ge=0)
    clip_norm: float = option(0.0, "gradient-norm clipping threshold (0 = off)", ge=0)
    label_smoothing: float = option(0.0, "label smoothing epsilon", ge=0, lt=1)
    max_tokens: int | None = option(4096, "token budget per batch (padded, fairseq's rule)", ge=1)
    batch_size: int | None = option(None, "sentences per batch (with or without max_tokens)", ge=1)
    accumulate: int = option(1, "batches per update (gradient accumulation)", ge=1)
    group_by_length: bool = option(
        True,
        "batches of similar lengths (sorted, random tie-breaks, batch order shuffled); false: "
        "each epoch a fresh random permutation cut into batches in order (a DataLoader's "
        "shuffle=True, as the lexicon paper's reference code)",
    )
    num_buckets: int = option(
        0,
        "length buckets (fairseq's --num-buckets; 0 = off): the training lengths are cut into N buckets at "
        "their quantiles, each epoch examples are shuffled within their bucket and cut into batches of one "
        "bucket (batches mix examples of similar length, duplicates too); replaces group_by_length",
        ge=0,
    )
    static_shapes: bool = option(
        False,
        "with num_buckets: pad every batch to its bucket's length (a source to its bucket's longest source) and "
        "fixed row count (filler rows predict nothing): at most num_buckets batch shapes, for train.compile's "
        "captured steps; dropout masks are drawn over the padded shape, so a seeded run with dropout changes",
    )
    sentence_avg: bool = option(
        False,
        "normalise each update's loss by its sentences instead of its target tokens "
        "(fairseq's --sentence-avg; the lexicon paper's reference code)",
    )


@dataclass
class TrainConfig:
    max_steps: int = option(10000, "number of updates", ge=1)
    valid_every: int = option(500, "validate (and checkpoint) every N updates", ge=0)
    save_every: int = option(0, "also save the last checkpoint every N updates (0 = only at validation)", ge=0)
    valid_metric: str = option(
        "loss",
        "the validation metric that picks checkpoints/best.pt and drives early "
        "stopping: any metric the task validates (seq2seq: loss | exact_match | "
        "bleu; supertag: loss | accuracy)",
    )
    patience: int = option(0, "stop after N validations without improvement (0 = never)", ge=0)
    log_every: int = option(10, "write a metrics line every N updates", ge=1)
    seed: int = option(1, "random seed (data order, initialisation, dropout)", ge=0, le=2**32 - 1)
    threads: int = option(
        0, "torch CPU threads (0: the CPUs other processes leave free, at least 1, at most torch's default)", ge=0
    )
    eval_checkpoint: str = option(
        "best", "checkpoint `evaluate` uses by default: best | last (the papers report last)", choices=("best", "last")
    )
    device: str = option(
        "auto",
        "auto (CUDA when available) | cpu | cuda | cuda:N",
        pattern=DEVICES,
    )
    bf16: bool = option(False, "bfloat16 autocast on GPUs that support it (parameters and optimiser stay float32)")
    tf32: bool = option(True, "TF32 tensor cores for float32 matmuls and convolutions on CUDA (no effect on a CPU)")
    compile: str | bool = option(
        "auto",
        "torch.compile the training step (forward and backward; CUDA: mode reduce-overhead, CUDA graphs per batch "
        "shape): on (true) | off (false) | auto (on for CUDA with optim.static_shapes and optim.accumulate 1, for "
        "architectures that declare it pays: Transformer, Dangle, R-Dangle; else off)",
        choices=("auto", "on", "off", "true", "false"),
    )
    pin_memory: bool = option(
        True,
        "on CUDA, build each training batch in page-locked host memory, so that its copy to the GPU does not make "
        "the host wait (false: ordinary memory; no effect on a CPU)",
    )
    compile_backend: str = option(
        "inductor",
        "torch.compile backend: inductor (kernels generated) | aot_eager | eager (captured, not generated: tests)",
        choices=("inductor", "aot_eager", "eager"),
    )
    keep_last: int = option(
        0,
        "also keep the last N periodic checkpoints as checkpoints/step{K}.pt (written at each "
        "validation or save_every save; older ones deleted; 0 = none), for `structseq average`",
        ge=0,
    )
    tensorboard: bool = option(
        False,
        "also write TensorBoard event files to RUN/tensorboard (loss, lr, tokens/s, "
        "gradient norm when clipping, every validation metric); needs the `tensorboard` "
        "package (pip install 'structseq[logging]')",
    )
    wandb: bool = option(
        False,
        "also log to Weights & Biases (needs the `wandb` package; WANDB_MODE=offline logs "
        "without network, WANDB_PROJECT names the project, default structseq)",
    )
    init_from: str | None = option(
        None,
        "initialise every parameter from this checkpoint (a .pt file, or a run directory: "
        "its best, else its last), strictly (same keys and shapes; a context attention "
        "the checkpoint lacks starts as its layer's source attention), with its "
        "vocabularies and task state; optimiser and schedule start afresh (two-phase "
        "training)",
    )

    def __post_init__(self):
        """`compile`: YAML reads on / off / true / false as booleans; the setting is kept as on | off | auto."""
        self.compile = {True: "on", False: "off", "true": "on", "false": "off"}.get(self.compile, self.compile)


@dataclass
class DecodeConfig:
    beam: int = option(1, "beam size (1 = greedy)", ge=1)
    max_len_a: float = option(2.0, "maximum output length a * |x| + b", ge=0)
    max_len_b: int = option(10, "maximum output length a * |x| + b", ge=0)
    len_penalty: float = option(1.0, "beam ranking by score / length ** len_penalty", ge=0)
    early_stopping: bool | str = option(
        False,
        "when a sentence's beam stops, as transformers' early_stopping: true (K finished), false (K finished and "
        "the best open score / its length ** len_penalty cannot beat them) or never (exact: at no length)",
        choices=("never",),
    )
    strategy: str | None = option(
        None,
        "a registered decoding strategy that fits the model (greedy, beam, sampling; a supertagger's tree-greedy, "
        "tree-beam, tag-kbest; or a plugin's: structseq.decode.strategies); null: greedy at beam 1, else beam "
        "search (a tree's: tree-greedy, tree-beam)",
        choices=STRATEGIES,
    )
    batch_size: int = option(128, "sentences decoded together", ge=1)
    speedups: bool = option(
        True,
        "the search loop's speed-ups (structseq.decode.speedups: stable cache rows in beam search, no reorder while "
        "nothing moves); false: the plain loop, the same outputs and scores bit for bit",
    )
    processors: dict = entries(
        "processor",
        "per-step logits processors and their settings, e.g. {no_repeat_ngram: {size: 3}, top_k: {k: 5}}, applied "
        "to every search in transformers' order (`structseq.decode.processors`; docs/decoding.md)",
    )
    grammar: str | None = option(
        None,
        "a registered grammar every output must belong to (cogs, scan, a plugin's): each step allows only the "
        "tokens that keep the prefix viable, </s> only after a whole sentence (docs/decoding.md); null: none",
        choices=GRAMMARS,
    )


@dataclass
class TaskOptions:
    """Keys of the `task` section shared by every task (a task with keys of its own extends this)."""

    type: str = option("seq2seq", "the kind of problem (`structseq config --list` names them)")
    metrics: list[str] = option(
        [],
        "more registered metrics (plugins too; `structseq config --list`) that evaluate reports and "
        "train.valid_metric may name, computed on greedy outputs at each validation",
    )


#: sections that may be given as a name: `task: supertag`, `model: lstm`
SHORT_FORMS = {"task": "type", "model": "arch", "head": "type"}


@dataclass
class Config:
    task: Any = chosen(TaskOptions, "type", "task", "the kind of problem: {type: NAME, ...its keys}")
    data: DataConfig = field(default_factory=DataConfig)
    model: Any = chosen(
        lambda: ARCHS.get("transformer").config(), "arch", "model", "the model: {arch: NAME, ...its keys}"
    )
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(
        default_factory=lambda: decode_schema(DecodeConfig)(),
        metadata={
            "schema": lambda: decode_schema(DecodeConfig),
            "help": "decoding: shared keys and each strategy's own",
        },
    )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


class _Schemas(Mapping):
    """A registry's schemas by name, looked up one name at a time (`Registry.get`): validating a config imports
    the modules of the names it gives and no others (`structseq.registry`); listing them imports every one."""

    def __init__(self, registry, schema: Callable[[Any], type]):
        self.registry, self.schema = registry, schema

    def __contains__(self, name: object) -> bool:
        return name in self.registry

    def __getitem__(self, name: str) -> type:
        return self.schema(self.registry.get(name))

    def __iter__(self) -> Iterator[str]:
        return iter(self.registry)

    def __len__(self) -> int:
        return len(self.registry)


def schemas(kind: str) -> Mapping[str, type]:
    """The schemas a `chosen` section can pick from: `task` by type, `model` by arch, `head` by type; `entries`:
    a `processor`'s by name."""
    if kind == "task":
        return _Schemas(TASKS, lambda t: t.options_class)
    if kind == "model":
        return _Schemas(ARCHS, lambda a: a.config)
    if kind == "head":
        return _Schemas(HEADS, lambda h: h.config)
    if kind == "processor":
        return _Schemas(PROCESSORS, lambda p: p.options)
    raise ConfigError(f"no registry of {kind!r} schemas")


def apply_overrides(d: dict, overrides: list[str]) -> dict:
    """`section.key=value` overrides applied to a config dict (short forms such as `task: supertag` expanded)."""
    return _apply(d, overrides, SHORT_FORMS)


def config_from_dict(d: dict, *, saved: bool = False) -> Config:
    """Validate a nested dict. `saved`: a config written by an earlier version into a run (its keys that no
    longer apply to the chosen schemas, e.g. `gate` of a softmax head, are dropped; types still checked)."""
    if d is not None and not isinstance(d, dict):
        raise ConfigError(f"a config must be a mapping of sections, got {type(d).__name__}")
    d = dict(d or {})
    sections = [f.name for f in dataclasses.fields(Config)]
    for k in d:
        if k not in sections:
            raise ConfigError(f"unknown key '{k}'; valid sections: {', '.join(sections)}")
    if saved and isinstance(d.get("data"), dict) and "holdout_seed" not in d["data"]:
        d["data"] = {**d["data"], "holdout_seed": None}  # a run from before the data seed held out by train.seed
    cfg = build_section(Config, d, "", schemas, lenient=saved, hint=PLUGIN_HINT)
    check_config(cfg)
    return cfg


# ---------------------------------------------------------------- the checks across keys
# (those that involve more than one key, or the task, the model and the registries: `config_from_dict` runs them
# on every config it builds)


def valid_metric_names(task: type, cfg) -> list[str]:
    """What train.valid_metric may name: the task's validation metrics (`Task.valid_metrics`) and the registered
    metrics its config adds (`task.metrics`)."""
    return list(dict.fromkeys([*task.valid_metrics, *cfg.task.metrics]))


def check_config(cfg) -> None:
    """The checks that involve more than one key, or the task: a ConfigError naming the keys."""
    task, arch = TASKS.get(cfg.task.type), ARCHS.get(cfg.model.arch)
    METRICS.check_names(cfg.task.metrics, "task.metrics")
    metrics = valid_metric_names(task, cfg)
    if cfg.train.valid_metric not in metrics:
        raise ConfigError(
            f"'train.valid_metric': '{cfg.train.valid_metric}' is not a metric of task "
            f"'{cfg.task.type}'; choices: {', '.join(metrics)}"
        )
    arch.check_serves(task.name)
    check_decode(cfg.decode)
    head = declared(cfg.model, "head")
    if head is not None and HEADS.get(head[1].type).needs_attention and not arch.attention:
        raise ConfigError(
            f"'model.head.type': a {head[1].type} head reads attention weights, which model "
            f"'{arch.name}' does not provide; use a softmax head"
        )
    if cfg.optim.max_tokens is None and cfg.optim.batch_size is None:
        raise ConfigError(
            "'optim.max_tokens' and 'optim.batch_size' are both null: set at least one "
            "(a token budget, sentences per batch, or both)"
        )
    if cfg.optim.static_shapes and not cfg.optim.num_buckets:
        raise ConfigError("'optim.static_shapes' pads batches to their length bucket: set 'optim.num_buckets' > 0")
    if cfg.optim.min_lr > cfg.optim.lr:
        raise ConfigError(f"'optim.min_lr' ({cfg.optim.min_lr}) must not exceed 'optim.lr' ({cfg.optim.lr})")
    if cfg.train.patience and not cfg.train.valid_every:
        raise ConfigError("'train.patience' needs validation: set 'train.valid_every' > 0, or patience 0")
    if cfg.decode.max_len_a == 0 and cfg.decode.max_len_b == 0:
        raise ConfigError(
            "'decode.max_len_a' and 'decode.max_len_b' are both 0: outputs could have no tokens; "
            "set max_len_b >= 1 or max_len_a > 0"
        )
    _check_lengths(cfg)
    columns = [c for c in cfg.data.columns or () if c != "-"]
    twice = sorted({c for c in columns if columns.count(c) > 1})
    if twice:
        raise ConfigError(
            f"'data.columns': {', '.join(map(repr, twice))} named twice; each column needs its own name ('-' drops one)"
        )


def _check_lengths(cfg) -> None:
    """`data.max_length` and the task's context trim (its field declared `context_trim`) within the longest input
    and context the model takes (its fields declared `max_length`, `max_context_length`)."""
    length = ("data.max_length", cfg.data.max_length) if cfg.data.max_length is not None else None
    for given, role, what in (
        (length, "max_length", "input"),
        (declared(cfg.task, "context_trim", "task."), "max_context_length", "context"),
    ):
        most = declared(cfg.model, role, "model.")
        if given is not None and most is not None and given[1] > most[1]:
            raise ConfigError(
                f"'{given[0]}' ({given[1]}) exceeds '{most[0]}' ({most[1]}), the longest {what} the model takes: "
                f"lower it, or raise {most[0]}"
            )


def _with_values(cfg: Config, values: dict[str, str], saved: bool) -> Config:
    d = cfg.to_dict()
    for key, value in values.items():
        *sections, last = key.split(".")
        node = d
        for name in sections:
            node = node[name]
        node[last] = value
    return config_from_dict(d, saved=saved)


def absolute_paths(cfg: Config) -> Config:
    """`cfg` with each relative local folder (`option(..., path=True)`: `model.pretrained`, ...) made absolute
    (from the current directory, `~` expanded), as a new run stores it: evaluating the run from another
    directory then finds the same folder. Not validated again: the absolute path of a validated folder is the
    same folder (a command validates its config once)."""
    values = {
        k: os.path.abspath(os.path.expanduser(v))
        for k, v in path_keys(cfg).items()
        if isinstance(v, str) and v and not os.path.isabs(os.path.expanduser(v))
    }
    if not values:
        return cfg
    out = copy.deepcopy(cfg)
    for key, value in values.items():
        *sections, last = key.split(".")
        node = out
        for name in sections:
            node = getattr(node, name)
        setattr(node, last, value)
    return out


def moved_paths(cfg: Config, items: Sequence[str], where: object) -> Config:
    """A trained run's saved config with its local folders moved: `KEY=DIR` for a key declared
    `option(..., path=True)` (`--set model.pretrained=NEWDIR` when the base folder moved; the task still checks
    the folder's content hash). Any other key is a ConfigError naming it and `where`."""
    keys = path_keys(cfg)
    values = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or key not in keys or not keys[key] or not value:
            allowed = ", ".join(k for k, v in keys.items() if v) or "none"
            raise ConfigError(
                f"--set {item}: {where} can only be pointed at a moved folder (KEY=DIR for {allowed}) "
                "besides decode.KEY=VALUE"
            )
        values[key] = os.path.abspath(os.path.expanduser(value))
    return _with_values(cfg, values, saved=True)


def read_config_file(path: str | Path) -> dict:
    """A YAML (or JSON) config file as a dict (strict UTF-8, a key given twice is an error); every problem
    is a ConfigError naming the file and the line."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory, expected a config file")
    if not path.is_file():
        raise ConfigError(f"config file not found: {path}")
    try:
        text = read_text(path)
    except DataError as e:
        raise ConfigError(str(e)) from None
    raw = load_yaml(text, path)
    if raw is None:
        raise ConfigError(
            f"{path}: empty config file (no sections); write at least the data and model "
            "sections, or `{}` for every default"
        )
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections, found {type(raw).__name__}")
    return raw


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> Config:
    """Read a config file, apply overrides, validate every value. Every problem is a ConfigError naming
    the file and the key or line."""
    raw = read_config_file(path) if path is not None else {}
    try:
        return config_from_dict(apply_overrides(raw, list(overrides)))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}" if path is not None else str(e)) from None
