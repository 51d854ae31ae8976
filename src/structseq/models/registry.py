"""The architecture registry: each `model.arch` name maps to its config schema, its builder and the tasks
it serves, in one place. A new model family adds one line here (and its builder and config class).

    build_model(cfg.model, vocabs, train_examples)   # -> nn.Module with `.width`
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from torch import nn

from structseq.config import DangleConfig, LSTMConfig, RDangleSepConfig, TransformerConfig
from structseq.data.vocab import Vocab
from structseq.errors import ConfigError
from structseq.models.build import build_dangle, build_lstm, build_transformer
from structseq.models.supertagger import (SupertagClassifierConfig, SupertagTreeConfig, build_supertag_classifier,
                                          build_supertag_tree)
from structseq.models.context import ContextTransformerConfig, build_context_transformer


@dataclass(frozen=True)
class Arch:
    config: type  # the `model` section's schema
    build: Callable[..., nn.Module]  # (config, vocabs, train_examples) -> model with `.width`
    tasks: tuple[str, ...] = ("seq2seq",)  # the tasks whose batches this model reads


ARCHS: dict[str, Arch] = {
    "transformer": Arch(TransformerConfig, build_transformer),
    "lstm": Arch(LSTMConfig, build_lstm),
    "dangle": Arch(DangleConfig, build_dangle),
    "rdangle-shr": Arch(DangleConfig, build_dangle),
    "rdangle-sep": Arch(RDangleSepConfig, build_dangle),
    "context-transformer": Arch(ContextTransformerConfig, build_context_transformer, tasks=("context-seq2seq",)),
    "supertag-classifier": Arch(SupertagClassifierConfig, build_supertag_classifier, tasks=("supertag",)),
    "supertag-tree": Arch(SupertagTreeConfig, build_supertag_tree, tasks=("supertag",)),
}


def build_model(cfg, vocabs: Mapping[str, Vocab], train_examples: Sequence | None = None,
                task: str | None = None) -> nn.Module:
    """The model for `cfg` (a `model` section). `train_examples`: needed when the model learns something from
    the data at build time (e.g. a lexical head's lexicon). `task`: checked against the architecture's tasks."""
    if cfg.arch not in ARCHS:
        raise ConfigError(f"'model.arch': unknown model '{cfg.arch}'; choices: {', '.join(ARCHS)}")
    arch = ARCHS[cfg.arch]
    if task is not None and task not in arch.tasks:
        serving = [name for name, a in ARCHS.items() if task in a.tasks]
        raise ConfigError(f"'model.arch': '{cfg.arch}' does not serve task '{task}' (it serves "
                          f"{', '.join(arch.tasks)}); architectures for '{task}': {', '.join(serving)}")
    return arch.build(cfg, vocabs, train_examples)
