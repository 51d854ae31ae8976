"""One JSON-able evaluation report: the registered metrics (`structseq.registry.METRICS`) a task and its dataset
name, computed on one `MetricInputs`; the output of `structseq evaluate --json`."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from structseq.registry import METRICS

from .base import MetricInputs, Sentence, check_parallel, with_scale
from .cter import CTER


def stamp_scale(result: Any, scale: str) -> Any:
    """`result` with its signature, and the signature of each of its parts (pooled BLEU's `full` and `1-shot`),
    ending in `|scale:SCALE`."""
    if isinstance(result, dict):
        result = {k: stamp_scale(v, scale) if isinstance(v, dict) else v for k, v in result.items()}
        if isinstance(result.get("signature"), str):
            result["signature"] = with_scale(result["signature"], scale)
    return result


def compute_metric(name: str, inputs: MetricInputs) -> Any:
    """The registered metric `name` on `inputs`: its JSON-able result, its signatures stating the registered
    scale, or None when it does not apply to these inputs (per-category scores without categories...)."""
    metric = METRICS.get(name)
    result = metric.compute(inputs)
    return None if result is None else stamp_scale(result, metric.scale)


def compute_metrics(names: Iterable[str], inputs: MetricInputs) -> dict:
    """{name: result} of every metric in `names` that applies to `inputs`, in the given order."""
    report = {}
    for name in dict.fromkeys(names):
        result = compute_metric(name, inputs)
        if result is not None:
            report[name] = result
    return report


SEQUENCE_METRICS = ("exact_match", "token_accuracy", "bleu", "nltk_bleu")


def compute_all(
    hyps: Sequence[Sentence],
    refs: Sequence[Sentence],
    categories: Sequence[Hashable] | None = None,
    bleu_tokenize: str = "13a",
    *,
    cognition: bool = False,
    compounds: Sequence[str] | None = None,
    cter: CTER | None = None,
    data_root=None,
    tokenized: bool = False,
) -> dict:
    """A convenience over the registry for text outside a run: exact match, token accuracy, sacrebleu BLEU and
    NLTK BLEU (one reference per hypothesis), each with its signature; with `categories`, exact match and counts
    per category too. Scales: exact match, token accuracy and NLTK BLEU in [0, 1]; sacrebleu BLEU in [0, 100].

    `cognition=True`: also `cognition_bleu` (the Dangle pipeline's character BLEU, 0-100); with `compounds` (one
    per line, CG-test order) also `cter`: instance and aggregate compound translation error rate as fractions,
    scored by `cter` (default: the released lexicon under `data_root`).

    `tokenized`: hypotheses and references are whitespace tokens alike by construction, so sacrebleu's
    'forgot to detokenize' warning is silenced (`force`; the score and signature are the same)."""
    n = check_parallel(hyps, refs)
    if categories is not None:
        check_parallel(hyps, categories, "categories")
    names = list(SEQUENCE_METRICS)
    if cognition or compounds is not None:
        names += ["cognition_bleu", "cter"]
    names.append("per_category")
    inputs = MetricInputs(
        hyps,
        refs,
        categories=categories,
        meta={"compound": compounds} if compounds is not None else {},
        data_root=data_root,
        bleu_tokenize=bleu_tokenize,
        tokenized=tokenized,
        extras={"cter": cter} if cter is not None else {},
    )
    return {"n": n, **compute_metrics(names, inputs)}
