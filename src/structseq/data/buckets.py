"""Length buckets: a small fixed set of padded batch shapes, with examples shuffled within each bucket.

fairseq's `--num-buckets` (there for TPUs, which compile a graph per shape): the training lengths are cut into
N buckets at their quantiles, and an example counts as its bucket's length. Here that serves two ends with one
design (issues 44 and 45):

- **static shapes**: a batch is padded to its bucket's length and to the bucket's fixed number of rows (filler
  rows predict nothing), so an epoch has at most N batch shapes and a captured or compiled update
  (`structseq.train.compiled`) is built once per shape;
- **mixing**: examples are sorted by their *bucket*, not their exact length, with random tie-breaks every
  epoch, so a batch is a random draw among the examples of similar length. Sorting by exact length puts every
  copy of a duplicated example side by side (SCAN's 1,467 `jump` lines filled whole batches); within a bucket
  they mix with everything else of that length range (`benchmarks/bench_buckets.py` measures it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def bucket_lengths(lengths: Sequence[int], num_buckets: int) -> list[int]:
    """The padded bucket lengths (ascending, at most `num_buckets`) of examples of task `lengths`: the upper
    quantiles of length + 1 (the </s> or <s> every sequence carries; fairseq's `get_buckets`), the last being
    the longest example's, so every example falls in a bucket."""
    if num_buckets < 1:
        raise ValueError(f"num_buckets must be >= 1, got {num_buckets}")
    qs = np.percentile(np.asarray(lengths) + 1, np.linspace(0, 100, num_buckets + 1)[1:], method="higher")
    return sorted({int(q) for q in qs})


def distinct_lengths(examples: Sequence, lengths: Sequence[int]) -> list[int]:
    """The lengths of the distinct examples (compared by `repr`): bucket boundaries drawn from these do not
    give a much-repeated example a bucket of its own (1,467 copies of SCAN's `jump` are a tenth of its data)."""
    return list({repr(e): n for e, n in zip(examples, lengths)}.values())


def bucketed(lengths: Sequence[int], buckets: Sequence[int]) -> np.ndarray:
    """Each padded length (task length + 1) rounded up to its bucket's length."""
    b = np.asarray(buckets)
    pos = np.searchsorted(b, np.asarray(lengths), side="left")
    if (pos >= len(b)).any():
        raise ValueError(f"a length exceeds the longest bucket ({b[-1]})")
    return b[pos]


def source_lengths(src_lengths: Sequence[int], lengths: Sequence[int], buckets: Sequence[int]) -> list[int]:
    """Per bucket, the longest padded source (`src_lengths`, </s> included) among the examples whose task
    `lengths` fall in it (1 for a bucket none falls in): a source padded to it rather than to the bucket's
    length keeps one shape per bucket. Dangle on COGS pads its sources (8.5 tokens on average) far less than to
    the target's bucket (up to 154): scripts/padding_flops.py counts the work either way."""
    padded = bucketed(np.asarray(lengths) + 1, buckets)
    src = np.asarray(src_lengths)
    return [int(src[padded == b].max()) if (padded == b).any() else 1 for b in buckets]


def rows_for(length: int, max_tokens: int | None, batch_size: int | None) -> int:
    """The fixed row count of a bucket's batches: as many as fit `max_tokens` at that padded length (fairseq's
    rule), at most `batch_size`, at least one."""
    rows = max_tokens // length if max_tokens else batch_size
    return max(1, min(rows, batch_size) if batch_size else rows)


def bucket_batches(
    lengths: Sequence[int],
    buckets: Sequence[int],
    *,
    max_tokens: int | None,
    batch_size: int | None,
    seed: int,
    shuffle: bool = True,
) -> list[list[int]]:
    """Example indices in batches of one bucket each: every example once, each bucket's examples in a fresh
    random order (`seed`), cut into batches of the bucket's row count (the last one of a bucket may be
    short; `shape` pads it), the batch order shuffled."""
    padded = bucketed(np.asarray(lengths) + 1, buckets)  # + 1: the </s> or <s> every sequence carries
    rng = np.random.default_rng(seed)
    tie = rng.random(len(padded)) if shuffle else np.arange(len(padded))
    order = np.lexsort((tie, padded))
    batches = []
    for length in np.unique(padded):
        members = order[padded[order] == length].tolist()
        rows = rows_for(int(length), max_tokens, batch_size)
        batches += [members[i : i + rows] for i in range(0, len(members), rows)]
    if shuffle:
        batches = [batches[j] for j in rng.permutation(len(batches))]
    return batches


def batch_shape(
    index: Sequence[int],
    lengths: Sequence[int],
    buckets: Sequence[int],
    *,
    max_tokens: int | None,
    batch_size: int | None,
    world_size: int = 1,
) -> tuple[int, int]:
    """(rows, padded length) of the batch of these examples: its bucket's length, that bucket's row count (a
    data-parallel rank's share of it under `world_size` ranks)."""
    length = int(bucketed([max(lengths[i] for i in index) + 1], buckets)[0])
    rows = rows_for(length, max_tokens, batch_size)
    return -(-rows // world_size), length
