"""Evaluation metrics. Each returns a `Score` whose signature names its settings (sacrebleu style);
`chrf` is sacrebleu's chrF2; CTER scores CoGnition's compound translations.

The metrics a report can hold are registered functions (`structseq.registry.register_metric`) of one
`MetricInputs`; a task names the ones it reports (`Task.metrics`) and a dataset adds its own
(`Dataset.metrics`), and `compute_metrics` computes them with every signature stating its scale."""

from .base import MetricInputs, Score, stated_scale, with_scale
from .bleu import bleu, cognition_bleu, nltk_corpus_bleu, pool_references, pooled_bleu
from .chrf import chrf
from .cter import (
    CTER,
    Judgement,
    read_compounds,
    read_human_eval,
    validate_against_human,
)
from .report import compute_all, compute_metric, compute_metrics
from .sequence import exact_match, per_category, token_accuracy

__all__ = [
    "CTER",
    "Judgement",
    "MetricInputs",
    "Score",
    "bleu",
    "chrf",
    "cognition_bleu",
    "compute_all",
    "compute_metric",
    "compute_metrics",
    "exact_match",
    "nltk_corpus_bleu",
    "per_category",
    "pool_references",
    "pooled_bleu",
    "read_compounds",
    "read_human_eval",
    "stated_scale",
    "token_accuracy",
    "validate_against_human",
    "with_scale",
]
