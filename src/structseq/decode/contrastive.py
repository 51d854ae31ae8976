"""Contrastive evaluation (DiscEvalMT, Bawden et al. 2018) and the context diagnostics of Wang et al. 2019.

Contrastive accuracy: each example has a correct and an incorrect translation of the current sentence; the
model prefers the correct one when its score is *strictly* higher. A tie counts as wrong (a model whose
scores are all equal gets 0, never 100 or 50). A candidate's score is the summed log-probability of its
current-sentence target tokens only (no context tokens are scored), not length-normalised.

Backward perplexity: exp of the mean negative log-probability of the source S given the generation under a
reverse model (a run trained with `task.reverse: true`): how much of the source the generation keeps.

Context use: of the nouns of the context C that the gold target contains, the share the generation also
contains (meaningful when C and T share a language). The noun tagger is pluggable: a name from
`structseq.compose.stats.TAGGERS` (TextBlob's offline tagger) or any callable sentences -> Penn tags.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

import torch

from structseq.data.postag import Tagger
from structseq.errors import ConfigError
from structseq.metrics.base import Score, signature


def contrastive_accuracy(
    correct_scores: Sequence[float],
    incorrect_scores: Sequence[float],
    categories: Sequence[str] | None = None,
    *,
    context: str = "source",
) -> dict:
    """{"accuracy": Score, "per_phenomenon": {name: Score}}; higher score = preferred, ties wrong."""
    if len(correct_scores) != len(incorrect_scores):
        raise ValueError(f"{len(correct_scores)} correct but {len(incorrect_scores)} incorrect scores")
    if not correct_scores:
        raise ValueError("no contrastive pairs to score")
    wins = [float(c) > float(i) for c, i in zip(correct_scores, incorrect_scores)]
    ties = sum(float(c) == float(i) for c, i in zip(correct_scores, incorrect_scores))
    sig = signature("contrastive", score="sum-logprob-current-target", norm="none", ties="wrong", context=context)

    def score(w: list[bool]) -> Score:
        return Score("contrastive_accuracy", sum(w) / len(w), f"{sig}|n:{len(w)}", len(w))

    groups: dict[str, list[bool]] = defaultdict(list)
    for w, cat in zip(wins, categories or ["all"] * len(wins)):
        groups[cat].append(w)
    return {
        "accuracy": score(wins),
        "ties": ties,
        "per_phenomenon": {cat: score(w) for cat, w in sorted(groups.items())},
    }


def target_log_probs(run, examples, batch_size: int = 32) -> list[float]:
    """Summed log-probability of each example's target (current sentence only) given its source and context
    under a loaded run (`structseq.api.Run`), teacher-forced: `structseq score`'s numbers
    (`decode.batched.target_scores`, what `Run.score` and `Run.token_log_probs` read)."""
    from structseq.decode.batched import target_scores

    return [float(t.sum()) for _, t in target_scores(run.model, run.task, run.vocabs, examples, batch_size)]


def score_contrastive(run, examples, batch_size: int = 32, context: str = "source") -> dict:
    """Contrastive accuracy of a run on examples whose `target` is the correct candidate and
    `meta["contrast"]` the incorrect one (what `structseq.data.context.read_contrastive` reads)."""
    from dataclasses import replace

    bad = [replace(e, target=tuple(e.meta["contrast"].split())) for e in examples]
    good_lp, bad_lp = target_log_probs(run, examples, batch_size), target_log_probs(run, bad, batch_size)
    cats = [e.category or "all" for e in examples]
    out = contrastive_accuracy(good_lp, bad_lp, cats, context=context)
    return {
        "accuracy": out["accuracy"].to_dict(),
        "ties": out["ties"],
        "per_phenomenon": {k: v.to_dict() for k, v in out["per_phenomenon"].items()},
    }


@torch.no_grad()
def backward_perplexity(reverse_run, sources: Sequence[str], generations: Sequence[str], batch_size: int = 32) -> Score:
    """exp(-sum log p(S | generation) / |S| tokens) under `reverse_run` (trained with `task.reverse: true`,
    so its examples are (source, target) pairs that it reads as target -> source)."""
    from structseq.data.example import Example
    from structseq.decode.batched import target_scores

    if not reverse_run.task.reversed_pairs:
        raise ValueError("backward perplexity needs a reverse run (trained with task.reverse: true)")
    if len(sources) != len(generations):
        raise ValueError(f"{len(sources)} sources but {len(generations)} generations")
    examples = [Example.from_text(s, g) for s, g in zip(sources, generations)]
    scores = target_scores(reverse_run.model, reverse_run.task, reverse_run.vocabs, examples, batch_size)
    total, n = sum(float(t.sum()) for _, t in scores), sum(len(t) for _, t in scores)
    return Score(
        "backward_perplexity",
        math.exp(-total / max(n, 1)),
        signature("backward_ppl", reverse=str(reverse_run.run_dir), units="model-tokens+eos", n=n),
        len(examples),
    )


def context_use(
    contexts: Sequence[str], references: Sequence[str], hypotheses: Sequence[str], tagger: str | Tagger = "textblob"
) -> Score:
    """Share of the context's nouns present in the gold target that the generation also contains
    (lower-cased word types; nouns: Penn tags NN*)."""
    from structseq.data.postag import get_tagger

    tag = get_tagger(tagger) if isinstance(tagger, str) else tagger
    if tag is None:
        raise ConfigError(
            "context use counts the context's nouns: it needs a tagger (textblob, or MODULE:FUNCTION), not 'none'"
        )
    name = tagger if isinstance(tagger, str) else getattr(tagger, "__name__", "custom")
    ctx_tokens = [c.split() for c in contexts]
    tags = tag(ctx_tokens)
    relevant, used = 0, 0
    for toks, tg, ref, hyp in zip(ctx_tokens, tags, references, hypotheses):
        nouns = {w.lower() for w, t in zip(toks, tg) if t.startswith("NN")}
        in_ref = nouns & {w.lower() for w in ref.split()}
        relevant += len(in_ref)
        used += len(in_ref & {w.lower() for w in hyp.split()})
    return Score(
        "context_use",
        used / relevant if relevant else 0.0,
        signature("context_use", tagger=name, nouns="NN*", case="lower", relevant=relevant),
        len(contexts),
        {"relevant_nouns": relevant, "used_nouns": used},
    )
