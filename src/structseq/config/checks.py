"""The checks of a config that involve more than one key, or the task, the model and the registries: a
ConfigError naming the keys. `config_from_dict` runs them on every config it builds."""

from __future__ import annotations

from structseq.config.decode import check_decode
from structseq.errors import ConfigError
from structseq.fields import declared
from structseq.registry import ARCHS, HEADS, METRICS, TASKS


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
