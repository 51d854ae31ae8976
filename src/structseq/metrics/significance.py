"""Statistics for comparing systems: mean ± sd and a t confidence interval over seeds, and paired tests between
two systems on the same examples.

Over seeds (`seed_summary`): the mean, the sample standard deviation (n - 1) and the two-sided confidence
interval mean ± t(1 - (1 - level) / 2, n - 1) · sd / sqrt(n), as the CFQ leaderboard reports its 95% intervals
over runs; one seed has no sd and no interval. The t quantile is computed here (`t_quantile`: the regularised
incomplete beta function, inverted by bisection), so nothing beyond the standard library is needed.

Paired tests: a metric that is a ratio of per-example sums (exact match: correct / 1 per example; token
accuracy: right positions / positions; supertag word accuracy: right words / words) is resampled exactly from
those per-example numbers (`ratio_stats`):

- paired bootstrap (`paired_bootstrap`): resample the examples with replacement (the same indices for both
  systems), delta* = m(A*) - m(B*); the two-sided p-value is the share of resamples whose delta* lies at least
  |delta| away from the observed delta (the bootstrap distribution shifted to the null), with the usual +1
  correction: p = (#{|delta* - delta| >= |delta|} + 1) / (R + 1). Identical systems give p = 1.
- approximate randomisation (`approximate_randomization`): swap the two systems' outputs on each example with
  probability 1/2, p = (#{|m(A') - m(B')| >= |delta|} + 1) / (R + 1).

BLEU is not a ratio of per-example sums; its paired tests are sacrebleu's own (`sacrebleu_paired`: sacrebleu's
`PairedTest`, `bs` or `ar`, seeded), so the p-value is the one `sacrebleu --paired-bs` prints. One exception:
two identical lists of outputs get p = 1 (sacrebleu counts strictly greater differences, so it reports
1 / (R + 1) for a system against itself); its own value stays in the result as `sacrebleu_p_value`.
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Sequence
from contextlib import contextmanager

import numpy as np

from .base import tokens

#: the paired tests: paired bootstrap resampling, approximate randomisation
TESTS = ("bootstrap", "ar")
#: metrics whose paired test resamples per-example (numerator, denominator) pairs
RATIO_METRICS = ("exact_match", "token_accuracy", "accuracy", "sentence_accuracy")
_CHUNK = 1_000_000  # resampled example slots held at once (memory stays bounded on large test sets)


# ---------------------------------------------------------------- over seeds
def mean_sd(xs: Sequence[float]) -> tuple[float, float | None]:
    """Mean and sample standard deviation (None for one value), as `statistics` computes them."""
    if not xs:
        raise ValueError("no values")
    return statistics.mean(xs), (statistics.stdev(xs) if len(xs) > 1 else None)


def format_mean_sd(xs: Sequence[float], digits: int = 3) -> str:
    """`0.812 ± 0.034` (`0.812` for one value): every mean ± sd cell of the tables and reports."""
    return format_mean_and_sd(*mean_sd(xs), digits)


def format_mean_and_sd(mean: float, sd: float | None, digits: int = 3, pm: str = "±") -> str:
    """`format_mean_sd` of a mean and sd computed before (a report's summary); `pm` for LaTeX's `$\\pm$`."""
    return f"{mean:.{digits}f}" + (f" {pm} {sd:.{digits}f}" if sd is not None else "")


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for num in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-15:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t value with P(T <= t) = p (bisection on `t_cdf`, to 1e-12)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got p={p}, df={df}")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_cdf(mid, df) < p else (lo, mid)
    return 0.5 * (lo + hi)


def confidence_interval(xs: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """The t interval of the mean over `xs` (seeds): mean ± t(1 - (1 - level)/2, n - 1) · sd / sqrt(n); None
    for one value."""
    mean, sd = mean_sd(xs)
    if sd is None:
        return None
    half = t_quantile(1.0 - (1.0 - level) / 2.0, len(xs) - 1) * sd / math.sqrt(len(xs))
    return mean - half, mean + half


def seed_summary(xs: Sequence[float], level: float = 0.95) -> dict:
    """{n, mean, sd, ci: [low, high] or None, level, values} of one metric over seeds."""
    mean, sd = mean_sd(xs)
    ci = confidence_interval(xs, level)
    return {"n": len(xs), "mean": mean, "sd": sd, "ci": list(ci) if ci else None, "level": level, "values": list(xs)}


# ---------------------------------------------------------------- unpaired, over runs
#: how `runs_test` decides, as the compare report states it
RUNS_TEST_METHOD = (
    "unpaired, over the runs' scores: Welch's t-test (t = (mean A - mean B) / sqrt(sd_A^2/n_A + sd_B^2/n_B), "
    "Welch-Satterthwaite degrees of freedom); with one run on a side, that run against the other side's runs, "
    "whose sd it is assumed to share (t = (x - mean) / (sd * sqrt(1 + 1/n)), n - 1 degrees of freedom)"
)


def runs_test(xs: Sequence[float], ys: Sequence[float]) -> dict:
    """The two-sided unpaired test of two sides' per-run scores (`RUNS_TEST_METHOD`): {test, delta (mean(xs) -
    mean(ys)), t, df, p_value, n_a, n_b}. Needs at least three runs in all. Runs that all score alike leave no
    spread to weigh a difference against: then p = 1 (no significant difference, stated in `note`), never a
    certainty that a handful of runs cannot give."""
    (ma, sa), (mb, sb) = mean_sd(xs), mean_sd(ys)
    na, nb = len(xs), len(ys)
    if na + nb < 3:
        raise ValueError("an unpaired test over runs needs at least three runs in all")
    delta = ma - mb
    if sa is not None and sb is not None:
        va, vb = sa * sa / na, sb * sb / nb
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va * va / (na - 1) + vb * vb / (nb - 1)) if se > 0 else float(na + nb - 2)
        name = "welch"
    else:
        sd, n = (sa, na) if sa is not None else (sb, nb)
        se, df, name = sd * math.sqrt(1.0 + 1.0 / n), float(n - 1), "one-run"
    out = {"test": name, "delta": delta, "df": df, "n_a": na, "n_b": nb}
    if se == 0:
        note = "the runs' scores do not vary: no spread to weigh the difference against, p = 1"
        return {**out, "t": None, "p_value": 1.0, "note": note}
    t = delta / se
    return {**out, "t": t, "p_value": min(1.0, 2.0 * (1.0 - t_cdf(abs(t), df)))}


# ---------------------------------------------------------------- paired tests on ratio metrics
def ratio_stats(metric: str, hypotheses: Sequence, references: Sequence) -> np.ndarray:
    """Per-example (numerator, denominator), shape (n, 2), whose column sums' ratio is `metric` (see
    `ratio_score`): exact_match and sentence_accuracy (1 if the token sequences are equal, of 1),
    token_accuracy (equal tokens position by position, of the longer length: `metrics.sequence`), accuracy
    (a supertagger's right categories, of the reference's words)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    out = np.zeros((len(hypotheses), 2), dtype=np.float64)
    for i, (h, r) in enumerate(zip(hypotheses, references)):
        ht, rt = tokens(h), tokens(r)
        if metric in ("exact_match", "sentence_accuracy"):
            out[i] = (ht == rt, 1)
        elif metric == "token_accuracy":
            out[i] = (sum(a == b for a, b in zip(ht, rt)), max(len(ht), len(rt)))
        elif metric == "accuracy":
            out[i] = (sum(a == b for a, b in zip(ht, rt)), len(rt))
        else:
            raise ValueError(f"no per-example statistics for metric {metric!r}; choices: {', '.join(RATIO_METRICS)}")
    return out


def ratio_score(stats: np.ndarray) -> float:
    """sum(numerators) / sum(denominators) (1.0 when nothing is counted, as token accuracy of empty pairs)."""
    den = float(stats[:, 1].sum())
    return float(stats[:, 0].sum()) / den if den else 1.0


def _ratios(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.ones_like(num, dtype=np.float64), where=den != 0)


def _check_pair(a: np.ndarray, b: np.ndarray, resamples: int) -> None:
    if a.shape != b.shape or a.ndim != 2 or a.shape[1] != 2:
        raise ValueError(f"paired statistics must both be (n, 2), got {a.shape} and {b.shape}")
    if not len(a):
        raise ValueError("no examples to test")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")


def _chunks(total: int, n: int):
    step = max(1, _CHUNK // max(n, 1))
    for start in range(0, total, step):
        yield min(step, total - start)


def paired_bootstrap(
    a: np.ndarray, b: np.ndarray, resamples: int = 1000, seed: int = 12345, level: float = 0.95
) -> dict:
    """The paired bootstrap test of two systems' `ratio_stats` (module docstring): {score_a, score_b, delta,
    p_value, delta_ci (the percentile interval of delta*), resamples, seed, test}."""
    _check_pair(a, b, resamples)
    n = len(a)
    delta = ratio_score(a) - ratio_score(b)
    rng = np.random.default_rng(seed)
    deltas = []
    for k in _chunks(resamples, n):
        idx = rng.integers(0, n, size=(k, n))
        sa, sb = a[idx].sum(1), b[idx].sum(1)
        deltas.append(_ratios(sa[:, 0], sa[:, 1]) - _ratios(sb[:, 0], sb[:, 1]))
    d = np.concatenate(deltas)
    hits = int(np.sum(np.abs(d - delta) >= abs(delta) - 1e-12))
    tail = (1.0 - level) / 2.0
    return {
        "test": "bootstrap",
        "score_a": ratio_score(a),
        "score_b": ratio_score(b),
        "delta": delta,
        "p_value": (hits + 1) / (resamples + 1),
        "delta_ci": [float(np.quantile(d, tail)), float(np.quantile(d, 1.0 - tail))],
        "resamples": resamples,
        "seed": seed,
    }


def approximate_randomization(a: np.ndarray, b: np.ndarray, trials: int = 1000, seed: int = 12345) -> dict:
    """The approximate randomisation test of two systems' `ratio_stats` (module docstring): {score_a, score_b,
    delta, p_value, resamples, seed, test}."""
    _check_pair(a, b, trials)
    n = len(a)
    delta = ratio_score(a) - ratio_score(b)
    rng = np.random.default_rng(seed)
    hits = 0
    for k in _chunks(trials, n):
        swap = rng.integers(0, 2, size=(k, n), dtype=bool)[..., None]
        sa = np.where(swap, b[None], a[None]).sum(1)
        sb = np.where(swap, a[None], b[None]).sum(1)
        diff = np.abs(_ratios(sa[:, 0], sa[:, 1]) - _ratios(sb[:, 0], sb[:, 1]))
        hits += int(np.sum(diff >= abs(delta) - 1e-12))
    return {
        "test": "ar",
        "score_a": ratio_score(a),
        "score_b": ratio_score(b),
        "delta": delta,
        "p_value": (hits + 1) / (trials + 1),
        "resamples": trials,
        "seed": seed,
    }


def paired_test(
    a: np.ndarray, b: np.ndarray, test: str = "bootstrap", resamples: int = 1000, seed: int = 12345
) -> dict:
    """`paired_bootstrap` or `approximate_randomization` by name (`TESTS`)."""
    if test == "bootstrap":
        return paired_bootstrap(a, b, resamples, seed)
    if test == "ar":
        return approximate_randomization(a, b, resamples, seed)
    raise ValueError(f"unknown paired test {test!r}; choices: {', '.join(TESTS)}")


# ---------------------------------------------------------------- BLEU: sacrebleu's own paired tests
@contextmanager
def _sacrebleu_seed(seed: int):
    """sacrebleu's PairedTest reads its seed from $SACREBLEU_SEED (and treats 0 as unseeded)."""
    old = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("SACREBLEU_SEED", None)
        else:
            os.environ["SACREBLEU_SEED"] = old


def sacrebleu_paired(
    hyps_a: Sequence[str],
    hyps_b: Sequence[str],
    refs: Sequence[str],
    *,
    tokenize: str = "13a",
    test: str = "bootstrap",
    resamples: int = 1000,
    seed: int = 12345,
) -> dict:
    """sacrebleu's paired test (`PairedTest`, test_type `bs` or `ar`, `resamples` samples, `seed`) of corpus BLEU,
    A as the baseline: {score_a, score_b, delta, p_value, sacrebleu_p_value, signature, ...}; `bs` also gives
    sacrebleu's bootstrap mean and 95% half-width of each system (`mean_a`, `ci_a`, `mean_b`, `ci_b`)."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import PairedTest

    if test not in TESTS:
        raise ValueError(f"unknown paired test {test!r}; choices: {', '.join(TESTS)}")
    if seed < 1:
        raise ValueError(f"sacrebleu's paired test needs a seed >= 1 (it treats 0 as unseeded), got {seed}")
    if not (len(hyps_a) == len(hyps_b) == len(refs)) or not refs:
        raise ValueError(f"paired BLEU needs as many outputs as references: {len(hyps_a)}, {len(hyps_b)}, {len(refs)}")
    kind = "bs" if test == "bootstrap" else "ar"
    with _sacrebleu_seed(seed):
        signatures, scores = PairedTest(
            [("A", list(hyps_a)), ("B", list(hyps_b))],
            {"BLEU": BLEU(tokenize=tokenize)},
            [list(refs)],
            test_type=kind,
            n_samples=resamples,
        )()
    base, other = scores["BLEU"]
    identical = list(hyps_a) == list(hyps_b)
    out = {
        "test": test,
        "score_a": float(base.score),
        "score_b": float(other.score),
        "delta": float(base.score - other.score),
        "p_value": 1.0 if identical else float(other.p_value),
        "sacrebleu_p_value": float(other.p_value),
        "resamples": resamples,
        "seed": seed,
        "signature": "bleu|" + signatures["BLEU"].format(),
    }
    if identical:
        out["note"] = "identical outputs: p = 1 (sacrebleu reports 1/(R+1) for a system against itself)"
    if kind == "bs":
        out.update(mean_a=float(base.mean), ci_a=float(base.ci), mean_b=float(other.mean), ci_b=float(other.ci))
    return out


# ---------------------------------------------------------------- one system: sacrebleu's bootstrap interval
#: the range of a score by the scale its signature states (`metrics.base.stated_scale`)
RANGES = {"fraction": (0.0, 1.0), "percent": (0.0, 100.0)}


def _estimate_ci(scores: Sequence[float]) -> tuple[float, float]:
    from sacrebleu.significance import estimate_ci

    mean, half = estimate_ci(np.asarray(scores, dtype=np.float64))
    return float(mean), float(half)


def bootstrap_ci(stats: np.ndarray, resamples: int = 1000, seed: int = 12345) -> dict:
    """One system's bootstrap interval as sacrebleu computes it for BLEU (`_bootstrap_resample`, `estimate_ci`):
    `resamples` resamples of the examples (numpy's default_rng(seed).choice), the mean of their scores and the
    half-width between the 2.5% and 97.5% order statistics: {mean, ci} (shown `mean ± ci`)."""
    n = len(stats)
    idx = np.random.default_rng(seed).choice(n, size=(resamples, n), replace=True)
    sums = stats[idx].sum(1)
    mean, half = _estimate_ci(_ratios(sums[:, 0], sums[:, 1]))
    return {"mean": mean, "ci": half}


def bleu_bootstrap_ci(hyps: Sequence[str], refs: Sequence[str], tokenize: str, resamples: int, seed: int) -> dict:
    """sacrebleu's own bootstrap interval of one system's corpus BLEU (what `sacrebleu --confidence` prints)."""
    from sacrebleu.metrics import BLEU
    from sacrebleu.significance import _bootstrap_resample

    metric = BLEU(tokenize=tokenize)
    stats = metric._extract_corpus_statistics(list(hyps), [list(refs)])
    with _sacrebleu_seed(seed):
        _, scores = _bootstrap_resample(stats, metric, resamples)
    mean, half = _estimate_ci([s.score for s in scores])
    return {"mean": mean, "ci": half}


def within(interval: Sequence[float] | None, scale: str | None) -> list[float] | None:
    """An interval cut to the score's range (a t interval over three seeds can reach past 100 BLEU)."""
    if interval is None:
        return None
    low, high = RANGES.get(scale, (-math.inf, math.inf))
    return [max(low, interval[0]), min(high, interval[1])]


#: how `verdict` decides, as the report states it
VERDICT_METHOD = (
    "one test: p < {alpha}; several seed pairs: every pair's p < {alpha} with the same sign "
    "(an intersection-union test, so the verdict's error rate stays at most {alpha})"
)


def verdict(tests: Sequence[dict], level: float = 0.95) -> str:
    """'A', 'B' (the better system, significantly) or '=' (no significant difference) from the paired tests of
    one metric: one test, or one per seed pair, all of which must agree (`VERDICT_METHOD`)."""
    alpha = 1.0 - level
    if not tests or any(t["p_value"] >= alpha for t in tests):
        return "="
    signs = {t["delta"] > 0 for t in tests}
    if len(signs) > 1 or all(t["delta"] == 0 for t in tests):
        return "="
    return "A" if signs.pop() else "B"
