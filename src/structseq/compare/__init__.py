"""`structseq compare A B --split S`: two systems on the same examples, each one run, several runs (seeds) or
prediction files, read from the predictions TSV that `structseq evaluate` writes (RUN/predictions/LABEL.tsv,
`api.prediction_label`) and the metrics JSON beside it.

Per metric: mean ± sd and a t confidence interval over each side's seeds (`metrics.significance.seed_summary`),
and a paired test between the sides on the same examples: exact match, token accuracy and supertag accuracy
by resampling examples (paired bootstrap, or approximate randomisation), BLEU through sacrebleu's own paired
test. With several seeds a side, the test runs on each seed pair (`pairing: seeds`) when the seeds pair up (the
same seeds on both sides, or one output a side); otherwise every run is tested once, unpaired, on the runs'
scores (`metrics.significance.runs_test`: Welch's t-test), so no seed is left out of the test that the mean
holds; or the test runs once on the per-example pool (`pairing: pooled`: the
per-example statistics averaged over seeds; for BLEU the output most seeds agree on). The report says which.
Rendering (Markdown, LaTeX, JSON) is in `structseq.compare.render`.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from structseq.compare.systems import (  # re-exported: their old home
    Output,
    check_same_examples,
    check_settings,
    expand,
    load_system,
    predictions_path,
    read_predictions,
    report_score,
)
from structseq.errors import StructseqError
from structseq.metrics import significance as sig

PAIRINGS = ("seeds", "pooled")
#: the signature of a metric the registry cannot compute from predictions alone (a tagger's need its k-best
#: lists), recomputed from the per-example ratios
RATIO_SIGNATURE = "{name}|acc:whole-category|from:predictions|scale:fraction"


__all__ = ["Output", "check_same_examples", "compare", "expand", "load_system", "predictions_path", "read_predictions"]


# ---------------------------------------------------------------- the comparison
def bleu_tokenizer(outputs: list[Output], given: str | None) -> str:
    """`given`, else the tokenizer the metrics JSONs' BLEU signatures state (one for all), else 13a."""
    if given:
        return given
    stated = {
        part[4:]
        for o in outputs
        for part in o.report.get("bleu", {}).get("signature", "").split("|")
        if part.startswith("tok:")
    }
    if len(stated) > 1:
        raise StructseqError(
            f"the evaluations scored BLEU with different tokenizers ({', '.join(sorted(stated))}); "
            "choose one with --bleu-tokenize"
        )
    return stated.pop() if stated else "13a"


def metric_scores(o: Output, tokenize: str) -> dict[str, dict]:
    """{metric: {score, signature}} of one output, computed from its predictions: each of its task's compared
    metrics (`Output.metrics`) by the registry, or (a metric that needs more than predictions, as a tagger's
    k-best lists) from its per-example ratios."""
    from structseq.metrics.base import MetricInputs
    from structseq.metrics.report import compute_metric

    inputs = MetricInputs(o.hypotheses, o.references, bleu_tokenize=tokenize, tokenized=True)
    scores = {}
    for m in o.metrics:
        scores[m] = compute_metric(m, inputs) or {
            "score": sig.ratio_score(sig.ratio_stats(m, o.hypotheses, o.references)),
            "signature": RATIO_SIGNATURE.format(name=m),
        }
    return _limited(scores, o)


def _limited(scores: dict, o: Output) -> dict:
    """Recomputed scores keep the `|limit:N` their evaluation's signatures state."""
    limit = (o.settings or {}).get("limit")
    if limit is not None:
        for v in scores.values():
            if not v["signature"].endswith(f"|limit:{limit}") and f"|limit:{limit}|" not in v["signature"]:
                v["signature"] += f"|limit:{limit}"
    return scores


def report_scores(outputs: list[Output], computed: set[str]) -> dict[str, list[tuple[float, str]]]:
    """Scores of the metrics JSONs not computed from predictions, for metrics every output's report holds."""
    shared = None
    for o in outputs:
        names = {k for k, v in o.report.items() if isinstance(v, dict) and "score" in v and "signature" in v}
        shared = names if shared is None else shared & names
    return {
        m: [(report_score(o, m), o.report[m]["signature"]) for o in outputs]
        for m in sorted((shared or set()) - computed)
    }


def _pairs(a: list[Output], b: list[Output]) -> list[tuple[Output, Output]] | None:
    """Seed pairs, when the outputs pair up: one output a side, or the same seeds on both sides (each side is
    sorted by seed, so they pair by seed number). None otherwise (other seeds, other counts, no seeds stated):
    then every run is tested, unpaired (`sig.runs_test`), never only as many pairs as the smaller side has."""
    if len(a) == len(b) == 1:
        return [(a[0], b[0])]
    seeds = [o.seed for o in a]
    if None not in seeds and seeds == [o.seed for o in b]:
        return list(zip(a, b))
    return None


def _majority(outputs: list[Output]) -> list[str]:
    """Per example, the output most seeds agree on (ties: the lowest seed's)."""
    out = []
    for hyps in zip(*(o.hypotheses for o in outputs)):
        counts = Counter(hyps)
        out.append(max(hyps, key=lambda h: (counts[h], -hyps.index(h))))
    return out


def _test(metric: str, a: list[Output], b: list[Output], opts: dict) -> dict:
    """One paired test of `metric` between the outputs `a` and `b` (one each, or pooled over seeds)."""
    refs = a[0].references
    if metric == "bleu":
        ha = a[0].hypotheses if len(a) == 1 else _majority(a)
        hb = b[0].hypotheses if len(b) == 1 else _majority(b)
        return sig.sacrebleu_paired(
            ha, hb, refs, tokenize=opts["tokenize"], test=opts["test"], resamples=opts["resamples"], seed=opts["seed"]
        )
    sa = np.mean([sig.ratio_stats(metric, o.hypotheses, refs) for o in a], axis=0)
    sb = np.mean([sig.ratio_stats(metric, o.hypotheses, refs) for o in b], axis=0)
    return sig.paired_test(sa, sb, opts["test"], opts["resamples"], opts["seed"])


def _paired(metric: str, a: list[Output], b: list[Output], opts: dict, scores: tuple[list, list]) -> list[dict]:
    """The test(s) of one metric: pooled, per seed pair, or (seeds that do not pair up) one unpaired test of
    every run's score `scores` (A's, B's)."""
    every = {"a": [o.ident for o in a], "b": [o.ident for o in b]}
    if opts["pairing"] == "pooled":
        return [{**every, **_test(metric, a, b, opts)}]
    pairs = _pairs(a, b)
    if pairs is None:
        return [{**every, **sig.runs_test(*scores)}]
    return [{"a": x.ident, "b": y.ident, **_test(metric, [x], [y], opts)} for x, y in pairs]


def _registered(name: str, o: Output, tokenize: str) -> dict:
    """A registered metric (`--metric`, plugins too) of one output's predictions: {score, signature}."""
    from structseq.metrics.base import MetricInputs
    from structseq.metrics.report import compute_metric

    inputs = MetricInputs(o.hypotheses, o.references, bleu_tokenize=tokenize, tokenized=True)
    result = compute_metric(name, inputs)
    if result is None or not isinstance(result.get("score"), (int, float)):
        raise StructseqError(f"--metric {name}: gives no single score from predictions alone")
    return _limited({name: result}, o)[name]


def _bootstrap(metric: str, o: Output, opts: dict) -> dict:
    """One output's bootstrap interval of `metric`, as sacrebleu computes it (`sig.bootstrap_ci`)."""
    if metric == "bleu":
        return sig.bleu_bootstrap_ci(o.hypotheses, o.references, opts["tokenize"], opts["resamples"], opts["seed"])
    stats = sig.ratio_stats(metric, o.hypotheses, o.references)
    return sig.bootstrap_ci(stats, opts["resamples"], opts["seed"])


def _side(xs: list[float], level: float, signature: str, bootstrap: list[dict] | None = None) -> dict:
    """One side's `seed_summary`, its t interval cut to the metric's range (`range_ci`), each output's
    bootstrap interval, and `interval`: what the report shows (the t interval over seeds; for one seed, the
    bootstrap mean ± half-width, cut to the range)."""
    from structseq.metrics.base import stated_scale

    scale = stated_scale(signature)
    out = sig.seed_summary(xs, level)
    out["range_ci"] = sig.within(out["ci"], scale)
    out["bootstrap"] = bootstrap
    if len(xs) == 1 and bootstrap:
        mean, half = bootstrap[0]["mean"], bootstrap[0]["ci"]
        out["interval"] = sig.within([mean - half, mean + half], scale)
    else:
        out["interval"] = out["range_ci"]
    return out


def _row(name, signature, xs, ys, level, paired=None, boots=(None, None), note=None) -> dict:
    """One metric of the report: each side's summary (`_side`), the difference of the means, the paired
    test(s) and the verdict (None without a paired test)."""
    row = {
        "name": name,
        "signature": signature,
        "A": _side(xs, level, signature, boots[0]),
        "B": _side(ys, level, signature, boots[1]),
        "delta": sig.mean_sd(xs)[0] - sig.mean_sd(ys)[0],
        "paired": paired,
        "verdict": None if paired is None else sig.verdict(paired, level),
    }
    return {**row, "note": note} if note else row


def _metric_rows(a: list[Output], b: list[Output], opts: dict, level: float, extra: tuple[str, ...]) -> list[dict]:
    """The report's metrics: those recomputed from the predictions (with paired tests and bootstrap
    intervals), the `--metric` ones, then the other scores every metrics JSON holds."""
    tokenize, rows = opts["tokenize"], []
    scores = {o.path: metric_scores(o, tokenize) for o in a + b}
    for m in a[0].metrics:
        xs, ys = ([scores[o.path][m]["score"] for o in side] for side in (a, b))
        boots = [[_bootstrap(m, o, opts) for o in side] for side in (a, b)]
        paired = _paired(m, a, b, opts, (xs, ys))
        rows.append(_row(m, scores[a[0].path][m]["signature"], xs, ys, level, paired, boots))
    for m in extra:
        xs, ys = ([_registered(m, o, tokenize) for o in side] for side in (a, b))
        values = ([x["score"] for x in xs], [y["score"] for y in ys])
        paired = _paired(m, a, b, opts, values) if m in sig.RATIO_METRICS else None
        note = None if paired else "--metric, computed from the predictions; no paired test"
        rows.append(
            _row(m, xs[0]["signature"], [x["score"] for x in xs], [y["score"] for y in ys], level, paired, note=note)
        )
    for m, pairs in report_scores(a + b, set(a[0].metrics) | set(extra)).items():
        xs, ys = [s for s, _ in pairs[: len(a)]], [s for s, _ in pairs[len(a) :]]
        rows.append(_row(m, pairs[0][1], xs, ys, level, note="from the metrics JSON; no paired test"))
    return rows


def compare(
    a: list[Output],
    b: list[Output],
    *,
    test: str = "bootstrap",
    resamples: int = 1000,
    seed: int = 12345,
    pairing: str = "seeds",
    level: float = 0.95,
    bleu_tokenize: str | None = None,
    names: tuple[str, str] = ("A", "B"),
    split: str | None = None,
    allow_mixed: bool = False,
    extra_metrics: tuple[str, ...] = (),
) -> dict:
    """The comparison report (JSON-able): per metric each side's `seed_summary`, the difference of the means,
    and the paired test(s); `extra_metrics`: registered metrics (`--metric`) computed from the predictions too.
    A side whose outputs were evaluated with different settings is an error unless
    `allow_mixed` (`check_settings`)."""
    if test not in sig.TESTS:
        raise StructseqError(f"--test: unknown test {test!r}; choices: {', '.join(sig.TESTS)}")
    if pairing not in PAIRINGS:
        raise StructseqError(f"--pairing: unknown {pairing!r}; choices: {', '.join(PAIRINGS)}")
    if resamples < 1 or seed < 1 or not 0 < level < 1:
        raise StructseqError("--resamples and --seed must be >= 1 and --level within (0, 1)")
    check_same_examples(a + b)
    for side, name in ((a, names[0]), (b, names[1])):
        check_settings(side, name, allow_mixed)
    tokenize = bleu_tokenizer(a + b, bleu_tokenize)
    opts = {"test": test, "resamples": resamples, "seed": seed, "pairing": pairing, "tokenize": tokenize}
    metrics = _metric_rows(a, b, opts, level, extra_metrics)
    seed_pairs = _pairs(a, b) if pairing == "seeds" else None
    pairs = None if seed_pairs is None else [[x.ident, y.ident] for x, y in seed_pairs]
    unpaired = pairing == "seeds" and seed_pairs is None
    return {
        "split": split,
        "n_examples": len(a[0].references),
        "kind": a[0].kind,
        "systems": {
            key: {
                "name": name,
                "outputs": [
                    {
                        "path": str(o.path),
                        "seed": o.seed,
                        "checkpoint": o.report.get("checkpoint"),
                        "settings": o.settings,
                    }
                    for o in side
                ],
            }
            for key, name, side in (("A", names[0], a), ("B", names[1], b))
        },
        "test": {
            "name": test,
            "resamples": resamples,
            "seed": seed,
            "pairing": pairing,
            "pairs": pairs,
            "unpaired": sig.RUNS_TEST_METHOD if unpaired else None,
            "level": level,
            "bleu": f"sacrebleu PairedTest ({'bs' if test == 'bootstrap' else 'ar'})",
            "bleu_tokenize": tokenize,
            "verdict": sig.VERDICT_METHOD.format(alpha=round(1 - level, 6)),
        },
        "metrics": metrics,
    }
