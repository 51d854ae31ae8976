"""Table 2 statistics: average compositional degree and unique novel word / POS n-grams of test sets.

A novel n-gram is a distinct test n-gram (within one sentence) that never occurs in training. N-grams
are compared as exact integer keys built by the same (prefix id, last id) pairing as the degree code.

POS tags come from a pluggable tagger: any callable mapping token lists to equally long tag lists.
`textblob_tagger()` wraps TextBlob's bundled English tagger (pattern's Brill-style lexicon + rules,
Penn Treebank tags): it ships its data inside the PyPI wheel, so it works offline with no download.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import numpy as np

from structseq.compose.degree import DEFAULT_MAX_N, Encoded, NgramDictionary, score_pool
from structseq.data.postag import Tagger, get_tagger, textblob_tagger  # noqa: F401  (compose stats tag with them)
from structseq.errors import ConfigError, DataError

#: A POS tagger: token lists in, tag lists of the same lengths out.


def _encode_joint(corpora: Sequence[Sequence[Sequence[str]]]) -> tuple[list[Encoded], int]:
    ids: dict[str, int] = {}
    setdefault = ids.setdefault
    out = []
    for corpus in corpora:
        flat = array("i")
        lengths = array("q", [0])
        for tokens in corpus:
            flat.extend([setdefault(t, len(ids)) for t in tokens])
            lengths.append(len(tokens))
        out.append(
            Encoded(np.frombuffer(flat, dtype=np.int32).copy(), np.cumsum(np.frombuffer(lengths, dtype=np.int64)))
        )
    return out, max(len(ids), 1)


def _ngram_keys(corpora: list[Encoded], radix: int, n: int) -> list[np.ndarray]:
    """Exact ids of every n-gram of each corpus, in one shared id space."""
    keys = [c.ids.astype(np.int64) for c in corpora]
    valid = [np.ones(len(c.ids), dtype=bool) for c in corpora]
    remaining = [c.remaining() for c in corpora]
    for k in range(2, n + 1):
        extended = []
        for c, key, rem, ok in zip(corpora, keys, remaining, valid):
            ok &= rem >= k
            nxt = np.zeros(len(key), dtype=np.int64)
            pos = np.flatnonzero(ok)
            nxt[pos] = key[pos] * radix + c.ids[pos + k - 1]
            extended.append(nxt)
        # re-rank the (k-1)-gram ids densely so the next pairing (rank * radix + word) stays within int64
        joined = np.concatenate([e[ok] for e, ok in zip(extended, valid)])
        unique = np.unique(joined)
        keys = [np.where(ok, np.searchsorted(unique, e), 0) for e, ok in zip(extended, valid)]
    return [key[ok] for key, ok in zip(keys, valid)]


def novel_ngrams(train: Sequence[Sequence[str]], test: Sequence[Sequence[str]], n: int) -> int:
    """Number of distinct test n-grams absent from training."""
    if n < 1:
        raise ConfigError(f"n must be >= 1, got {n}")
    (train_enc, test_enc), radix = _encode_joint([train, test])
    train_keys, test_keys = _ngram_keys([train_enc, test_enc], radix, n)
    unique_test = np.unique(test_keys)
    return int((~np.isin(unique_test, train_keys)).sum())


def _tag(tagger: Tagger, sentences: list[list[str]], what: str) -> list[list[str]]:
    tags = tagger(sentences)
    if len(tags) != len(sentences):
        raise DataError(f"tagger returned {len(tags)} tag lists for {len(sentences)} {what} sentences")
    for i, (tokens, row) in enumerate(zip(sentences, tags)):
        if len(tokens) != len(row):
            raise DataError(f"tagger returned {len(row)} tags for {len(tokens)} tokens in {what} sentence {i + 1}")
    return [list(row) for row in tags]


def table2_stats(
    train: Sequence[str],
    tests: dict[str, Sequence[str]],
    *,
    tagger: Tagger | None = None,
    orders: Sequence[int] = (2, 3),
    min_count: int = 3,
    atom_threshold: int = 3,
    max_n: int | None = DEFAULT_MAX_N,
    oov_as_atoms: bool = True,
) -> list[dict]:
    """One row per test set: examples, average degree and novel word / POS n-gram counts.

    The average degree is over non-empty sentences; with `oov_as_atoms` (default) a rare or unseen
    word counts as its own atom, so every test sentence gets a degree, as in the paper's comparison of
    existing benchmarks; otherwise sentences with OOV words are left out and `unscored` says how many.
    """
    dictionary = NgramDictionary.from_corpus(train, min_count=min_count, atom_threshold=atom_threshold, max_n=max_n)
    train_tokens = [s.split() for s in train]
    train_tags = _tag(tagger, train_tokens, "train") if tagger else None
    rows = []
    for name, sentences in tests.items():
        if not any(s.strip() for s in sentences):  # a row of n=0 and degree nan would look like a result
            raise DataError("the test set holds no sentences (empty or blank lines only)", name)
        tokens = [s.split() for s in sentences]
        result = score_pool(dictionary, list(sentences), oov_as_atoms=oov_as_atoms)
        scored = np.isfinite(result.degree)
        row: dict = {
            "test": name,
            "examples": len(sentences),
            "avg_degree": float(result.degree[scored].mean()) if scored.any() else float("nan"),
            "unscored": int((~scored).sum()),
            "with_oov": int((result.n_oov > 0).sum()),
        }
        for n in orders:
            row[f"word_{n}gram_novel"] = novel_ngrams(train_tokens, tokens, n)
        if tagger is not None:
            tags = _tag(tagger, tokens, name)
            for n in orders:
                row[f"pos_{n}gram_novel"] = novel_ngrams(train_tags, tags, n)
        rows.append(row)
    return rows
