"""Supertagging scores: whole-category word accuracy, overall and by the gold category's training frequency
(frequent 100+, uncommon 10-99, rare 1-9, unseen 0; the bins of Kogkalidis & Moortgat 2023), sentence
accuracy, k-best oracle accuracy and the multi-tagger curve (accuracy of "gold within beta of the best"
against the average number of categories kept per word, as C&C / EasyCCG / Moot 2015 report)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from structseq import __version__
from structseq.metrics.base import MetricInputs, check_parallel, signature
from structseq.registry import register_metric

BINS = (("frequent", 100, math.inf), ("uncommon", 10, 100), ("rare", 1, 10), ("unseen", 0, 1))
DEFAULT_BETAS = (1.0, 0.1, 0.01, 0.001, 0.0001)

#: A word's k-best list: (category, log-probability), best first.
KBest = Sequence[tuple[str, float]]


def bin_of(count: int) -> str:
    for name, lo, hi in BINS:
        if lo <= count < hi:
            return name
    raise ValueError(count)


def multitag(kbest: KBest, beta: float, max_tags: int = 50) -> list[tuple[str, float]]:
    """The categories within a factor beta of the best one's probability (at most max_tags)."""
    if not kbest:
        return []
    floor = kbest[0][1] + math.log(beta) if beta > 0 else -math.inf
    return [(c, s) for c, s in kbest[:max_tags] if s >= floor]


def supertag_scores(
    gold: Sequence[Sequence[str]],
    kbest: Sequence[Sequence[KBest]],
    train_counts: Counter,
    *,
    betas: Sequence[float] = DEFAULT_BETAS,
    max_tags: int = 50,
    beam: int = 1,
    repaired: Sequence[Sequence[bool]] | None = None,
    train_name: str = "train",
) -> dict:
    """Every supertagging score of a corpus. `gold`: categories per sentence (canonical strings); `kbest`:
    per sentence, per word, the k-best list; `train_counts`: training frequency of each category;
    `repaired`: per word, whether the decoder's unconstrained choice was ill-formed (tree taggers).
    Scores (`accuracy`, `sentence_accuracy`, `accuracy_<bin>`, `oracle_accuracy`) are {score (a fraction),
    signature, n, correct}; `n` of a bin is its number of gold words. The multi-tagger curve's `accuracy` is a
    fraction too. (Records written before signatures stated `scale:fraction` hold percents.)"""
    n_sent = check_parallel(kbest, gold)
    bins = {name: [0, 0] for name, _, _ in BINS}  # name -> [correct, total]
    correct = total = sent_ok = oracle = 0
    unseen_pred = unseen_pred_ok = n_repaired = 0
    curve = {b: [0, 0] for b in betas}  # beta -> [gold kept, categories kept]
    for i, (g, kb) in enumerate(zip(gold, kbest)):
        if len(g) != len(kb):
            raise ValueError(f"sentence {i + 1}: {len(g)} gold categories but {len(kb)} predictions")
        all_ok = True
        for j, (cat, cands) in enumerate(zip(g, kb)):
            best = cands[0][0] if cands else None
            ok = best == cat
            correct, total, all_ok = correct + ok, total + 1, all_ok and ok
            b = bins[bin_of(train_counts.get(cat, 0))]
            b[0], b[1] = b[0] + ok, b[1] + 1
            oracle += any(c == cat for c, _ in cands)
            if best is not None and train_counts.get(best, 0) == 0:
                unseen_pred, unseen_pred_ok = unseen_pred + 1, unseen_pred_ok + ok
            if repaired is not None:
                n_repaired += bool(repaired[i][j])
            for beta in betas:
                kept = multitag(cands, beta, max_tags)
                curve[beta][0] += any(c == cat for c, _ in kept)
                curve[beta][1] += len(kept)
        sent_ok += all_ok
    pct = lambda a, n: a / n if n else 0.0
    sig = signature(
        "supertag",
        acc="whole-category",
        bins="100+/10-99/1-9/0",
        freq=train_name,
        beam=beam,
        max_tags=max_tags,
        version=__version__,
        scale="fraction",
    )

    def score(value: float, n: int, right: int) -> dict:  # what `structseq evaluate` prints: score + signature
        return {"score": value, "signature": sig, "n": n, "correct": right}

    out = {
        "accuracy": score(pct(correct, total), total, correct),
        "sentence_accuracy": score(pct(sent_ok, n_sent), n_sent, sent_ok),
        **{f"accuracy_{name}": score(pct(c, n), n, c) for name, (c, n) in bins.items()},
        "unseen_predicted": unseen_pred,
        "unseen_predicted_correct": unseen_pred_ok,
        "signature": sig,
    }
    if repaired is not None:
        out["ill_formed_repaired"] = n_repaired
    if beam > 1:
        out["oracle_accuracy"] = score(pct(oracle, total), total, oracle)
        out["multitag"] = [
            {"beta": b, "accuracy": pct(k, total), "tags_per_word": n / max(total, 1)} for b, (k, n) in curve.items()
        ]
    return out


# ---------------------------------------------------------------- registered metrics

#: what a supertagging report holds beside its scores (counts, the multi-tagger curve, the shared signature)
FACTS = ("unseen_predicted", "unseen_predicted_correct", "signature", "ill_formed_repaired", "multitag")


def supertag_tally(inputs: MetricInputs) -> dict | None:
    """`supertag_scores` of the inputs, computed once: `references` are the gold categories per sentence and
    `extras` holds `kbest` (per sentence, per word, the k-best list) and `train_counts`, optionally `betas`,
    `max_tags`, `beam`, `repaired` and `train_name`. None when the inputs are not a tagger's (no `kbest`)."""
    x = inputs.extras
    if "kbest" not in x:
        return None
    return inputs.memo(
        "supertag",
        lambda: supertag_scores(
            [list(g) for g in inputs.ref_tokens],
            x["kbest"],
            x["train_counts"],
            betas=x.get("betas", DEFAULT_BETAS),
            max_tags=x.get("max_tags", 50),
            beam=x.get("beam", 1),
            repaired=x.get("repaired"),
            train_name=x.get("train_name", "train"),
        ),
    )


def supertag_facts(inputs: MetricInputs) -> dict:
    """The report's non-score entries of a tagger (FACTS), {} for other inputs."""
    tally = supertag_tally(inputs)
    return {k: tally[k] for k in FACTS if k in tally} if tally is not None else {}


def _register(name: str, doc: str) -> None:
    def compute(inputs: MetricInputs) -> dict | None:
        tally = supertag_tally(inputs)
        return None if tally is None else tally.get(name)

    compute.__name__ = compute.__qualname__ = f"{name}_metric"
    compute.__doc__ = doc
    register_metric(name, scale="fraction")(compute)


_register("accuracy", "Supertagging: whole-category word accuracy (a fraction).")
_register("sentence_accuracy", "Supertagging: share of sentences whose every category is right.")
for _bin, _lo, _hi in BINS:
    _register(
        f"accuracy_{_bin}",
        f"Supertagging: word accuracy on the gold categories of training frequency "
        f"{_lo}{'+' if _hi == math.inf else '' if _hi == _lo + 1 else f'-{_hi - 1}'} ({_bin}).",
    )
_register("oracle_accuracy", "Supertagging: share of words whose gold category is in the k-best list (beam > 1).")
