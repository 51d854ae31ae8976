"""Tensorising examples and grouping them into length-bucketed, token-budget batches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from structseq.data.example import Example
from structseq.data.vocab import Vocab


@dataclass
class Batch:
    """Padded tensors. The source ends with </s>; target input starts with <s>, output ends with </s>."""

    src: torch.Tensor  # (B, S) long
    tgt_in: torch.Tensor | None  # (B, T)
    tgt_out: torch.Tensor | None  # (B, T)
    index: list[int]  # positions of these examples in the dataset

    @property
    def num_target_tokens(self) -> int:
        return 0 if self.tgt_out is None else int((self.tgt_out != Vocab.pad).sum())

    def to(self, device) -> "Batch":
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return Batch(move(self.src), move(self.tgt_in), move(self.tgt_out), self.index)


def pad_sequences(seqs: Sequence[Sequence[int]], pad: int = Vocab.pad) -> torch.Tensor:
    out = torch.full((len(seqs), max(len(s) for s in seqs)), pad, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


def encode_source(vocab: Vocab, tokens: Sequence[str]) -> list[int]:
    return vocab.encode(tokens) + [vocab.eos]


def collate(examples: Sequence[Example], index: Sequence[int], src_vocab: Vocab, tgt_vocab: Vocab | None) -> Batch:
    src = pad_sequences([encode_source(src_vocab, e.source) for e in examples])
    if tgt_vocab is None:
        return Batch(src, None, None, list(index))
    tgt = [tgt_vocab.encode(e.target) for e in examples]
    tgt_in = pad_sequences([[tgt_vocab.bos] + t for t in tgt])
    tgt_out = pad_sequences([t + [tgt_vocab.eos] for t in tgt])
    return Batch(src, tgt_in, tgt_out, list(index))


def make_batches(
    src_lens: Sequence[int],
    tgt_lens: Sequence[int],
    *,
    max_tokens: int | None = None,
    batch_size: int | None = None,
    shuffle: bool = True,
    seed: int = 0,
) -> list[list[int]]:
    """Group example indices into batches.

    Examples are sorted by length (random tie-breaks when shuffling) so each batch holds similar
    lengths; a batch grows while `n * max(len) <= max_tokens` (padded tokens, fairseq's rule, with
    len = max(source, target) + 1) and `n <= batch_size`. The batch order is shuffled with `seed`.
    """
    if max_tokens is None and batch_size is None:
        raise ValueError("set max_tokens, batch_size or both")
    lens = np.maximum(np.asarray(src_lens), np.asarray(tgt_lens)) + 1
    rng = np.random.default_rng(seed)
    tie = rng.random(len(lens)) if shuffle else np.arange(len(lens))
    order = np.lexsort((tie, lens))
    batches, cur, cur_max = [], [], 0
    for i in order.tolist():
        new_max = max(cur_max, int(lens[i]))
        too_many = batch_size is not None and len(cur) + 1 > batch_size
        too_long = max_tokens is not None and (len(cur) + 1) * new_max > max_tokens
        if cur and (too_many or too_long):
            batches.append(cur)
            cur, new_max = [], int(lens[i])
        cur.append(i)
        cur_max = new_max
    if cur:
        batches.append(cur)
    if shuffle:
        perm = rng.permutation(len(batches))
        batches = [batches[j] for j in perm]
    return batches
