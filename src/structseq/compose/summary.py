"""Summaries of degree and uncertainty arrays that do not depend on how the values are ordered or grouped, so the
in-memory build and the sharded one (which sees the pool a shard at a time) write the same report.json: the mean
is the exact sum (`exact_sum`, a Fraction) divided once, the median is numpy's (the mean of the two middle values),
and a pool that is mostly left out is said on the console (`pool_warning`), not only in the report."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

#: values summed per int64 block: 2^9 mantissas below 2^53 cannot overflow (2^62)
_BLOCK = 512


def exact_sum(values) -> Fraction:
    """The exact sum of finite floats: each is mantissa * 2^exponent with an integer mantissa below 2^53, and the
    mantissas of one exponent are added as integers; any order or split of the values gives the same Fraction."""
    values = np.asarray(values, dtype=np.float64).ravel()
    mantissa, exponent = np.frexp(values)
    integers = np.ldexp(mantissa, 53).astype(np.int64)  # exact
    total = Fraction(0)
    for power in np.unique(exponent).tolist():
        part = integers[exponent == power]
        blocks = np.pad(part, (0, -len(part) % _BLOCK)).reshape(-1, _BLOCK).sum(axis=1)
        total += Fraction(sum(blocks.tolist())) * Fraction(2) ** (power - 53)
    return total


def median_of_middle(middle: list[float], count: int) -> float:
    """numpy's median from the middle value (odd count) or the two middle values (even count) in order."""
    if count % 2:
        return float(middle[0])
    return float(np.mean(np.asarray(middle[:2], dtype=np.float64)))


def summarize(values) -> dict[str, float]:
    """count, mean, min, median, max of the finite values ({"count": 0} when none)."""
    values = np.asarray(values, dtype=np.float64)
    values = values[np.isfinite(values)]
    if not len(values):
        return {"count": 0}
    return {
        "count": int(len(values)),
        "mean": float(exact_sum(values) / len(values)),
        "min": float(values.min()),
        "median": float(np.median(values)),
        "max": float(values.max()),
    }


def pool_warning(pool: dict, min_count: int) -> str | None:
    """A line for the console when most of the pool cannot be scored (None otherwise): how many, and why."""
    sentences, scored = pool["sentences"], pool["in_vocabulary"]
    if not sentences or scored * 2 >= sentences:
        return None
    return (
        f"{sentences - scored:,} of {sentences:,} pool sentences ({(sentences - scored) / sentences:.1%}) are left "
        f"out: {pool['with_oov']:,} have a word seen fewer than {min_count} time(s) in the training corpus (out of "
        f"vocabulary: out of scope for compositional generalization), {pool['empty']:,} are empty; only "
        f"{scored:,} can be candidates. A larger training corpus of the pool's domain (or a lower --min-count) keeps more"
    )
