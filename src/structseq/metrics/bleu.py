"""BLEU in the three forms our papers report: sacrebleu corpus BLEU, CoGnition's character BLEU
(Dangle pipeline), and NLTK `corpus_bleu` defaults with pooled references (lexicon-learning paper).

nltk is only a test dependency, so the NLTK variant is reimplemented here and tested for equality.
"""

from __future__ import annotations

import math
import sys
from collections import Counter
from collections.abc import Iterable, Sequence

from sacrebleu.metrics import BLEU

from structseq.registry import register_metric

from .base import MetricInputs, Score, Sentence, check_parallel, signature, tokens

#: Settings of `nltk.translate.bleu_score.corpus_bleu` with its defaults, which we reproduce.
NLTK_MAX_ORDER = 4
NLTK_WEIGHT = 0.25


def _as_text(sentence: Sentence) -> str:
    return sentence if isinstance(sentence, str) else " ".join(sentence)


def _ref_streams(refs: Sequence[str | Sequence[str]]) -> list[list[str | None]]:
    """Per-hypothesis references -> sacrebleu's stream layout, padding with None where a
    hypothesis has fewer references (sacrebleu skips None)."""
    per_hyp = [[r] if isinstance(r, str) else [_as_text(x) for x in r] for r in refs]
    if any(len(r) == 0 for r in per_hyp):
        raise ValueError("a hypothesis has no reference")
    width = max(len(r) for r in per_hyp)
    return [[r[k] if k < len(r) else None for r in per_hyp] for k in range(width)]


def _sacrebleu(name: str, hyps: list[str], refs, tokenize: str, prefix: str, **kwargs) -> Score:
    n = check_parallel(hyps, refs)
    metric = BLEU(tokenize=tokenize, **kwargs)
    res = metric.corpus_score(hyps, _ref_streams(refs))
    sig = f"{prefix}|{metric.get_signature().format()}"
    details = {
        "precisions": [float(p) for p in res.precisions],
        "bp": float(res.bp),
        "sys_len": int(res.sys_len),
        "ref_len": int(res.ref_len),
    }
    return Score(name, float(res.score), sig, n, details)


def bleu(
    hyps: Sequence[Sentence],
    refs: Sequence[str | Sequence[str]],
    tokenize: str = "13a",
    **sacrebleu_kwargs,
) -> Score:
    """sacrebleu corpus BLEU (0-100). `refs` holds one reference string per hypothesis, or a list
    of reference strings per hypothesis. `tokenize` and any other keyword go to
    `sacrebleu.metrics.BLEU`; the signature is sacrebleu's own, prefixed with `bleu`."""
    return _sacrebleu("bleu", [_as_text(h) for h in hyps], refs, tokenize, "bleu", **sacrebleu_kwargs)


def _char_split(sentence: Sentence) -> str:
    return " ".join(_as_text(sentence).replace(" ", ""))


def cognition_bleu(hyps: Sequence[Sentence], refs: Sequence[str | Sequence[str]]) -> Score:
    """CoGnition BLEU as in the Dangle pipeline: remove the spaces from hypothesis and reference,
    split into single characters, then sacrebleu with its defaults (13a). This makes the score
    independent of the Chinese word segmentation (cg-test references are unsegmented)."""
    char_refs = [_char_split(r) if isinstance(r, str) else [_char_split(x) for x in r] for r in refs]
    return _sacrebleu(
        "cognition_bleu", [_char_split(h) for h in hyps], char_refs, "13a", "cognition_bleu|pre:nospace+char"
    )


def _splitter(tokenize: str):
    if tokenize == "whitespace":
        return tokens
    if tokenize == "space":
        # The lexicon paper's reference code: strip, then split on single spaces, so runs of
        # spaces give empty-string tokens that count in BLEU.
        return lambda s: tuple(s.strip().split(" ")) if isinstance(s, str) else tuple(s)
    raise ValueError(f"tokenize must be 'whitespace' or 'space', not {tokenize!r}")


def _ngram_counts(toks: tuple[str, ...], n: int) -> Counter:
    return Counter(zip(*(toks[i:] for i in range(n))))


def nltk_corpus_bleu(
    hyps: Sequence[Sentence],
    refs_per_hyp: Sequence[Sequence[Sentence]],
    *,
    tokenize: str = "whitespace",
) -> Score:
    """NLTK `corpus_bleu` with its defaults (4-gram, uniform weights, no smoothing), on a 0-1 scale.

    Same arithmetic as NLTK: clipped n-gram counts summed over the corpus, each hypothesis
    contributing max(1, #ngrams) to the denominator; brevity penalty against the closest
    reference length (ties -> the shorter); score 0 when no unigram matches; a zero count at a
    higher order is replaced by the smallest positive float (NLTK's method0), which gives a tiny
    but non-zero score. Strings are split on whitespace (`tokenize="whitespace"`) or, as in the
    lexicon paper's code, on single spaces (`tokenize="space"`); token sequences are used as is.
    """
    n = check_parallel(hyps, refs_per_hyp)
    split = _splitter(tokenize)
    matches = [0] * NLTK_MAX_ORDER
    totals = [0] * NLTK_MAX_ORDER
    hyp_len = ref_len = 0
    for i, (hyp, refs) in enumerate(zip(hyps, refs_per_hyp)):
        h = split(hyp)
        rs = [split(r) for r in ([refs] if isinstance(refs, str) else refs)]
        if not rs:
            raise ValueError(f"hypothesis {i} has no reference")
        for k in range(NLTK_MAX_ORDER):
            counts = _ngram_counts(h, k + 1)
            best: dict[tuple, int] = {}
            for r in rs:
                rc = _ngram_counts(r, k + 1)
                for g in counts:
                    best[g] = max(best.get(g, 0), rc[g])
            matches[k] += sum(min(c, best[g]) for g, c in counts.items())
            totals[k] += max(1, sum(counts.values()))
        hyp_len += len(h)
        ref_len += min((len(r) for r in rs), key=lambda length: (abs(length - len(h)), length))
    if matches[0] == 0:
        value = 0.0
    else:
        if hyp_len > ref_len:
            bp = 1.0
        elif hyp_len == 0:
            bp = 0.0
        else:
            bp = math.exp(1 - ref_len / hyp_len)
        logs = (NLTK_WEIGHT * math.log(m / t if m else sys.float_info.min) for m, t in zip(matches, totals))
        value = bp * math.exp(math.fsum(logs))
    sig = signature(
        "nltk_bleu",
        impl="corpus_bleu",
        ngram=NLTK_MAX_ORDER,
        weights="uniform",
        smooth="none",
        bp="closest",
        tok=tokenize,
    )
    details = {"matches": matches, "totals": totals, "hyp_len": hyp_len, "ref_len": ref_len}
    return Score("nltk_bleu", value, sig, n, details)


def _source_key(source: Sentence) -> str:
    return " ".join(tokens(source))


def pool_references(
    sources: Sequence[Sentence],
    refs: Sequence[Sentence],
    extra_pairs: Iterable[tuple[Sentence, Sentence]] = (),
) -> list[list[Sentence]]:
    """For each item, every reference whose source string equals its source (itself included).

    The lexicon paper scores Tatoeba with all references sharing a source pooled, because the
    same English sentence has several valid Chinese translations. Its code pools over train, dev
    and test together: pass the other splits' pairs as `extra_pairs` to do the same. Sources are
    compared after whitespace normalisation; duplicates are kept (harmless for BLEU).
    """
    check_parallel(sources, refs)
    pooled: dict[str, list[Sentence]] = {}
    for s, r in [*zip(sources, refs), *extra_pairs]:
        pooled.setdefault(_source_key(s), []).append(r)
    return [list(pooled[_source_key(s)]) for s in sources]


def pooled_bleu(
    sources: Sequence[Sentence],
    hyps: Sequence[Sentence],
    refs: Sequence[Sentence],
    extra_pairs: Iterable[tuple[Sentence, Sentence]] = (),
    train_sources: Iterable[Sentence] = (),
) -> dict[str, dict]:
    """The lexicon paper's Tatoeba score: NLTK corpus BLEU with the references of equal sources pooled
    (over `extra_pairs` too: its code pools train, dev and test), on every item (`full`) and on the
    `1-shot` items, those whose source has a token seen exactly once in `train_sources`. Both in [0, 1]."""
    check_parallel(sources, hyps)
    pooled = pool_references(sources, refs, extra_pairs)
    counts = Counter(t for s in train_sources for t in tokens(s))
    shot = [i for i, s in enumerate(sources) if any(counts.get(t) == 1 for t in tokens(s))]
    out = {"full": nltk_corpus_bleu(hyps, pooled).to_dict()}
    out["1-shot"] = (
        nltk_corpus_bleu([hyps[i] for i in shot], [pooled[i] for i in shot]).to_dict()
        if shot
        else {"score": None, "n": 0}
    )
    for part in out.values():
        part["signature"] = part.get("signature", "nltk_bleu") + "|refs:pooled-by-source"
    return out


# ---------------------------------------------------------------- registered metrics


@register_metric("bleu", scale="percent")
def bleu_metric(inputs: MetricInputs) -> dict:
    """sacrebleu corpus BLEU (0-100) with the tokenizer `data.bleu_tokenize` or the dataset names."""
    return bleu(inputs.hypotheses, inputs.ref_text, tokenize=inputs.bleu_tokenize, force=inputs.tokenized).to_dict()


@register_metric("nltk_bleu", scale="fraction")
def nltk_bleu_metric(inputs: MetricInputs) -> dict:
    """NLTK `corpus_bleu` with its defaults, one reference per output (0-1)."""
    return nltk_corpus_bleu(inputs.hypotheses, [[r] for r in inputs.references]).to_dict()


@register_metric("cognition_bleu", scale="percent")
def cognition_bleu_metric(inputs: MetricInputs) -> dict:
    """CoGnition's character BLEU (the Dangle pipeline's, 0-100)."""
    return cognition_bleu(inputs.hypotheses, inputs.ref_text).to_dict()


@register_metric("pooled_bleu", scale="fraction")
def pooled_bleu_metric(inputs: MetricInputs) -> dict | None:
    """The lexicon paper's Tatoeba BLEU (full and 1-shot, 0-1): references of equal sources pooled over the
    splits the dataset names in `pooled_references` (the first is the training split that defines the 1-shot
    items). None for a dataset that pools none, or a split not its own (a file)."""
    ds = inputs.dataset_spec
    pool = tuple(getattr(ds, "pooled_references", ()))
    if not pool or inputs.split not in ds.splits or inputs.load_split is None:
        return None
    if not inputs.sources:
        raise ValueError("pooled_bleu pools references by source: the inputs need `sources`")
    other = {s: inputs.load_split(s) for s in pool if s != inputs.split}
    extra = [(e.source, e.target) for exs in other.values() for e in exs]
    train = [e.source for e in other[pool[0]]] if pool[0] in other else inputs.sources
    return pooled_bleu(inputs.sources, inputs.hyp_text, inputs.ref_tokens, extra, train)
