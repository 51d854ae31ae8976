"""compose.summary against plain references: the exact sum (Fractions of each float), numpy's median and mean, and
the console line for a pool mostly left out, at its boundary (exactly half scored is no warning)."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from structseq.compose.summary import exact_sum, median_of_middle, pool_warning, summarize


@pytest.mark.parametrize("n", [1, 511, 512, 513, 1500])
def test_exact_sum_is_the_sum_of_the_exact_fractions_in_any_order(n):
    rng = random.Random(n)
    values = [rng.choice([-1, 1]) * rng.random() * 10.0 ** rng.randint(-8, 8) for _ in range(n)]
    values += [1.0] * n + [0.0, -0.0, 2.0**-1074]  # many of one exponent (blocks of 512), zero, a subnormal
    reference = sum((Fraction(v) for v in values), Fraction(0))
    assert exact_sum(values) == reference
    rng.shuffle(values)
    assert exact_sum(np.asarray(values).reshape(-1, 1)) == reference


@pytest.mark.parametrize("values", [[3.0], [4.0, 1.0], [5.0, 1.0, 3.0], [2.0, 8.0, 1.0, 4.0]])
def test_median_of_middle_is_numpys_median(values):
    ordered, count = sorted(values), len(values)
    middle = ordered[(count - 1) // 2 : count // 2 + 1]
    assert median_of_middle(middle + [99.0], count) == float(np.median(values))


def test_summarize_is_numpys_over_the_finite_values():
    values = [3.0, float("nan"), 1.0, float("inf"), 2.5, -float("inf"), 10.0]
    finite = np.asarray([3.0, 1.0, 2.5, 10.0])
    assert summarize(values) == {
        "count": 4,
        "mean": float(finite.mean()),
        "min": 1.0,
        "median": float(np.median(finite)),
        "max": 10.0,
    }
    assert summarize([float("nan")]) == {"count": 0} and summarize([]) == {"count": 0}


def test_pool_warning_from_more_than_half_left_out():
    pool = {"sentences": 10, "in_vocabulary": 5, "with_oov": 4, "empty": 1}
    assert pool_warning(pool, 3) is None  # exactly half scored
    assert pool_warning({**pool, "sentences": 0, "in_vocabulary": 0}, 3) is None
    line = pool_warning({**pool, "in_vocabulary": 4, "with_oov": 5}, 3)
    assert line.startswith("6 of 10 pool sentences (60.0%) are left out: 5 have a word seen fewer than 3 time(s)")
    assert "1 are empty; only 4 can be candidates." in line
    assert pool_warning({"sentences": 2000, "in_vocabulary": 0, "with_oov": 2000, "empty": 0}, 1).startswith(
        "2,000 of 2,000"
    )
