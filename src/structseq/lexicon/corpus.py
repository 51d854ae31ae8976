"""Integer-coded parallel corpus shared by the learners: ragged token arrays, set views, co-occurrence.

Every learner works on these flat numpy arrays so that no Python loop runs over tokens after encoding.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from structseq.errors import DataError

Pair = tuple[tuple[str, ...], tuple[str, ...]]

#: Above this many cells a (source x target) table is kept sparse instead of dense.
DENSE_LIMIT = 1 << 22
#: Pairs with a longer side are left out of lexicon learning: IBM alignment holds |source| x |target|
#: cells per pair (a 100k-token line would ask for tens of GiB).
MAX_LENGTH = 1024


def as_pairs(data: Iterable) -> list[Pair]:
    """Accept `Example`-like objects (`.source`, `.target`) or (source, target) pairs of token sequences.

    A string side is split on whitespace, so `("dax fep", "RED RED RED")` works too.
    """
    pairs: list[Pair] = []
    for n, item in enumerate(data):
        if hasattr(item, "source") and hasattr(item, "target"):
            src, tgt = item.source, item.target
        else:
            try:
                src, tgt = item
            except (TypeError, ValueError):
                raise DataError(f"item {n} is neither an Example nor a (source, target) pair: {item!r}") from None
        src = tuple(src.split()) if isinstance(src, str) else tuple(src)
        tgt = tuple(tgt.split()) if isinstance(tgt, str) else tuple(tgt)
        pairs.append((src, tgt))
    return pairs


def _encode(sides: Sequence[tuple[str, ...]]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Ids by first appearance; every loop here runs in C (chain, dict.fromkeys, map)."""
    flat = list(chain.from_iterable(sides))
    vocab = list(dict.fromkeys(flat))
    index = {t: i for i, t in enumerate(vocab)}
    ids = np.fromiter(map(index.__getitem__, flat), dtype=np.int64, count=len(flat))
    lengths = np.fromiter((len(side) for side in sides), dtype=np.int64, count=len(sides))
    offsets = np.zeros(len(sides) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return vocab, ids, offsets


def product_index(a_off: np.ndarray, b_off: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All (a, b) position combinations within each segment, as (index into a, index into b)."""
    na, nb = np.diff(a_off), np.diff(b_off)
    sizes = na * nb
    local = np.arange(int(sizes.sum()), dtype=np.int64)
    local -= np.repeat(np.cumsum(sizes) - sizes, sizes)
    q, r = np.divmod(local, np.repeat(nb, sizes))
    del local
    q += np.repeat(a_off[:-1], sizes)
    r += np.repeat(b_off[:-1], sizes)
    return q, r


def count_keys(keys: np.ndarray, space: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys and their counts; a dense bincount when the key space is small enough."""
    if space <= DENSE_LIMIT:
        counts = np.bincount(keys, minlength=space)
        uniq = np.flatnonzero(counts)
        return uniq, counts[uniq]
    return np.unique(keys, return_counts=True)


@dataclass
class Corpus:
    """Token ids of both sides, stored flat with per-pair offsets (pair k owns ids[off[k]:off[k+1]])."""

    src_vocab: list[str]
    tgt_vocab: list[str]
    src_ids: np.ndarray
    src_off: np.ndarray
    tgt_ids: np.ndarray
    tgt_off: np.ndarray

    @classmethod
    def from_data(cls, data: Iterable, max_length: int | None = MAX_LENGTH) -> Corpus:
        """Encode the pairs; pairs with a side longer than `max_length` tokens are left out with a warning
        (the alignment models hold one cell per source x target position pair)."""
        pairs = as_pairs(data)
        if not pairs:
            raise DataError("cannot learn a lexicon from an empty corpus")
        if max_length is not None:
            kept = [p for p in pairs if len(p[0]) <= max_length and len(p[1]) <= max_length]
            if not kept:
                raise DataError(f"cannot learn a lexicon: every pair has a side longer than {max_length} tokens")
            if len(kept) < len(pairs):
                warnings.warn(
                    f"lexicon: left out {len(pairs) - len(kept)} of {len(pairs)} pairs with a side "
                    f"longer than {max_length} tokens",
                    stacklevel=2,
                )
            pairs = kept
        sv, si, so = _encode([p[0] for p in pairs])
        tv, ti, to = _encode([p[1] for p in pairs])
        return cls(sv, tv, si, so, ti, to)

    def __len__(self) -> int:
        return len(self.src_off) - 1

    def swapped(self) -> Corpus:
        """The same corpus with source and target exchanged."""
        return Corpus(self.tgt_vocab, self.src_vocab, self.tgt_ids, self.tgt_off, self.src_ids, self.src_off)

    @staticmethod
    def _as_sets(ids: np.ndarray, off: np.ndarray, vocab_size: int) -> tuple[np.ndarray, np.ndarray]:
        pair = np.repeat(np.arange(len(off) - 1), np.diff(off))
        keys = np.unique(pair * vocab_size + ids)
        set_ids = keys % vocab_size
        set_off = np.searchsorted(keys // vocab_size, np.arange(len(off)), side="left")
        return set_ids, set_off.astype(np.int64)

    def source_sets(self) -> tuple[np.ndarray, np.ndarray]:
        """Distinct source ids per pair (sorted), as (ids, offsets)."""
        return self._as_sets(self.src_ids, self.src_off, len(self.src_vocab))

    def target_sets(self) -> tuple[np.ndarray, np.ndarray]:
        return self._as_sets(self.tgt_ids, self.tgt_off, len(self.tgt_vocab))

    def cooccurrence(self) -> Cooccurrence:
        """Set-based counts: c(x, y) = number of pairs with x in the source and y in the target."""
        xs, xo = self.source_sets()
        ys, yo = self.target_sets()
        nx, ny = len(self.src_vocab), len(self.tgt_vocab)
        ia, ib = product_index(xo, yo)
        key = np.take(xs, ia)
        del ia
        key *= ny
        key += np.take(ys, ib)
        del ib
        keys, counts = count_keys(key, nx * ny)
        return Cooccurrence(
            x=keys // ny,
            y=keys % ny,
            count=counts.astype(np.int64),
            count_x=np.bincount(xs, minlength=nx),
            count_y=np.bincount(ys, minlength=ny),
            pairs=len(self),
        )


@dataclass
class Cooccurrence:
    """Sparse co-occurrence table (entries sorted by (x, y)) with the marginal set counts."""

    x: np.ndarray
    y: np.ndarray
    count: np.ndarray
    count_x: np.ndarray
    count_y: np.ndarray
    pairs: int
