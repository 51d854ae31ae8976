"""Typed configuration: dataclasses with help text, loaded from YAML with `key=value` overrides.

A config file has sections `task`, `data`, `model`, `optim`, `train`, `decode`. Some sections pick their
schema by a key: `task` by `type` (`structseq.tasks.TASKS`), `model` by `arch` (the architecture registry,
`structseq.models.registry.ARCHS`), `model.head` by `type` (`HEAD_CONFIGS`); so each accepts only its own
keys (`task: seq2seq` is short for `task: {type: seq2seq}`). An unknown key or a value of the wrong type
raises ConfigError naming the dotted key.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structseq.errors import ConfigError


def _bleu_tokenizers() -> tuple[str, ...]:
    """The tokenizers sacrebleu knows."""
    from sacrebleu.metrics.bleu import _TOKENIZERS

    return tuple(_TOKENIZERS)


def _f(default, help: str, *, ge=None, gt=None, le=None, lt=None, choices=None, length=None, pattern=None, **kw):
    """A config field with its help text and the values it accepts, checked when a config is loaded:
    numbers (each item of a list) within `ge`/`gt`/`le`/`lt`, a string one of `choices` (a tuple, or a
    function returning one) or matching `pattern` (a pair: regular expression, its description), a list of
    `length` items. None (for `X | None` fields) is always valid."""
    limits = {k: v for k, v in dict(ge=ge, gt=gt, le=le, lt=lt, choices=choices, length=length,
                                    pattern=pattern).items() if v is not None}
    metadata = {"help": help, **limits}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=metadata, **kw)
    return field(default=default, metadata=metadata, **kw)


@dataclass
class DataConfig:
    dataset: str = _f("scan-simple", "registered dataset name (see `structseq data list`) or 'files'")
    train: str = _f("train", "training split name, or a file (TSV / SCAN / 'SRC,TGT') when dataset is 'files'")
    valid: str | None = _f(None, "validation split, file or NAME:SPLIT of any registered dataset; null holds out "
                                 "`valid_fraction` of train")
    valid_fraction: float = _f(0.01, "fraction of train held out for validation when `valid` is null", gt=0, lt=1)
    test: list[str] = _f(["test"], "splits, files or NAME:SPLIT (e.g. cognition:cg-test) that `evaluate` reports "
                                   "(one string or a list)")
    columns: list[str] | None = _f(None, "names of a TSV file's columns (source, target, context, category; other "
                                         "names go to the example's meta; '-' drops one); null: the file's header "
                                         "line, else source, target")
    bleu_tokenize: str | None = _f(None, "sacrebleu tokenizer (13a, zh, intl, char, none, ...); null: the dataset's "
                                         "declared one (zh for Chinese targets), else 13a", choices=_bleu_tokenizers)
    max_train_examples: int | None = _f(None, "use only the first N training examples (quick runs)", ge=1)
    max_length: int | None = _f(None, "maximum tokens of an example's source or target (null: no limit); longer "
                                      "training examples are skipped (or an error, see too_long), longer "
                                      "evaluation or prediction input is an error naming its line", ge=1)
    too_long: str = _f("skip", "training examples over max_length: skip (counted, with a warning) | error",
                       choices=("skip", "error"))
    min_freq: int = _f(1, "minimum token count to enter a vocabulary", ge=1)
    share_vocab: bool = _f(False, "one vocabulary for source and target (needed to tie all embeddings)")


# ---------------------------------------------------------------- output heads: one schema per `type`

@dataclass
class SoftmaxHeadConfig:
    type: str = _f("softmax", "output head: softmax | copy | lexical (lexical translation, Akyürek & Andreas 2021)")
    dropout: float = _f(0.0, "dropout on the features entering the output layer", ge=0, lt=1)


@dataclass
class CopyHeadConfig(SoftmaxHeadConfig):
    type: str = _f("copy", "output head: softmax | copy | lexical")
    gate: str = _f("learned", "gate: learned (paper: sigmoid(w.h)) | copy_token (reference code: the softmax "
                              "probability of an extra <copy> output)", choices=("learned", "copy_token"))


@dataclass
class LexicalHeadConfig(CopyHeadConfig):
    type: str = _f("lexical", "output head: softmax | copy | lexical")
    lexicon: str | None = _f(None, "a learner (simple | pmi | ibm1 | ibm2 | bayesian), learned from the training "
                                   "data, or a lexicon JSON file; null = no entries (copy + mutual exclusivity)")
    lexicon_settings: dict = _f({}, "keyword arguments of the lexicon learner, e.g. {epsilon: 3}")
    tau: float = _f(0.0, "0 = hard rows (argmax), > 0 = softmax(score / tau)", ge=0)
    init: str = _f("frozen", "frozen (fixed, tau = 0) | soft (fixed, tau > 0) | learned (trainable, initialised "
                             "from the lexicon) | uniform (trainable, every row uniform)",
                   choices=("frozen", "soft", "learned", "uniform"))
    mutual_exclusivity: bool = _f(True, "rows without entries spread over the targets no row maps to")
    ties: str = _f("alphabetical", "hard rows' tie rule: alphabetical | first_seen (first in the training pairs, "
                                   "source then target: the reference's COGS and SCAN order) | frequent (most "
                                   "frequent target: its Tatoeba order)",
                   choices=("alphabetical", "first_seen", "frequent"))


HEAD_CONFIGS: dict[str, type] = {"softmax": SoftmaxHeadConfig, "copy": CopyHeadConfig, "lexical": LexicalHeadConfig}
HeadConfig = LexicalHeadConfig  # every head key (for code that builds a head by hand)


def _head(help: str = "output head: {type: softmax | copy | lexical, ...}; each type has its own keys"):
    return field(default_factory=SoftmaxHeadConfig, metadata={"help": help, "choose": ("type", "head")})


# ---------------------------------------------------------------- model families (registered in models/registry.py)

@dataclass
class TransformerBlocksConfig:
    """Keys shared by every model built from Transformer blocks."""

    arch: str = _f("transformer", "model family (see `structseq.models.registry`)")
    d_model: int = _f(512, "model width", ge=1)
    n_heads: int = _f(4, "attention heads", ge=1)
    ffn_dim: int = _f(1024, "feed-forward inner width", ge=1)
    decoder_layers: int = _f(6, "decoder depth", ge=1)
    dropout: float = _f(0.3, "residual and embedding dropout", ge=0, lt=1)
    attention_dropout: float = _f(0.0, "dropout on attention weights", ge=0, lt=1)
    activation_dropout: float = _f(0.0, "dropout after the FFN activation", ge=0, lt=1)
    norm_first: bool = _f(False, "pre-norm (true) or post-norm (false)")
    positions: str = _f("sinusoidal", "sinusoidal (absolute) | relative (Huang et al. 2020 key+query form)",
                         choices=("sinusoidal", "relative"))
    max_relative: int = _f(16, "relative positions are clipped to +-(max_relative - 1)", ge=1)
    share_decoder_embeddings: bool = _f(False, "tie the target embedding and the output projection")
    share_all_embeddings: bool = _f(False, "also tie source and target embeddings (needs data.share_vocab)")
    head: Any = _head()


@dataclass
class TransformerConfig(TransformerBlocksConfig):
    encoder_layers: int = _f(6, "encoder depth", ge=1)


@dataclass
class LSTMConfig:
    arch: str = _f("lstm", "model family")
    embed_dim: int = _f(512, "embedding width", ge=1)
    hidden_dim: int = _f(512, "LSTM width", ge=1)
    layers: int = _f(2, "LSTM depth (encoder and decoder)", ge=1)
    dropout: float = _f(0.4, "dropout on embeddings, between layers and on the combined vector", ge=0, lt=1)
    combine_feed: bool = _f(False, "combined vector from [embedding; previous combined vector; h; context] "
                                   "(the reference code of Akyürek & Andreas 2021) instead of [embedding; h; context]")
    feed_dropout: bool = _f(False, "drop the fed-back combined vector as the reference code does: the next step's "
                                   "input [embedding; feed] with p = dropout, and the head's dropout mask on the "
                                   "combined vector, shared by the head and the feed (its --highdrop)")
    combine_activation: str = _f("none", "nonlinearity on the combined vector: none (the reference code of "
                                         "Akyürek & Andreas 2021: with combine_feed a linear feedback) or tanh "
                                         "(Luong et al. 2015's attentional vector, which bounds the feedback)",
                                 choices=("none", "tanh"))
    head: Any = _head()


@dataclass
class DangleConfig(TransformerBlocksConfig):
    """Dangle (Zheng & Lapata 2022) and R-Dangle_shr (Zheng & Lapata 2023): the source is re-encoded from the
    decoded prefix, one adaptive encoding for keys and values. The key encoder is k0 + k1 + k2 layers."""

    arch: str = _f("dangle", "dangle (= rdangle-shr with interval 1) | rdangle-shr | rdangle-sep")
    positions: str = _f("relative", "relative (the papers' setting) | sinusoidal", choices=("sinusoidal", "relative"))
    interval: int = _f(1, "re-encoding interval o: points at steps 1, 1+o, 1+2o, ... (0 = only at step 1)", ge=0)
    pre_fusion_layers: int = _f(0, "k0: source-only key-encoder layers before fusion (computed once per batch)", ge=0)
    fusion_layers: int = _f(2, "k1: layers over [source; target prefix; end marker], bidirectional", ge=0)
    post_fusion_layers: int = _f(2, "k2: layers over the source positions after fusion", ge=0)
    chunk_points: int = _f(0, "training: re-encoding points computed together in one batched pass (bounds "
                              "memory and padding; 0 = auto, points covering about 8 target steps)", ge=0)
    recompute_chunks: bool = _f(False, "training: recompute each chunk's activations in the backward pass instead "
                                       "of storing them (peak memory of one chunk, about a third more compute)")


@dataclass
class RDangleSepConfig(DangleConfig):
    """R-Dangle_sep: values come from a standard encoder run once, keys are re-encoded."""

    arch: str = _f("rdangle-sep", "rdangle-sep (values encoded once, keys re-encoded)")
    encoder_layers: int = _f(2, "depth of the value encoder (a standard encoder run once)", ge=1)
    share_pre_fusion: bool = _f(False, "the k0 pre-fusion layers are the value encoder's bottom layers")
    share_post_fusion: bool = _f(False, "the k2 post-fusion layers are the value encoder's top layers "
                                        "(the paper's best: value 10, k1 2, k2 8, shared)")


@dataclass
class OptimConfig:
    optimizer: str = _f("adam", "adam | adamw", choices=("adam", "adamw"))
    lr: float = _f(5e-4, "peak learning rate (Noam: the scale factor)", gt=0)
    betas: list[float] = _f([0.9, 0.98], "Adam betas", ge=0, lt=1, length=2)
    eps: float = _f(1e-8, "Adam epsilon", gt=0)
    weight_decay: float = _f(0.0, "weight decay (decoupled for adamw)", ge=0)
    schedule: str = _f("inverse_sqrt", "constant | noam | inverse_sqrt | cosine",
                        choices=("constant", "noam", "inverse_sqrt", "cosine"))
    warmup: int = _f(4000, "warm-up updates", ge=0)
    min_lr: float = _f(0.0, "final learning rate of the cosine schedule", ge=0)
    clip_norm: float = _f(0.0, "gradient-norm clipping threshold (0 = off)", ge=0)
    label_smoothing: float = _f(0.0, "label smoothing epsilon", ge=0, lt=1)
    max_tokens: int | None = _f(4096, "token budget per batch (padded, fairseq's rule)", ge=1)
    batch_size: int | None = _f(None, "sentences per batch (with or without max_tokens)", ge=1)
    accumulate: int = _f(1, "batches per update (gradient accumulation)", ge=1)


@dataclass
class TrainConfig:
    max_steps: int = _f(10000, "number of updates", ge=1)
    valid_every: int = _f(500, "validate (and checkpoint) every N updates", ge=0)
    save_every: int = _f(0, "also save the last checkpoint every N updates (0 = only at validation)", ge=0)
    valid_metric: str = _f("loss", "early-stopping metric: loss | exact_match")
    patience: int = _f(0, "stop after N validations without improvement (0 = never)", ge=0)
    log_every: int = _f(10, "write a metrics line every N updates", ge=1)
    seed: int = _f(1, "random seed (data order, initialisation, dropout)", ge=0, le=2**32 - 1)
    threads: int = _f(0, "torch CPU threads (0 = torch default)", ge=0)
    eval_checkpoint: str = _f("best", "checkpoint `evaluate` uses by default: best | last (the papers report last)",
                             choices=("best", "last"))
    device: str = _f("auto", "auto (CUDA when available) | cpu | cuda | cuda:N",
                     pattern=(r"auto|cpu|cuda(:\d+)?", "auto, cpu, cuda, cuda:N"))
    bf16: bool = _f(False, "bfloat16 autocast on GPUs that support it (parameters and optimiser stay float32)")
    init_from: str | None = _f(None, "initialise every parameter from this checkpoint (a .pt file, or a run directory: "
                                     "its best, else its last), strictly (same keys and shapes; a context attention "
                                     "the checkpoint lacks starts as its layer's source attention), with its "
                                     "vocabularies and task state; optimiser and schedule start afresh (two-phase "
                                     "training)")


@dataclass
class DecodeConfig:
    beam: int = _f(1, "beam size (1 = greedy)", ge=1)
    max_len_a: float = _f(2.0, "maximum output length a * |x| + b", ge=0)
    max_len_b: int = _f(10, "maximum output length a * |x| + b", ge=0)
    len_penalty: float = _f(1.0, "beam ranking by score / length ** len_penalty", ge=0)
    batch_size: int = _f(128, "sentences decoded together", ge=1)


def _task_options():
    from structseq.tasks import TaskOptions

    return TaskOptions()


@dataclass
class Config:
    task: Any = field(default_factory=_task_options, metadata={"choose": ("type", "task")})
    data: DataConfig = field(default_factory=DataConfig)
    model: Any = field(default_factory=TransformerConfig, metadata={"choose": ("arch", "model")})
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    decode: DecodeConfig = field(default_factory=DecodeConfig)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ---------------------------------------------------------------- validation

def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_type(value: Any, hint: Any, key: str) -> Any:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _check_type(value, a, key)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"'{key}': invalid value {value!r}")
    if origin is list:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"'{key}' must be a list, got {type(value).__name__} {value!r}")
        (item,) = typing.get_args(hint)
        return [_check_type(v, item, f"{key}[{i}]") for i, v in enumerate(value)]
    if hint is float:
        if isinstance(value, str) and _is_float(value):  # PyYAML reads `5e-4` (no dot) as a string
            return float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"'{key}' must be a number, got {type(value).__name__} {value!r}")
        try:
            value = float(value)
        except OverflowError:  # an integer too large for a float
            value = math.inf
        if not math.isfinite(value):
            raise ConfigError(f"'{key}' must be a finite number, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"'{key}' must be an integer, got {type(value).__name__} {value!r}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"'{key}' must be true or false, got {value!r}")
        return value
    if hint is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"'{key}' must be a mapping, got {type(value).__name__} {value!r}")
        return dict(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"'{key}' must be a string, got {type(value).__name__} {value!r}")
        return value
    return value


_OPS = {"ge": (">=", lambda x, b: x >= b), "gt": (">", lambda x, b: x > b),
        "le": ("<=", lambda x, b: x <= b), "lt": ("<", lambda x, b: x < b)}


def check_value(value: Any, meta: typing.Mapping, key: str) -> None:
    """A ConfigError naming `key` and the valid range or choices when `value` breaks a field's limits
    (`_f`'s ge, gt, le, lt, choices, length, pattern); None always passes."""
    if value is None:
        return
    if "length" in meta and isinstance(value, list) and len(value) != meta["length"]:
        raise ConfigError(f"'{key}' must be a list of {meta['length']} items, got {value!r}")
    bounds = [(op, meta[op]) for op in _OPS if op in meta]
    for item in value if isinstance(value, list) else [value]:
        if bounds and isinstance(item, (int, float)) and not isinstance(item, bool):
            if not all(_OPS[op][1](item, b) for op, b in bounds):
                valid = " and ".join(f"{_OPS[op][0]} {b}" for op, b in bounds)
                what = f"each item of '{key}'" if isinstance(value, list) else f"'{key}'"
                raise ConfigError(f"{what} must be {valid}, got {item!r}")
    if isinstance(value, str):
        choices = meta.get("choices")
        choices = choices() if callable(choices) else choices
        if choices is not None and value not in choices:
            raise ConfigError(f"'{key}': invalid value {value!r}; choices: {', '.join(choices)}")
        if "pattern" in meta and not re.fullmatch(meta["pattern"][0], value):
            raise ConfigError(f"'{key}': invalid value {value!r}; choices: {meta['pattern'][1]}")


def schemas(kind: str) -> dict[str, type]:
    """The schemas a section can pick from: `task` by type, `model` by arch, `head` by type."""
    if kind == "task":
        from structseq.tasks import TASKS

        return {name: t.options_class for name, t in TASKS.items()}
    if kind == "model":
        from structseq.models.registry import ARCHS

        return {name: a.config for name, a in ARCHS.items()}
    return HEAD_CONFIGS


def _chosen(f: dataclasses.Field, value: Any, key: str) -> type:
    by, kind = f.metadata["choose"]
    table = schemas(kind)
    name = value.get(by, f.default_factory().__dict__[by]) if isinstance(value, dict) else None
    if not isinstance(name, str) or name not in table:
        raise ConfigError(f"'{key}.{by}': unknown {kind} '{name}'; choices: {', '.join(table)}")
    return table[name]


def _build(cls: type, values: dict | None, prefix: str, lenient: bool = False) -> Any:
    values = {} if values is None else values
    if not isinstance(values, dict):
        raise ConfigError(f"'{prefix.rstrip('.')}' must be a mapping, got {values!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for k in values:
        if k not in names and not lenient:
            raise ConfigError(f"unknown key '{prefix}{k}'; valid keys: {', '.join(sorted(names))}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        key = prefix + f.name
        if "choose" in f.metadata:
            value = values.get(f.name)
            if isinstance(value, str):  # `task: seq2seq` is `task: {type: seq2seq}`
                value = {f.metadata["choose"][0]: value}
            value = {} if value is None else value
            kwargs[f.name] = _build(_chosen(f, value, key), value, key + ".", lenient)
        elif dataclasses.is_dataclass(hints[f.name]):
            kwargs[f.name] = _build(hints[f.name], values.get(f.name), key + ".", lenient)
        elif f.name in values:
            value = values[f.name]
            if typing.get_origin(hints[f.name]) is list and isinstance(value, str):
                value = [value]  # a single path where a list is expected
            kwargs[f.name] = _check_type(value, hints[f.name], key)
            check_value(kwargs[f.name], f.metadata, key)
    return cls(**kwargs)


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
    cfg = _build(Config, d, "", lenient=saved)
    check_config(cfg)
    return cfg


def check_config(cfg: Config) -> None:
    """The checks that involve more than one key, or the task: a ConfigError naming the keys."""
    from structseq.tasks import TASKS

    metrics = TASKS[cfg.task.type].valid_metrics
    if cfg.train.valid_metric not in metrics:
        raise ConfigError(f"'train.valid_metric': '{cfg.train.valid_metric}' is not a metric of task "
                          f"'{cfg.task.type}'; choices: {', '.join(metrics)}")
    if cfg.optim.max_tokens is None and cfg.optim.batch_size is None:
        raise ConfigError("'optim.max_tokens' and 'optim.batch_size' are both null: set at least one "
                          "(a token budget, sentences per batch, or both)")
    if cfg.decode.max_len_a == 0 and cfg.decode.max_len_b == 0:
        raise ConfigError("'decode.max_len_a' and 'decode.max_len_b' are both 0: outputs could have no tokens; "
                          "set max_len_b >= 1 or max_len_a > 0")
    heads, width = getattr(cfg.model, "n_heads", None), getattr(cfg.model, "d_model", None)
    if isinstance(heads, int) and isinstance(width, int) and width % heads:
        raise ConfigError(f"'model.d_model' ({width}) must be a multiple of 'model.n_heads' ({heads})")


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def apply_overrides(d: dict, overrides: list[str]) -> dict:
    """`section.key=value` strings (value parsed as YAML) applied to a nested dict copy; malformed text is a
    ConfigError naming the override."""
    import copy

    from structseq.yamlio import load_yaml

    d = copy.deepcopy(d or {})
    for item in overrides:
        if not isinstance(item, str) or "=" not in item:
            raise ConfigError(f"override {item!r} is not of the form key=value (e.g. optim.lr=1e-3)")
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        if not all(_KEY.fullmatch(p) for p in parts):
            raise ConfigError(f"override {item!r}: {key.strip()!r} is not a dotted key such as optim.lr")
        value = load_yaml(raw, f"override {item!r}") if raw.strip() else ""
        node = d
        for p in parts[:-1]:
            if node.get(p) is None:  # a missing or empty (`optim:`) section
                node[p] = {}
            node = node[p]
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: '{p}' is not a section")
        node[parts[-1]] = value
    return d


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> Config:
    """Read a YAML (or JSON) config file (strict UTF-8, a key given twice is an error), apply overrides,
    validate every value. Every problem is a ConfigError naming the file and the key or line."""
    from structseq.errors import DataError
    from structseq.textio import read_text
    from structseq.yamlio import load_yaml

    raw: dict = {}
    if path is not None:
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
            raise ConfigError(f"{path}: empty config file (no sections); write at least the data and model "
                              "sections, or `{}` for every default")
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of sections, found {type(raw).__name__}")
    try:
        return config_from_dict(apply_overrides(raw, list(overrides)))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}" if path is not None else str(e)) from None
