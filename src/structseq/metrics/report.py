"""One JSON-able evaluation report, the output of `structseq evaluate --json`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

from .base import Sentence, check_parallel
from .bleu import bleu, cognition_bleu, nltk_corpus_bleu
from .cter import CTER
from .sequence import exact_match, per_category, token_accuracy


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
    """Exact match, token accuracy, sacrebleu BLEU and NLTK BLEU (one reference per hypothesis),
    each with its signature; with `categories`, exact match and counts per category too.
    Scales: exact match, token accuracy and NLTK BLEU in [0, 1]; sacrebleu BLEU in [0, 100].

    CoGnition (`cognition=True`): also `cognition_bleu` (the Dangle pipeline's character BLEU, 0-100);
    with `compounds` (one per line, CG-test order) also `cter`: instance and aggregate compound
    translation error rate as fractions, scored by `cter` (default: the released lexicon under
    `data_root`).

    `tokenized`: hypotheses and references are whitespace tokens alike by construction, so sacrebleu's
    'forgot to detokenize' warning is silenced (`force`; the score and signature are the same)."""
    n = check_parallel(hyps, refs)
    text_refs = [r if isinstance(r, str) else " ".join(r) for r in refs]
    report = {
        "n": n,
        "exact_match": exact_match(hyps, refs).to_dict(),
        "token_accuracy": token_accuracy(hyps, refs).to_dict(),
        "bleu": bleu(hyps, text_refs, tokenize=bleu_tokenize, force=tokenized).to_dict(),
        "nltk_bleu": nltk_corpus_bleu(hyps, [[r] for r in refs]).to_dict(),
    }
    if cognition or compounds is not None:
        report["cognition_bleu"] = cognition_bleu(hyps, text_refs).to_dict()
    if compounds is not None:
        check_parallel(hyps, compounds, "compounds")
        cter = cter if cter is not None else CTER.from_data_root(data_root)
        report["cter"] = cter.score(compounds, [h if isinstance(h, str) else " ".join(h) for h in hyps])
    if categories is not None:
        check_parallel(hyps, categories, "categories")
        scores = per_category(exact_match, hyps, refs, categories)
        counts = Counter(categories)
        report["per_category"] = {
            "metric": report["exact_match"]["signature"],
            "exact_match": {str(c): s for c, s in scores.items()},
            "n": {str(c): counts[c] for c in scores},
        }
    return report
