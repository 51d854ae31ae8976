"""Evaluation metrics. Each returns a `Score` whose signature names its settings (sacrebleu style);
CTER scores CoGnition's compound translations."""

from .base import Score
from .bleu import bleu, cognition_bleu, nltk_corpus_bleu, pool_references, pooled_bleu
from .cter import CTER, Judgement, read_compounds, read_human_eval, validate_against_human
from .report import compute_all
from .sequence import exact_match, per_category, token_accuracy

__all__ = [
    "CTER",
    "Judgement",
    "Score",
    "bleu",
    "cognition_bleu",
    "compute_all",
    "exact_match",
    "nltk_corpus_bleu",
    "per_category",
    "pool_references",
    "pooled_bleu",
    "read_compounds",
    "read_human_eval",
    "token_accuracy",
    "validate_against_human",
]
