"""Typed configuration: dataclasses with help text, loaded from YAML with `key=value` overrides.

A config file has sections `task`, `data`, `model`, `optim`, `train`, `decode`. Some sections pick their
schema by a key: `task` by `type` (`structseq.tasks.TASKS`), `model` by `arch` (the architecture registry,
`structseq.models.registry.ARCHS`), `model.head` by `type` (`HEAD_CONFIGS`); so each accepts only its own
keys (`task: seq2seq` is short for `task: {type: seq2seq}`). An unknown key or a value of the wrong type
raises ConfigError naming the dotted key.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from structseq.errors import ConfigError


def _f(default, help: str, **kw):
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata={"help": help}, **kw)
    return field(default=default, metadata={"help": help}, **kw)


@dataclass
class DataConfig:
    dataset: str = _f("scan-simple", "registered dataset name (see `structseq data list`) or 'files'")
    train: str = _f("train", "training split name, or a file (TSV / SCAN / 'SRC,TGT') when dataset is 'files'")
    valid: str | None = _f(None, "validation split, file or NAME:SPLIT of any registered dataset; null holds out "
                                 "`valid_fraction` of train")
    valid_fraction: float = _f(0.01, "fraction of train held out for validation when `valid` is null")
    test: list[str] = _f(["test"], "splits, files or NAME:SPLIT (e.g. cognition:cg-test) that `evaluate` reports "
                                   "(one string or a list)")
    columns: list[str] | None = _f(None, "names of a TSV file's columns (source, target, context, category; other "
                                         "names go to the example's meta; '-' drops one); null: the file's header "
                                         "line, else source, target")
    bleu_tokenize: str | None = _f(None, "sacrebleu tokenizer (13a, zh, intl, char, none, ...); null: the dataset's "
                                         "declared one (zh for Chinese targets), else 13a")
    max_train_examples: int | None = _f(None, "use only the first N training examples (quick runs)")
    min_freq: int = _f(1, "minimum token count to enter a vocabulary")
    share_vocab: bool = _f(False, "one vocabulary for source and target (needed to tie all embeddings)")


# ---------------------------------------------------------------- output heads: one schema per `type`

@dataclass
class SoftmaxHeadConfig:
    type: str = _f("softmax", "output head: softmax | copy | lexical (lexical translation, Akyürek & Andreas 2021)")
    dropout: float = _f(0.0, "dropout on the features entering the output layer")


@dataclass
class CopyHeadConfig(SoftmaxHeadConfig):
    type: str = _f("copy", "output head: softmax | copy | lexical")
    gate: str = _f("learned", "gate: learned (paper: sigmoid(w.h)) | copy_token (reference code: the softmax "
                              "probability of an extra <copy> output)")


@dataclass
class LexicalHeadConfig(CopyHeadConfig):
    type: str = _f("lexical", "output head: softmax | copy | lexical")
    lexicon: str | None = _f(None, "a learner (simple | pmi | ibm1 | ibm2 | bayesian), learned from the training "
                                   "data, or a lexicon JSON file; null = no entries (copy + mutual exclusivity)")
    lexicon_settings: dict = _f({}, "keyword arguments of the lexicon learner, e.g. {epsilon: 3}")
    tau: float = _f(0.0, "0 = hard rows (argmax), > 0 = softmax(score / tau)")
    init: str = _f("frozen", "frozen (fixed, tau = 0) | soft (fixed, tau > 0) | learned (trainable, initialised "
                             "from the lexicon) | uniform (trainable, every row uniform)")
    mutual_exclusivity: bool = _f(True, "rows without entries spread over the targets no row maps to")


HEAD_CONFIGS: dict[str, type] = {"softmax": SoftmaxHeadConfig, "copy": CopyHeadConfig, "lexical": LexicalHeadConfig}
HeadConfig = LexicalHeadConfig  # every head key (for code that builds a head by hand)


def _head(help: str = "output head: {type: softmax | copy | lexical, ...}; each type has its own keys"):
    return field(default_factory=SoftmaxHeadConfig, metadata={"help": help, "choose": ("type", "head")})


# ---------------------------------------------------------------- model families (registered in models/registry.py)

@dataclass
class TransformerBlocksConfig:
    """Keys shared by every model built from Transformer blocks."""

    arch: str = _f("transformer", "model family (see `structseq.models.registry`)")
    d_model: int = _f(512, "model width")
    n_heads: int = _f(4, "attention heads")
    ffn_dim: int = _f(1024, "feed-forward inner width")
    decoder_layers: int = _f(6, "decoder depth")
    dropout: float = _f(0.3, "residual and embedding dropout")
    attention_dropout: float = _f(0.0, "dropout on attention weights")
    activation_dropout: float = _f(0.0, "dropout after the FFN activation")
    norm_first: bool = _f(False, "pre-norm (true) or post-norm (false)")
    positions: str = _f("sinusoidal", "sinusoidal (absolute) | relative (Huang et al. 2020 key+query form)")
    max_relative: int = _f(16, "relative positions are clipped to +-(max_relative - 1)")
    share_decoder_embeddings: bool = _f(False, "tie the target embedding and the output projection")
    share_all_embeddings: bool = _f(False, "also tie source and target embeddings (needs data.share_vocab)")
    head: Any = _head()


@dataclass
class TransformerConfig(TransformerBlocksConfig):
    encoder_layers: int = _f(6, "encoder depth")


@dataclass
class LSTMConfig:
    arch: str = _f("lstm", "model family")
    embed_dim: int = _f(512, "embedding width")
    hidden_dim: int = _f(512, "LSTM width")
    layers: int = _f(2, "LSTM depth (encoder and decoder)")
    dropout: float = _f(0.4, "dropout on embeddings, between layers and on the combined vector")
    combine_feed: bool = _f(False, "combined vector from [embedding; previous combined vector; h; context] "
                                   "(the reference code of Akyürek & Andreas 2021) instead of [embedding; h; context]")
    head: Any = _head()


@dataclass
class DangleConfig(TransformerBlocksConfig):
    """Dangle (Zheng & Lapata 2022) and R-Dangle_shr (Zheng & Lapata 2023): the source is re-encoded from the
    decoded prefix, one adaptive encoding for keys and values. The key encoder is k0 + k1 + k2 layers."""

    arch: str = _f("dangle", "dangle (= rdangle-shr with interval 1) | rdangle-shr | rdangle-sep")
    positions: str = _f("relative", "relative (the papers' setting) | sinusoidal")
    interval: int = _f(1, "re-encoding interval o: points at steps 1, 1+o, 1+2o, ... (0 = only at step 1)")
    pre_fusion_layers: int = _f(0, "k0: source-only key-encoder layers before fusion (computed once per batch)")
    fusion_layers: int = _f(2, "k1: layers over [source; target prefix; end marker], bidirectional")
    post_fusion_layers: int = _f(2, "k2: layers over the source positions after fusion")
    chunk_points: int = _f(0, "training: re-encoding points computed together in one batched pass (bounds "
                              "memory and padding; 0 = auto, points covering about 8 target steps)")
    recompute_chunks: bool = _f(False, "training: recompute each chunk's activations in the backward pass instead "
                                       "of storing them (peak memory of one chunk, about a third more compute)")


@dataclass
class RDangleSepConfig(DangleConfig):
    """R-Dangle_sep: values come from a standard encoder run once, keys are re-encoded."""

    arch: str = _f("rdangle-sep", "rdangle-sep (values encoded once, keys re-encoded)")
    encoder_layers: int = _f(2, "depth of the value encoder (a standard encoder run once)")
    share_pre_fusion: bool = _f(False, "the k0 pre-fusion layers are the value encoder's bottom layers")
    share_post_fusion: bool = _f(False, "the k2 post-fusion layers are the value encoder's top layers "
                                        "(the paper's best: value 10, k1 2, k2 8, shared)")


@dataclass
class OptimConfig:
    optimizer: str = _f("adam", "adam | adamw")
    lr: float = _f(5e-4, "peak learning rate (Noam: the scale factor)")
    betas: list[float] = _f([0.9, 0.98], "Adam betas")
    eps: float = _f(1e-8, "Adam epsilon")
    weight_decay: float = _f(0.0, "weight decay (decoupled for adamw)")
    schedule: str = _f("inverse_sqrt", "constant | noam | inverse_sqrt | cosine")
    warmup: int = _f(4000, "warm-up updates")
    min_lr: float = _f(0.0, "final learning rate of the cosine schedule")
    clip_norm: float = _f(0.0, "gradient-norm clipping threshold (0 = off)")
    label_smoothing: float = _f(0.0, "label smoothing epsilon")
    max_tokens: int | None = _f(4096, "token budget per batch (padded, fairseq's rule)")
    batch_size: int | None = _f(None, "sentences per batch (with or without max_tokens)")
    accumulate: int = _f(1, "batches per update (gradient accumulation)")


@dataclass
class TrainConfig:
    max_steps: int = _f(10000, "number of updates")
    valid_every: int = _f(500, "validate (and checkpoint) every N updates")
    save_every: int = _f(0, "also save the last checkpoint every N updates (0 = only at validation)")
    valid_metric: str = _f("loss", "early-stopping metric: loss | exact_match")
    patience: int = _f(0, "stop after N validations without improvement (0 = never)")
    log_every: int = _f(10, "write a metrics line every N updates")
    seed: int = _f(1, "random seed (data order, initialisation, dropout)")
    threads: int = _f(0, "torch CPU threads (0 = torch default)")
    eval_checkpoint: str = _f("best", "checkpoint `evaluate` uses by default: best | last (the papers report last)")
    device: str = _f("auto", "auto (CUDA when available) | cpu | cuda | cuda:N")
    bf16: bool = _f(False, "bfloat16 autocast on GPUs that support it (parameters and optimiser stay float32)")


@dataclass
class DecodeConfig:
    beam: int = _f(1, "beam size (1 = greedy)")
    max_len_a: float = _f(2.0, "maximum output length a * |x| + b")
    max_len_b: int = _f(10, "maximum output length a * |x| + b")
    len_penalty: float = _f(1.0, "beam ranking by score / length ** len_penalty")
    batch_size: int = _f(128, "sentences decoded together")


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
        return float(value)
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
    if name not in table:
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
    return cls(**kwargs)


def config_from_dict(d: dict, *, saved: bool = False) -> Config:
    """Validate a nested dict. `saved`: a config written by an earlier version into a run (its keys that no
    longer apply to the chosen schemas, e.g. `gate` of a softmax head, are dropped; types still checked)."""
    d = dict(d or {})
    sections = [f.name for f in dataclasses.fields(Config)]
    for k in d:
        if k not in sections:
            raise ConfigError(f"unknown key '{k}'; valid sections: {', '.join(sections)}")
    return _build(Config, d, "", lenient=saved)


def apply_overrides(d: dict, overrides: list[str]) -> dict:
    """`section.key=value` strings (value parsed as YAML) applied to a nested dict copy."""
    import copy

    d = copy.deepcopy(d or {})
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override '{item}' is not of the form key=value")
        key, raw = item.split("=", 1)
        value = yaml.safe_load(raw) if raw.strip() else ""
        node = d
        parts = key.strip().split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override '{key}': '{p}' is not a section")
        node[parts[-1]] = value
    return d


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> Config:
    """Read a YAML (or JSON) config file, apply overrides, validate."""
    raw: dict = {}
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        try:
            raw = yaml.safe_load(path.read_text()) or {}
        except yaml.YAMLError as e:
            raise ConfigError(f"{path}: not valid YAML: {e}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}: the top level must be a mapping of sections")
    try:
        return config_from_dict(apply_overrides(raw, list(overrides)))
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}" if path is not None else str(e)) from None
