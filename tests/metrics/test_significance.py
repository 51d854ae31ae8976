"""What `metrics.significance` promises at its boundaries: exact t quantiles and interval levels (against
scipy's values, tabulated here so that scipy is not a dependency), the n - 1 standard deviation, per-example
ratio statistics, and paired tests that are symmetric in the two systems, include the +1 correction and give
identical systems p = 1."""

import math
import statistics

import numpy as np
import pytest

from structseq.metrics import significance as sig

# scipy.stats.t.ppf(p, df) (scipy 1.14), to 15 digits
T_PPF = {
    (0.975, 1): 12.706204736174694,
    (0.975, 2): 4.302652729749462,
    (0.975, 4): 2.7764451051977934,
    (0.95, 9): 1.833112932656237,
    (0.995, 9): 3.249835541592126,
    (0.975, 30): 2.0422724563012378,
    (0.9, 3): 1.637744353696209,
    (0.75, 1.5): 0.8725946625415716,
}


@pytest.mark.parametrize("p, df", sorted(T_PPF))
def test_t_quantile_matches_scipy_and_is_antisymmetric(p, df):
    assert sig.t_quantile(p, df) == pytest.approx(T_PPF[p, df], rel=1e-9)
    assert sig.t_quantile(1 - p, df) == pytest.approx(-T_PPF[p, df], rel=1e-9)
    assert sig.t_cdf(T_PPF[p, df], df) == pytest.approx(p, abs=1e-12)


@pytest.mark.parametrize("level, p", [(0.95, 0.975), (0.99, 0.995), (0.9, 0.95)])
def test_the_interval_is_two_sided_at_the_level_asked(level, p):
    """mean ± t(1 - (1 - level)/2, n - 1) · sd / sqrt(n): the 95% interval of 5 seeds uses t(0.975, 4)."""
    xs = [0.61, 0.7, 0.64, 0.72, 0.58]
    mean, sd = statistics.mean(xs), statistics.stdev(xs)
    t = {0.975: 2.7764451051977934, 0.995: 4.604094871415897, 0.95: 2.131846786326649}[p]
    low, high = sig.confidence_interval(xs, level)
    assert low == pytest.approx(mean - t * sd / math.sqrt(5), rel=1e-9)
    assert high == pytest.approx(mean + t * sd / math.sqrt(5), rel=1e-9)
    summary = sig.seed_summary(xs, level)
    assert summary["ci"] == [low, high] and summary["level"] == level and summary["n"] == 5


def test_sd_is_the_sample_sd_and_one_seed_has_none():
    xs = [1.0, 2.0, 4.0]
    assert sig.mean_sd(xs) == (pytest.approx(7 / 3), pytest.approx(float(np.std(xs, ddof=1))))
    assert sig.mean_sd([0.5]) == (0.5, None) and sig.confidence_interval([0.5]) is None
    assert sig.seed_summary([0.5])["ci"] is None and sig.format_mean_sd([0.5]) == "0.500"
    assert sig.format_mean_sd([1.0, 2.0, 4.0]) == "2.333 ± 1.528"
    with pytest.raises(ValueError):
        sig.mean_sd([])
    for bad in ((0.0, 3), (1.0, 3), (0.5, 0)):
        with pytest.raises(ValueError):
            sig.t_quantile(*bad)


def test_ratio_stats_per_metric_and_equal_lengths():
    hyps, refs = ["a b c", "a x", ""], ["a b c", "a b d", "q"]
    assert sig.ratio_stats("exact_match", hyps, refs).tolist() == [[1, 1], [0, 1], [0, 1]]
    assert sig.ratio_stats("token_accuracy", hyps, refs).tolist() == [[3, 3], [1, 3], [0, 1]]  # of the longer
    assert sig.ratio_stats("token_accuracy", ["a b c d"], ["a b"]).tolist() == [[2, 4]]
    assert sig.ratio_stats("accuracy", ["a b c d"], ["a b"]).tolist() == [[2, 2]]  # of the reference's words
    assert sig.ratio_score(np.array([[3.0, 3], [1, 3], [0, 1]])) == pytest.approx(4 / 7)
    assert sig.ratio_score(np.zeros((2, 2))) == 1.0
    with pytest.raises(ValueError, match="2 hypotheses but 3 references"):
        sig.ratio_stats("exact_match", hyps[:2], refs)
    with pytest.raises(ValueError, match="no per-example statistics"):
        sig.ratio_stats("bleu", hyps, refs)


def _em(correct):
    return np.array([[c, 1.0] for c in correct])


def _reference_bootstrap(a, b, resamples, seed):
    """The module docstring's paired bootstrap, one resample at a time."""
    rng = np.random.default_rng(seed)
    delta = a[:, 0].sum() / a[:, 1].sum() - b[:, 0].sum() / b[:, 1].sum()
    idx = rng.integers(0, len(a), size=(resamples, len(a)))
    hits = 0
    for row in idx:
        d = a[row, 0].sum() / a[row, 1].sum() - b[row, 0].sum() / b[row, 1].sum()
        hits += abs(d - delta) >= abs(delta) - 1e-12
    return (hits + 1) / (resamples + 1)


def test_paired_bootstrap_matches_a_plain_reference():
    rng = np.random.default_rng(3)
    a, b = _em(rng.random(40) < 0.7), _em(rng.random(40) < 0.5)
    out = sig.paired_bootstrap(a, b, resamples=300, seed=7)
    assert out["p_value"] == pytest.approx(_reference_bootstrap(a, b, 300, 7))
    assert out["delta"] == pytest.approx(a[:, 0].mean() - b[:, 0].mean())
    assert out["delta_ci"][0] < out["delta"] < out["delta_ci"][1]


@pytest.mark.parametrize("test", sig.TESTS)
def test_paired_tests_are_symmetric_and_identical_systems_get_p_one(test):
    rng = np.random.default_rng(1)
    a, b = _em(rng.random(30) < 0.8), _em(rng.random(30) < 0.4)
    ab, ba = sig.paired_test(a, b, test, 200, 5), sig.paired_test(b, a, test, 200, 5)
    assert ab["delta"] == pytest.approx(-ba["delta"]) and ab["score_a"] == ba["score_b"]
    same = sig.paired_test(a, a.copy(), test, 200, 5)
    assert same["p_value"] == 1.0 and same["delta"] == 0.0
    assert ab["p_value"] >= 1 / 201  # the +1 correction: never 0
    big = sig.paired_test(_em([1] * 30), _em([0] * 30), test, 200, 5)
    assert big["p_value"] == pytest.approx(1 / 201)
    if test == "ar":  # swapping outputs per example is symmetric in A and B, so the p-value is the same
        assert ab["p_value"] == ba["p_value"]


def test_paired_tests_check_their_inputs():
    a = _em([1, 0, 1])
    for bad in (_em([1, 0]), np.ones((3, 3)), np.ones(3)):
        with pytest.raises(ValueError, match="paired statistics"):
            sig.paired_bootstrap(a, bad)
    with pytest.raises(ValueError, match="no examples"):
        sig.approximate_randomization(np.zeros((0, 2)), np.zeros((0, 2)))
    with pytest.raises(ValueError, match="resamples"):
        sig.paired_bootstrap(a, a, resamples=0)
    with pytest.raises(ValueError, match="unknown paired test"):
        sig.paired_test(a, a, "t-test")


def test_sacrebleu_paired_checks_lengths_and_seed_and_gives_identical_outputs_p_one():
    refs = ["the cat sat on the mat", "a dog ran", "it is raining today"]
    hyps = ["the cat sat on a mat", "a dog ran", "it rains today"]
    out = sig.sacrebleu_paired(hyps, hyps, refs, resamples=50, seed=3)
    assert out["p_value"] == 1.0 and out["delta"] == 0.0 and "note" in out
    with pytest.raises(ValueError, match="as many outputs as references"):
        sig.sacrebleu_paired(hyps, hyps[:2], refs, resamples=50)
    with pytest.raises(ValueError, match="seed >= 1"):
        sig.sacrebleu_paired(hyps, hyps, refs, seed=0)


# ---------------------------------------------------------------- verdict, within, one system's interval at their edges
# (survivors of `make mutants-changed BASE=d15a89c` on this module: each test below kills one or more)


def _t(p, delta):
    return {"p_value": p, "delta": delta}


@pytest.mark.parametrize(
    "tests, level, expected",
    [
        ([_t(0.04, 1.0)], 0.95, "A"),  # p < alpha: significant, A better
        ([_t(0.04, -1.0)], 0.95, "B"),
        ([_t(1.0 - 0.95, 1.0)], 0.95, "="),  # p == alpha is not significant (p < alpha is the rule)
        ([_t(0.06, 1.0)], 0.95, "="),
        ([_t(0.04, 1.0)], 0.99, "="),  # the level decides alpha = 1 - level
        ([_t(0.5, 1.0), _t(0.01, 1.0)], 0.95, "="),  # every pair must be significant
        ([_t(0.01, 1.0), _t(0.01, -1.0)], 0.95, "="),  # signs disagree
        ([_t(0.01, 1.0), _t(0.01, 0.0)], 0.95, "="),  # a zero difference agrees with no sign
        ([_t(0.01, 0.0)], 0.95, "="),
        ([_t(0.01, 0.0), _t(0.01, 0.0)], 0.95, "="),
        ([], 0.95, "="),
    ],
)
def test_verdict_at_its_edges(tests, level, expected):
    assert sig.verdict(tests, level) == expected


def test_verdict_default_level_is_95_percent():
    assert sig.verdict([_t(0.049, 2.0)]) == "A" and sig.verdict([_t(0.051, 2.0)]) == "="


def test_within_cuts_to_the_stated_scale_only():
    assert sig.within([-0.1, 1.2], "fraction") == [0.0, 1.0]
    assert sig.within([-3.0, 104.0], "percent") == [0.0, 100.0]
    assert sig.within([-3.0, 104.0], None) == [-3.0, 104.0]  # no stated scale: nothing to cut
    assert sig.within([-3.0, 104.0], "other") == [-3.0, 104.0]
    assert sig.within(None, "fraction") is None


def test_bootstrap_ci_defaults_are_the_documented_1000_resamples_and_seed_12345():
    rng = np.random.default_rng(0)
    stats = np.stack([rng.integers(0, 2, 60), np.ones(60, dtype=np.int64)], axis=1).astype(np.float64)
    assert sig.bootstrap_ci(stats) == sig.bootstrap_ci(stats, resamples=1000, seed=12345)
    assert sig.bootstrap_ci(stats) != sig.bootstrap_ci(stats, resamples=1001, seed=12345)
    assert sig.bootstrap_ci(stats) != sig.bootstrap_ci(stats, resamples=1000, seed=12346)


def test_bleu_bootstrap_ci_uses_the_tokenizer_asked():
    """Character BLEU and 13a BLEU differ on unspaced text: the interval is the one of the tokenizer given."""
    from sacrebleu.metrics import BLEU

    hyps = ["我喜欢猫和狗", "今天天气很好", "他在看书"]
    refs = ["我喜欢狗和猫", "今天天气不错", "他在读书"]
    char = sig.bleu_bootstrap_ci(hyps, refs, "char", 20, 1)
    plain = sig.bleu_bootstrap_ci(hyps, refs, "13a", 20, 1)
    assert char["mean"] != plain["mean"]
    whole = BLEU(tokenize="char").corpus_score(hyps, [refs]).score
    assert abs(char["mean"] - whole) < 25  # near the corpus score of the same tokenizer
