"""chrF (Popović 2015) as sacrebleu computes it: character n-gram F-score, chrF2 by default (character order 6,
no word n-grams, beta 2), on sacrebleu's 0-100 scale, with sacrebleu's own signature prefixed `chrf`
(`chrf|nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.x`), as `bleu` carries BLEU's."""

from __future__ import annotations

from collections.abc import Sequence

from sacrebleu.metrics import CHRF

from structseq.registry import register_metric

from .base import MetricInputs, Score, Sentence, check_parallel


def _text(sentence: Sentence) -> str:
    return sentence if isinstance(sentence, str) else " ".join(sentence)


def chrf(
    hyps: Sequence[Sentence], refs: Sequence[str | Sequence[str]], *, word_order: int = 0, **sacrebleu_kwargs
) -> Score:
    """sacrebleu corpus chrF (0-100): `word_order` 0 is chrF2, 2 is chrF++; every other keyword goes to
    `sacrebleu.metrics.CHRF`. `refs` holds one reference string per hypothesis, or a list of them."""
    from .bleu import _ref_streams

    n = check_parallel(hyps, refs)
    metric = CHRF(word_order=word_order, **sacrebleu_kwargs)
    res = metric.corpus_score([_text(h) for h in hyps], _ref_streams(refs))
    name = "chrf" if word_order == 0 else "chrf++"
    return Score("chrf", float(res.score), f"{name}|{metric.get_signature().format()}", n)


@register_metric("chrf", scale="percent")
def chrf_metric(inputs: MetricInputs) -> dict:
    """sacrebleu corpus chrF2 (character 6-grams, beta 2; 0-100)."""
    return chrf(inputs.hypotheses, inputs.ref_text).to_dict()
