"""Compositional degree (Zheng & Lapata 2023, sec. 4): minimum n-gram cover of a sentence / its length.

Two algorithms share one definition:

* `min_cover` is the textbook dynamic programme over token positions for an *arbitrary* atom set
  (the paper's worked example is not prefix-closed: it has x3x4 without x3).
* `score_pool` is the fast path for dictionaries built from corpus counts. Such a dictionary is
  prefix-closed (a prefix occurs at least as often as the n-gram), so the atoms starting at a position
  are exactly the lengths 1..reach[i]. The minimum cover is then a shortest path in which every jump
  can go anywhere up to its reach; the smallest start `g(j)` of an atom ending at `j` is found for all
  positions at once from a running maximum, and the cover size is the number of `g` hops from the
  sentence end to its start. Everything is numpy over the whole (chunked) pool: no per-sentence loop.

N-grams are identified exactly, without hashing: the id of an n-gram is its rank among the dictionary's
n-grams, and an n-gram is keyed by (id of its (n-1)-prefix, id of its last word). Both tie-breaks pick the
cover whose last atom is as long as possible, recursively from the right.
"""

from __future__ import annotations

import warnings
from array import array
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from structseq.errors import ConfigError

#: Progress callback: called with the number of sentences just finished.
Progress = Callable[[int], None]

CHUNK_SENTENCES = 200_000

#: Longest atom by default, in words. The paper counts "all n-grams that occur more than 3 times" (Zheng & Lapata
#: 2023, sec. 4); its compounds and Table 2's novel n-grams are 2-3 words (CoGnition's compounds 2-4), and on the
#: shipped ReaCT text the longest atom has 13 words with every degree the same at any bound from 8 up. A frequent
#: n-gram longer than 32 words is a repeated sentence or boilerplate, not a composition of atoms; splitting it
#: changes only low degrees (far below the top-K). Unbounded, one repeated-token line ("ha ha ha ...", common in
#: web text) costs one level per token: a 2M-token line ran 1,328 levels in 15 minutes without finishing.
DEFAULT_MAX_N = 32


@dataclass(frozen=True)
class Cover:
    """A minimum cover: its size and its atoms as half-open token spans [start, end)."""

    size: int
    segments: tuple[tuple[int, int], ...]

    def pieces(self, tokens: Sequence[str]) -> list[str]:
        return [" ".join(tokens[a:b]) for a, b in self.segments]

    def render(self, tokens: Sequence[str]) -> str:
        """The segmentation as `a b | c | d e f`, the form `--explain` writes."""
        return " | ".join(self.pieces(tokens))


def min_cover(tokens: Sequence[str], atoms: Container[tuple[str, ...]], max_n: int | None = None) -> Cover | None:
    """Minimum number of atoms whose concatenation is `tokens`; None when no cover exists.

    `atoms` holds n-gram tuples (an `NgramDictionary` works too). O(L * max_n) membership tests.
    Among optimal covers the one with the longest last atom is returned (then recursively leftwards).
    """
    length = len(tokens)
    tokens = tuple(tokens)
    unreachable = length + 1
    best = [0] + [unreachable] * length
    back = [-1] * (length + 1)
    for end in range(1, length + 1):
        first = 0 if max_n is None else max(0, end - max_n)
        for start in range(first, end):  # ascending start: the first optimum found has the longest atom
            if best[start] + 1 < best[end] and tokens[start:end] in atoms:
                best[end] = best[start] + 1
                back[end] = start
    if best[length] == unreachable:
        return None
    segments = []
    end = length
    while end > 0:
        segments.append((back[end], end))
        end = back[end]
    return Cover(best[length], tuple(reversed(segments)))


def all_min_covers(tokens: Sequence[str], atoms: Container[tuple[str, ...]], max_n: int | None = None) -> list[Cover]:
    """Every optimal cover (to inspect ties); exponential only in the number of ties."""
    tokens = tuple(tokens)
    length = len(tokens)
    unreachable = length + 1
    best = [0] + [unreachable] * length
    for end in range(1, length + 1):
        first = 0 if max_n is None else max(0, end - max_n)
        for start in range(first, end):
            if best[start] + 1 < best[end] and tokens[start:end] in atoms:
                best[end] = best[start] + 1
    if best[length] == unreachable:
        return []

    def tails(end: int) -> list[tuple[tuple[int, int], ...]]:
        if end == 0:
            return [()]
        first = 0 if max_n is None else max(0, end - max_n)
        found = []
        for start in range(first, end):
            if best[start] + 1 == best[end] and tokens[start:end] in atoms:
                found.extend(prefix + ((start, end),) for prefix in tails(start))
        return found

    return [Cover(best[length], segments) for segments in tails(length)]


@dataclass
class Encoded:
    """A corpus as one flat int32 id array plus sentence offsets (CSR layout); -1 marks an OOV word."""

    ids: np.ndarray
    offsets: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def remaining(self) -> np.ndarray:
        """Tokens left in the sentence from each position on (itself included)."""
        lengths = self.lengths
        ends = np.repeat(self.offsets[1:], lengths)
        return (ends - np.arange(len(self.ids), dtype=np.int64)).astype(np.int32)


def encode(sentences: Iterable[str], vocab: dict[str, int]) -> Encoded:
    """Whitespace-tokenise and map to ids; words missing from `vocab` become -1."""
    get = vocab.get
    flat = array("i")
    lengths = array("q", [0])
    for sentence in sentences:
        tokens = sentence.split()
        flat.extend([get(word, -1) for word in tokens])
        lengths.append(len(tokens))
    offsets = np.cumsum(np.frombuffer(lengths, dtype=np.int64))
    return Encoded(np.frombuffer(flat, dtype=np.int32).copy(), offsets)


@dataclass
class NgramDictionary:
    """The atom dictionary of a training corpus.

    Words seen at least `min_count` times are the vocabulary (a rarer word is OOV and its sentences
    are out of scope); every vocabulary word is an atom. An n-gram (2 <= n <= max_n) of vocabulary
    words is an atom when it occurs more than `atom_threshold` times. `level_keys[n]` holds the sorted
    keys `prefix_id * n_ids + last_word_id` of the n-gram atoms; an n-gram's id is its index there.
    """

    words: list[str]
    counts: np.ndarray
    min_count: int
    atom_threshold: int
    max_n: int | None
    level_keys: dict[int, np.ndarray] = field(default_factory=dict)
    vocab: dict[str, int] = field(default_factory=dict)
    cut: int = 0  # frequent n-grams of max_n + 1 words: atoms but for the bound (warned about)

    @classmethod
    def from_corpus(
        cls,
        sentences: Iterable[str],
        *,
        min_count: int = 3,
        atom_threshold: int = 3,
        max_n: int | None = DEFAULT_MAX_N,
    ) -> NgramDictionary:
        """Count the corpus and grow n-gram levels until none is frequent, or up to `max_n` words (None: no
        bound); when the bound cuts (n-grams of max_n + 1 words are frequent), a warning says how many."""
        if min_count < 1:
            raise ConfigError(f"min_count must be >= 1, got {min_count}")
        if atom_threshold < 0:
            raise ConfigError(f"atom_threshold must be >= 0, got {atom_threshold}")
        if max_n is not None and max_n < 1:
            raise ConfigError(f"max_n must be >= 1 or None (unbounded), got {max_n}")
        all_ids: dict[str, int] = {}
        setdefault = all_ids.setdefault
        flat = array("i")
        lengths = array("q", [0])
        for sentence in sentences:
            tokens = sentence.split()
            flat.extend([setdefault(word, len(all_ids)) for word in tokens])
            lengths.append(len(tokens))
        corpus = Encoded(np.frombuffer(flat, dtype=np.int32).copy(), np.cumsum(np.frombuffer(lengths, dtype=np.int64)))
        words = list(all_ids)
        counts = np.bincount(corpus.ids, minlength=len(words)).astype(np.int64)
        vocab = {word: i for i, word in enumerate(words) if counts[i] >= min_count}
        self = cls(words, counts, min_count, atom_threshold, max_n, {}, vocab)
        self._grow(corpus)
        if self.cut:
            warnings.warn(cut_warning(self.cut, max_n, atom_threshold), stacklevel=2)
        return self

    @property
    def n_ids(self) -> int:
        """Radix of the (prefix id, last word) keys."""
        return max(len(self.words), 1)

    @property
    def longest(self) -> int:
        """Length of the longest atom."""
        return max(self.level_keys, default=1 if self.vocab else 0)

    def sizes(self) -> dict[int, int]:
        """Number of atoms per n."""
        out = {1: len(self.vocab)}
        out.update({n: int(len(keys)) for n, keys in sorted(self.level_keys.items())})
        return out

    def _grow(self, corpus: Encoded) -> None:
        ids = corpus.ids
        if len(ids) == 0:
            return
        remaining = corpus.remaining()
        word_ok = self.counts >= self.min_count
        # a word can only be inside a frequent n-gram when it is itself frequent and in the vocabulary
        extendable = word_ok & (self.counts > self.atom_threshold)
        level_id = np.where(extendable[ids], ids, -1).astype(np.int64)  # id of the atom of length n-1 at i
        positions = np.flatnonzero(level_id >= 0)
        prefix_ids = level_id[positions]
        radix = self.n_ids
        n = 2
        while positions.size:
            keep = remaining[positions] >= n
            # apriori: the (n-1)-suffix must be an atom too
            keep[keep] = level_id[positions[keep] + 1] >= 0
            positions, prefix_ids = positions[keep], prefix_ids[keep]
            if not positions.size:
                break
            keys = prefix_ids * radix + ids[positions + n - 1]
            unique, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
            frequent = counts > self.atom_threshold
            if not frequent.any():
                break
            if self.max_n is not None and n > self.max_n:  # one level past the bound, counted to say what it cut
                self.cut = int(frequent.sum())
                break
            self.level_keys[n] = unique[frequent]
            new_id = np.where(frequent, np.cumsum(frequent) - 1, -1)[inverse]
            hit = new_id >= 0
            positions, prefix_ids = positions[hit], new_id[hit]
            level_id = np.full(len(ids), -1, dtype=np.int64)
            level_id[positions] = prefix_ids
            n += 1

    def __contains__(self, ngram: object) -> bool:
        if isinstance(ngram, str):
            ngram = tuple(ngram.split())
        if not isinstance(ngram, tuple) or not ngram:
            return False
        ids = [self.vocab.get(word) for word in ngram]
        if any(i is None for i in ids):
            return False
        if self.max_n is not None and len(ids) > self.max_n:
            return False
        prefix = ids[0]
        for n in range(2, len(ids) + 1):
            keys = self.level_keys.get(n)
            if keys is None:
                return False
            key = prefix * self.n_ids + ids[n - 1]
            index = int(np.searchsorted(keys, key))
            if index >= len(keys) or keys[index] != key:
                return False
            prefix = index
        return True

    def reach(self, corpus: Encoded) -> np.ndarray:
        """Length of the longest atom starting at each position (0 at an OOV word)."""
        ids = corpus.ids
        reach = (ids >= 0).astype(np.int32)  # int16 overflowed on atoms of 32,768+ words
        if not self.level_keys or len(ids) == 0:
            return reach
        remaining = corpus.remaining()
        positions = np.flatnonzero(ids >= 0)
        prefix_ids = ids[positions].astype(np.int64)
        radix = self.n_ids
        for n in range(2, self.longest + 1):
            keep = remaining[positions] >= n
            # an atom's (n-1)-suffix is an atom: reach at i+1 must already be n-1
            keep[keep] = reach[positions[keep] + 1] >= n - 1
            positions, prefix_ids = positions[keep], prefix_ids[keep]
            if not positions.size:
                break
            keys = prefix_ids * radix + ids[positions + n - 1]
            level = self.level_keys[n]
            index = np.searchsorted(level, keys)
            np.minimum(index, len(level) - 1, out=index)
            found = level[index] == keys
            positions, prefix_ids = positions[found], index[found]
            reach[positions] = n
        return reach


def cut_warning(cut: int, max_n: int, atom_threshold: int) -> str:
    """What a bound on the atoms' length left out (the in-memory and the sharded builds say the same)."""
    return (
        f"{cut:,} n-gram(s) of {max_n + 1} words occur more than {atom_threshold} times in training but atoms stop "
        f"at {max_n} words (--max-n; DEFAULT_MAX_N): covers split them, which raises the degree of the sentences "
        "that hold them a little; --max-n 0 for no bound"
    )


@dataclass
class DegreeResult:
    """Per-sentence results of `score_pool`, aligned with the input order.

    `cover_size` and `degree` are -1 / NaN for sentences that are empty or, unless `oov_as_atoms`,
    contain an OOV word. `covers` holds the segmentations when asked for (`explain=True`).
    """

    lengths: np.ndarray
    n_oov: np.ndarray
    cover_size: np.ndarray
    degree: np.ndarray
    covers: list[Cover] | None = None

    @property
    def in_vocab(self) -> np.ndarray:
        return (self.n_oov == 0) & (self.lengths > 0)

    def __len__(self) -> int:
        return len(self.lengths)


def cover_sizes(reach: np.ndarray, offsets: np.ndarray, explain: bool = False):
    """Minimum cover size per sentence for a prefix-closed dictionary, given per-position reach >= 1.

    Returns (sizes, segments) where segments, when `explain`, is (sentence, start, end) arrays with
    global positions. Cost: one running maximum, one sorted searchsorted, one gather per cover hop.
    """
    total = len(reach)
    n_sentences = len(offsets) - 1
    sizes = np.zeros(n_sentences, dtype=np.int32)
    if total == 0:
        return sizes, None
    index_type = np.int32 if total < 2**31 - 1 else np.int64
    ends = np.arange(total, dtype=index_type) + reach.astype(index_type)
    running = np.maximum.accumulate(ends)
    # first[j-1] = smallest i whose atom reaches boundary j (atoms never cross a sentence end, so
    # the running maximum of earlier sentences is below j and the answer lies in j's own sentence)
    first = np.searchsorted(running, np.arange(1, total + 1, dtype=index_type), side="left").astype(index_type)
    starts = offsets[:-1].astype(index_type)
    current = offsets[1:].astype(index_type)
    active = np.flatnonzero(current > starts)
    pieces: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    while active.size:
        end = current[active]
        start = first[end - 1]
        current[active] = start
        sizes[active] += 1
        if explain:
            pieces.append((active, start, end))
        active = active[start > starts[active]]
    segments = None
    if explain:
        if pieces:
            sentence = np.concatenate([p[0] for p in pieces])
            seg_start = np.concatenate([p[1] for p in pieces]).astype(np.int64)
            seg_end = np.concatenate([p[2] for p in pieces]).astype(np.int64)
            order = np.lexsort((seg_start, sentence))
            segments = (sentence[order], seg_start[order], seg_end[order])
        else:
            empty = np.zeros(0, dtype=np.int64)
            segments = (empty, empty, empty)
    return sizes, segments


def score_pool(
    dictionary: NgramDictionary,
    sentences: Sequence[str],
    *,
    explain: bool = False,
    oov_as_atoms: bool = False,
    chunk_size: int = CHUNK_SENTENCES,
    progress: Progress | None = None,
) -> DegreeResult:
    """Compositional degree of every sentence against `dictionary`, in chunks of `chunk_size`.

    `oov_as_atoms=True` counts each OOV word as its own atom instead of leaving the sentence unscored
    (the convention for comparing existing benchmarks, whose test words may be rare in training).
    """
    parts = []
    covers: list[Cover] | None = [] if explain else None
    for begin in range(0, len(sentences), chunk_size):
        chunk = sentences[begin : begin + chunk_size]
        corpus = encode(chunk, dictionary.vocab)
        reach = dictionary.reach(corpus)
        oov = reach == 0
        lengths = corpus.lengths
        sentence_of = np.repeat(np.arange(len(lengths)), lengths)
        n_oov = np.bincount(sentence_of[oov], minlength=len(lengths)).astype(np.int32)
        reach[oov] = 1
        sizes, segments = cover_sizes(reach, corpus.offsets, explain)
        scored = (lengths > 0) & ((n_oov == 0) | oov_as_atoms)
        with np.errstate(divide="ignore", invalid="ignore"):
            degree = np.where(scored, sizes / np.maximum(lengths, 1), np.nan)
        parts.append((lengths, n_oov, np.where(scored, sizes, -1).astype(np.int32), degree))
        if explain:
            covers.extend(_split_covers(segments, corpus.offsets, sizes, scored))
        if progress is not None:
            progress(len(chunk))
    if not parts:
        empty_i = np.zeros(0, dtype=np.int32)
        return DegreeResult(np.zeros(0, np.int64), empty_i, empty_i, np.zeros(0), covers)
    lengths, n_oov, sizes, degree = (np.concatenate(column) for column in zip(*parts))
    return DegreeResult(lengths, n_oov, sizes, degree, covers)


def _split_covers(segments, offsets: np.ndarray, sizes: np.ndarray, scored: np.ndarray) -> list[Cover]:
    sentence, start, end = segments
    local_start = start - offsets[sentence]
    local_end = end - offsets[sentence]
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    out = []
    for s in range(len(sizes)):
        if not scored[s]:
            out.append(Cover(-1, ()))
            continue
        a, b = bounds[s], bounds[s + 1]
        spans = tuple(zip(local_start[a:b].tolist(), local_end[a:b].tolist()))
        out.append(Cover(int(sizes[s]), spans))
    return out


def compositional_degree(sentence: str | Sequence[str], dictionary: NgramDictionary) -> float:
    """Degree of one sentence (NaN when it is empty or has an OOV word)."""
    tokens = sentence.split() if isinstance(sentence, str) else list(sentence)
    result = score_pool(dictionary, [" ".join(tokens)])
    return float(result.degree[0])
