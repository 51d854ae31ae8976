"""Selection: top-K distinct candidates, the uncertainty window, and the whole build (fake ensemble)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structseq.compose import BuildConfig, build_benchmark, read_uncertainty_tsv, select_uncertain, top_k_unique
from structseq.errors import ConfigError, DataError
from tests.compose.test_uncertainty import FakeRun


def test_top_k_unique_takes_best_distinct():
    degree = np.array([0.5, 0.9, np.nan, 0.9, 0.7, 0.2, 1.0])
    sentences = ["a b", "c  d", "x", "c d", "e f g", "h", "i"]
    lengths = np.array([2, 2, 1, 2, 3, 1, 1])
    chosen = top_k_unique(degree, sentences, 3, lengths=lengths)
    assert chosen[0] == 6 and set(chosen[1:].tolist()) in ({1, 4}, {3, 4})
    assert top_k_unique(degree, sentences, 3, lengths=lengths, min_length=2).tolist()[0] in (1, 3)
    assert len(top_k_unique(degree, sentences, 100)) == 5  # the NaN and one duplicate never count
    with pytest.raises(ConfigError):
        top_k_unique(degree, sentences, -1)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 1000), n=st.integers(1, 200), k=st.integers(0, 60))
def test_top_k_respects_degree_order(seed, n, k):
    rng = np.random.default_rng(seed)
    degree = rng.integers(0, 5, n) / 4.0
    degree[rng.random(n) < 0.1] = np.nan
    sentences = [f"s{v}" for v in rng.integers(0, n, n)]
    chosen = top_k_unique(degree, sentences, k, seed=seed)
    assert np.array_equal(chosen, top_k_unique(degree, sentences, k, seed=seed))
    texts = [sentences[i] for i in chosen]
    assert len(set(texts)) == len(texts) <= k
    assert np.isfinite(degree[chosen]).all()
    assert (np.diff(degree[chosen]) <= 0).all()
    if len(chosen):
        others = [i for i in range(n) if np.isfinite(degree[i]) and sentences[i] not in set(texts)]
        assert all(degree[i] <= degree[chosen].min() for i in others)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 300), data=st.data())
def test_select_uncertain_respects_thresholds(seed, n, data):
    drop = data.draw(st.integers(0, n))
    window = data.draw(st.integers(0, n - drop))
    sample = data.draw(st.integers(0, window))
    scores = np.random.default_rng(seed).random(n).round(2)  # rounding makes ties
    sel = select_uncertain(scores, drop_top=drop, window=window, sample=sample, seed=seed)
    again = select_uncertain(scores, drop_top=drop, window=window, sample=sample, seed=seed)
    assert np.array_equal(sel.selected, again.selected)
    assert len(sel.selected) == sample == len(set(sel.selected.tolist()))
    assert set(sel.selected.tolist()) <= set(sel.window.tolist())
    assert not set(sel.dropped.tolist()) & set(sel.window.tolist())
    assert len(sel.dropped) == drop and len(sel.window) == window
    if drop and sample:
        assert scores[sel.selected].max() <= scores[sel.dropped].min()
    rest = sel.ranking[drop + window :]
    if len(rest) and sample:
        assert scores[sel.selected].min() >= scores[rest].max()
    assert (np.diff(sel.selected) > 0).all()


def test_select_uncertain_errors():
    scores = np.arange(10.0)
    with pytest.raises(ConfigError, match="drop_top \\+ window"):
        select_uncertain(scores, drop_top=5, window=6, sample=1)
    with pytest.raises(ConfigError):
        select_uncertain(scores, drop_top=0, window=3, sample=4)
    with pytest.raises(ConfigError):
        select_uncertain(scores, drop_top=-1, window=3, sample=1)
    with pytest.raises(DataError):
        select_uncertain(np.array([1.0, np.nan]), drop_top=0, window=2, sample=1)


def toy_corpus(seed: int = 0):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(12)]
    train = [" ".join(rng.choice(words, rng.integers(2, 7))) for _ in range(400)]
    pool = [" ".join(rng.choice(words + ["rare"], rng.integers(1, 9))) for _ in range(300)]
    targets = [f"ref {i}" for i in range(len(pool))]
    return train, pool, targets


SMALL = BuildConfig(candidates=40, drop_top=5, window=20, sample=8, seed=3)


def test_build_end_to_end(tmp_path):
    train, pool, targets = toy_corpus()
    runs = [FakeRun(m) for m in range(3)]
    report = build_benchmark(train, pool, tmp_path / "a", config=SMALL, runs=runs, pool_targets=targets)
    out = tmp_path / "a"
    for name in (
        "candidates.txt",
        "candidates.tsv",
        "uncertainty.tsv",
        "test.src",
        "test.ref",
        "selected.tsv",
        "report.json",
    ):
        assert (out / name).is_file(), name
    assert json.loads((out / "report.json").read_text())["selection"]["selected"] == 8
    test = (out / "test.src").read_text().splitlines()
    refs = (out / "test.ref").read_text().splitlines()
    lines = report["selection"]["selected_lines"]
    assert len(test) == len(refs) == len(set(test)) == 8 and lines == sorted(lines)
    assert all(pool[line - 1] == s and targets[line - 1] == r for line, s, r in zip(lines, test, refs))
    assert all("rare" not in s.split() for s in test)
    candidates = (out / "candidates.txt").read_text().splitlines()
    assert len(candidates) == 40 and set(test) <= set(candidates)
    # candidates are the top of the degree ranking
    assert report["candidates"]["degree"]["min"] >= report["pool"]["degree"]["median"]

    # same seed, same selection; resuming from the written uncertainty table gives it again
    again = build_benchmark(train, pool, tmp_path / "b", config=SMALL, runs=runs, pool_targets=targets)
    assert again["selection"]["selected_lines"] == lines
    table = read_uncertainty_tsv(out / "uncertainty.tsv")
    resumed = build_benchmark(train, pool, tmp_path / "c", config=SMALL, uncertainty=table)
    assert resumed["selection"]["selected_lines"] == lines
    other = build_benchmark(train, pool, tmp_path / "d", config=BuildConfig(**{**SMALL.__dict__, "seed": 4}), runs=runs)
    assert other["selection"]["selected_lines"] != lines


def test_build_stops_without_uncertainty_and_checks_tables(tmp_path):
    train, pool, _ = toy_corpus(1)
    report = build_benchmark(train, pool, tmp_path, config=SMALL)
    assert "stopped" in report and not (tmp_path / "test.src").exists()
    table = read_uncertainty_tsv_from(tmp_path, train, pool)
    table.sources[0] = "something else"
    with pytest.raises(DataError, match="candidates"):
        build_benchmark(train, pool, tmp_path / "x", config=SMALL, uncertainty=table)
    with pytest.raises(ConfigError):
        build_benchmark(train, pool, tmp_path / "y", config=BuildConfig(candidates=10, drop_top=5, window=6, sample=1))
    with pytest.raises(ConfigError):
        build_benchmark(train, pool, tmp_path / "z", config=BuildConfig(measure="bleu"))
    with pytest.raises(DataError):
        build_benchmark(train, pool, tmp_path / "w", config=SMALL, pool_targets=["x"])


def read_uncertainty_tsv_from(out, train, pool):
    """Score the written candidates with a fake ensemble, as a user would with `compose uncertainty`."""
    from structseq.compose import score_ensemble

    candidates = (out / "candidates.txt").read_text().splitlines()
    return score_ensemble([FakeRun(0), FakeRun(1)], candidates)
