"""Sequence-level metrics for exact-output tasks (SCAN, COGS, Colors): exact match, token accuracy,
and any metric broken down by category."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Sequence

from structseq.registry import register_metric

from .base import (
    MetricInputs,
    Score,
    Sentence,
    check_parallel,
    signature,
    tokens,
    with_scale,
)

EXACT_MATCH_SIGNATURE = signature("exact_match", tok="space")
TOKEN_ACCURACY_SIGNATURE = signature("token_accuracy", tok="space", align="position", len="max")


def exact_match(hyps: Sequence[Sentence], refs: Sequence[Sentence]) -> Score:
    """Fraction of hypotheses whose token sequence equals the reference's (whitespace-insensitive,
    since both sides are compared as space-split tokens)."""
    n = check_parallel(hyps, refs)
    hits = sum(tokens(h) == tokens(r) for h, r in zip(hyps, refs))
    return Score("exact_match", hits / n, EXACT_MATCH_SIGNATURE, n, {"correct": hits})


def token_accuracy(hyps: Sequence[Sentence], refs: Sequence[Sentence]) -> Score:
    """Position-wise token accuracy, micro-averaged over the corpus.

    Definition: for each pair, position j is correct when both sequences have a token there and
    the tokens are equal; every position of the longer sequence counts once. So
    accuracy = sum_i #{j < min(|h_i|, |r_i|) : h_ij = r_ij} / sum_i max(|h_i|, |r_i|).
    When lengths agree this is accuracy over reference tokens; each missing or extra token is one
    error. There is no re-alignment: one inserted token shifts and spoils the rest of the line,
    which is the point for exact-output tasks. A corpus of only empty pairs scores 1.
    """
    n = check_parallel(hyps, refs)
    correct = total = 0
    for h, r in zip(hyps, refs):
        ht, rt = tokens(h), tokens(r)
        correct += sum(a == b for a, b in zip(ht, rt))
        total += max(len(ht), len(rt))
    value = correct / total if total else 1.0
    details = {"correct": correct, "positions": total}
    return Score("token_accuracy", value, TOKEN_ACCURACY_SIGNATURE, n, details)


Metric = Callable[[Sequence[Sentence], Sequence[Sentence]], "Score | float"]


def per_category(
    metric: Metric,
    hyps: Sequence[Sentence],
    refs: Sequence[Sentence],
    categories: Sequence[Hashable],
) -> dict[Hashable, float]:
    """`metric` computed separately on each category's items (e.g. COGS generalisation types),
    keys sorted so that reports are stable across runs."""
    check_parallel(hyps, refs)
    check_parallel(hyps, categories, "categories")
    groups: dict[Hashable, list[int]] = {}
    for i, c in enumerate(categories):
        groups.setdefault(c, []).append(i)
    out: dict[Hashable, float] = {}
    for c in sorted(groups, key=str):
        idx = groups[c]
        out[c] = float(metric([hyps[i] for i in idx], [refs[i] for i in idx]))
    return out


# ---------------------------------------------------------------- registered metrics


@register_metric("exact_match", scale="fraction")
def exact_match_metric(inputs: MetricInputs) -> dict:
    """Fraction of outputs equal to their reference, token for token."""
    return exact_match(inputs.hypotheses, inputs.references).to_dict()


@register_metric("token_accuracy", scale="fraction")
def token_accuracy_metric(inputs: MetricInputs) -> dict:
    """Position-wise token accuracy, micro-averaged (see `token_accuracy`)."""
    return token_accuracy(inputs.hypotheses, inputs.references).to_dict()


@register_metric("per_category", scale="fraction")
def per_category_metric(inputs: MetricInputs) -> dict | None:
    """Exact match and the number of examples per category (e.g. COGS generalisation types); None without
    categories. `metric` is the exact-match signature."""
    if inputs.categories is None:
        return None
    check_parallel(inputs.hypotheses, inputs.categories, "categories")
    scores = per_category(exact_match, inputs.hypotheses, inputs.references, inputs.categories)
    counts = Counter(inputs.categories)
    metric = with_scale(EXACT_MATCH_SIGNATURE, "fraction")
    return {
        "metric": metric,
        "exact_match": {str(c): s for c, s in scores.items()},
        "n": {str(c): counts[c] for c in scores},
        "signature": f"per_category|{metric}",
    }
