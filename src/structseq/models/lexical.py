"""The lexical translation matrix L built from a learned `Lexicon`.

L has |V_x| rows summing to 1 over |V_y| + 1 columns: the output tokens and "no translation" (index
|V_y|), whose mass the lexical head drops (see `LexicalHead`). Construction (Akyürek & Andreas 2021,
section 3, and their reference code):

1. Row x holds the lexicon's scores for x (target tokens missing from the output vocabulary are
   skipped). A row without any lexicon entry whose string is also an output token copies it (so the
   copy mechanism is the special case of an empty lexicon). Special tokens map to themselves; attending
   to the source `</s>` can therefore emit `</s>` through the lexicon.
2. Mutual exclusivity: a row that is still empty is spread uniformly over the output tokens that no
   row maps to (when there are any).
3. `tau = 0`: each row is one-hot on its highest-scoring target. Ties go to the alphabetically first (as
   `Lexicon.best()`) or, given a target order (`model.head.ties`), to the first in it, counting scores
   equal up to float rounding as tied: the reference code takes `np.argmax` in its vocabulary's order,
   first seen in the data for COGS and SCAN, most frequent first for Tatoeba. PMI ties often, since
   every target that occurs only beside x scores PMI's maximum log(|D| / c(x)): COGS's `girl` ties
   `girl` with the rare `17`. `tau > 0`: softmax(score / tau) over the row's targets. Scores are in the
   lexicon's own units (counts for simple and IBM, log-ratios for PMI, posterior frequencies for the
   Bayesian learner), so the paper's tau = 0.1 on counts is the reference code's 0.2 on 2 x counts.
4. Rows that are empty even then go to "no translation".

Where the reference code differs: it scores the identity 1 and entries 2 x count in one dense row and
takes the softmax over all |V_y| columns (absent cells score 0), so its soft rows leak a little mass onto
every target; its hard rows take `argmax`, which sends a mutual-exclusivity row (uniform) to the first
unmapped target and an all-zero row to <pad> (masked out of the output, i.e. our "no translation").
Here the identity is only the fallback of a row without entries, rows are supported on their own
targets, and mutual-exclusivity rows stay uniform.

L is stored sparsely, `L = P + m u^T`: P has K (target id, weight) pairs per row, m marks the
mutual-exclusivity rows and u is their shared distribution. That keeps vocabularies like Tatoeba's
(6670 x 11358) small; K is 1 for hard rows but can reach |V_y| for soft PMI rows, whose head then costs
B x T x S x K per batch. A learned lexicon is the dense matrix (`LexiconRows.dense`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from structseq.data.vocab import SPECIALS, Vocab
from structseq.errors import ConfigError
from structseq.lexicon.lexicon import Lexicon

EMPTY = Lexicon({}, "empty")
TIE_RULES = ("alphabetical", "first_seen", "frequent")


@dataclass
class LexiconRows:
    """Sparse L: row x = sum_k weight[x, k] [index[x, k]] + me_row[x] * me_dist, over V_y + 1 columns."""

    index: Tensor  # (V_x, K) long, in 0..V_y (V_y = no translation)
    weight: Tensor  # (V_x, K) float
    me_row: Tensor  # (V_x,) float, 1 for mutual-exclusivity rows (their `weight` is 0)
    me_dist: Tensor  # (V_y + 1,) float, uniform over the unmapped targets (zeros when there are none)

    @classmethod
    def from_map(cls, src_to_tgt: Tensor, tgt_size: int) -> LexiconRows:
        """One column per source id (e.g. `shared_token_map`): the copy mechanism's L."""
        n = len(src_to_tgt)
        return cls(src_to_tgt[:, None].clone(), torch.ones(n, 1), torch.zeros(n), torch.zeros(tgt_size + 1))

    @classmethod
    def uniform(cls, src_size: int, tgt_size: int) -> LexiconRows:
        """Every row uniform over all columns (the paper's "Uniform" ablation, when learned)."""
        return cls(
            torch.zeros(src_size, 1, dtype=torch.long),
            torch.zeros(src_size, 1),
            torch.ones(src_size),
            torch.full((tgt_size + 1,), 1.0 / (tgt_size + 1)),
        )

    def dense(self) -> Tensor:
        """The full (V_x, V_y) matrix."""
        out = self.me_row[:, None] * self.me_dist[None, :]
        return out.scatter_add(1, self.index, self.weight)


def tie_order(examples: Iterable, rule: str) -> list[str] | None:
    """Tokens in the order a hard row's ties are broken by: None for "alphabetical"; "first_seen" reads each
    training pair source then target (the reference's COGS vocabulary; on SCAN, whose sides share no token,
    its target vocabulary); "frequent" ranks targets by count, first seen first among equals (its Tatoeba
    vocabulary, `Counter.most_common`)."""
    if rule not in TIE_RULES:
        raise ConfigError(f"'model.head.ties' must be one of {', '.join(TIE_RULES)}, not '{rule}'")
    if rule == "alphabetical":
        return None
    if rule == "frequent":
        return [t for t, _ in Counter(t for ex in examples for t in ex.target).most_common()]
    return list(dict.fromkeys(t for ex in examples for t in (*ex.source, *ex.target)))


def _argmax(s: Tensor, rank: Tensor | None) -> Tensor:
    """Index of the row's best score; among scores equal up to float rounding, the lowest rank (else the first)."""
    if rank is None:
        return s.argmax()
    tied = torch.isclose(s, s.max(), rtol=1e-9, atol=1e-12)
    return torch.where(tied, rank, rank.max() + 1).argmin()


def lexicon_rows(
    lexicon: Lexicon | None,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    tau: float = 0.0,
    mutual_exclusivity: bool = True,
    target_order: Sequence[str] | None = None,
) -> LexiconRows:
    """L for `lexicon` over these vocabularies (see the module docstring); None = no entries (copy + ME).
    `target_order` breaks hard rows' ties (earlier wins; tokens not in it come last, alphabetically)."""
    lexicon = EMPTY if lexicon is None else lexicon
    position = {} if target_order is None else {t: i for i, t in enumerate(target_order)}
    scores: list[dict[int, float]] = []
    for x in src_vocab.itos:
        row: dict[int, float] = {}
        if x not in SPECIALS:
            row = {tgt_vocab.stoi[y]: s for y, s in lexicon.get(x, {}).items() if y in tgt_vocab and y not in SPECIALS}
        if not row and x in tgt_vocab:
            row = {tgt_vocab.stoi[x]: 0.0}
        scores.append(row)
    mapped = {y for row in scores for y in row}
    unmapped = [y for y in range(len(tgt_vocab)) if y not in mapped and tgt_vocab.itos[y] not in SPECIALS]

    me_row = torch.zeros(len(src_vocab))
    me_dist = torch.zeros(len(tgt_vocab) + 1)
    if mutual_exclusivity and unmapped:
        me_dist[unmapped] = 1.0 / len(unmapped)
        for x, row in enumerate(scores):
            me_row[x] = float(not row)

    dists: list[tuple[Tensor, Tensor]] = []  # (target ids, probabilities > 0) per row; empty for ME rows
    for x, row in enumerate(scores):
        if me_row[x]:
            dists.append((torch.zeros(0, dtype=torch.long), torch.zeros(0)))
            continue
        row = row or {len(tgt_vocab): 0.0}
        ys = torch.tensor(list(row), dtype=torch.long)
        s = torch.tensor(list(row.values()), dtype=torch.float64)
        rank = None
        if target_order is not None:  # row keys are in the lexicon's order: by score, then alphabetically
            rank = torch.tensor(
                [position.get(tgt_vocab.itos[y], len(position)) if y < len(tgt_vocab) else 0 for y in row]
            )
        best = _argmax(s, rank)
        p = (s / tau).softmax(0) if tau > 0 else torch.nn.functional.one_hot(best, len(s)).double()
        dists.append((ys[p > 0], p[p > 0].float()))

    k = max(1, max(len(ys) for ys, _ in dists))
    index = torch.zeros(len(src_vocab), k, dtype=torch.long)
    weight = torch.zeros(len(src_vocab), k)
    for x, (ys, p) in enumerate(dists):
        index[x, : len(ys)] = ys
        weight[x, : len(ys)] = p
    return LexiconRows(index, weight, me_row, me_dist)


def rows_to_lexicon(
    matrix: Tensor,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    min_prob: float = 0.05,
    method: str = "L",
    keep_copies: bool = False,
) -> Lexicon:
    """A dense L (e.g. a trained head's) as a `Lexicon` of its cells >= min_prob, for display; special-token
    rows, "no translation" and (unless `keep_copies`) plain copies x -> x are left out: the table shows what L
    translates."""
    entries: dict[str, dict[str, float]] = {}
    for x, probs in enumerate(matrix.detach().cpu().tolist()):
        src = src_vocab.itos[x]
        if src in SPECIALS:
            continue
        row = {tgt_vocab.itos[y]: round(p, 3) for y, p in enumerate(probs[: len(tgt_vocab)]) if p >= min_prob}
        if row and (keep_copies or row != {src: 1.0}):
            entries[src] = row
    return Lexicon(entries, method, {"min_prob": min_prob})
