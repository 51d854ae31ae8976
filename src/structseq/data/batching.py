"""Tensorising examples and grouping them into length-bucketed, token-budget batches."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import torch

from structseq.data.buckets import bucket_batches
from structseq.data.example import Example
from structseq.data.vocab import Vocab


class Batch(dict):
    """A named batch: tensors by name (`batch["src"]` or `batch.src`), the examples' dataset positions
    (`index`) and the number of predicted units (`num_tokens`, what the loss is normalised by).

    The seq2seq task's batches hold `src` (B, S) ending with </s>, `tgt_in` (B, T) starting with <s> and
    `tgt_out` (B, T) ending with </s>; other tasks name their own tensors."""

    def __init__(self, tensors: dict | None = None, index: Sequence[int] = (), num_tokens: int = 0, **kw):
        super().__init__(tensors or {}, **kw)
        self.index, self.num_tokens = list(index), num_tokens

    def __getattr__(self, name: str):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def num_target_tokens(self) -> int:
        return self.num_tokens

    @property
    def num_sentences(self) -> int:
        """Examples whose loss counts (`optim.sentence_avg`): none in a stand-in batch of no units."""
        return len(self.index) if self.num_tokens else 0

    def to(self, device) -> Batch:
        """The same batch with every tensor on `device` (nested lists/dicts of tensors too)."""
        from structseq.state import map_state

        # non_blocking: a host-to-GPU copy does not wait for the GPU to finish the previous update
        return Batch(map_state(dict(self), lambda t: t.to(device, non_blocking=True)), self.index, self.num_tokens)

    def pinned(self) -> Batch:
        """The same batch in page-locked host memory, from which a copy to a GPU runs without the host waiting
        (`non_blocking` copies from ordinary memory wait); needs CUDA (`train.pin_memory`)."""
        from structseq.state import map_state

        return Batch(map_state(dict(self), lambda t: t.pin_memory()), self.index, self.num_tokens)


def pad_sequences(seqs: Sequence[Sequence[int]], pad: int = Vocab.pad) -> torch.Tensor:
    """The id lists `seqs` as one (len(seqs), longest) long tensor, right-padded with `pad`. One numpy pass: the
    ids are read in one `fromiter` over the chained lists and scattered through a length mask (no copy per row:
    a row at a time cost 0.7-2.9 ms a COGS tensor, issue 53; `benchmarks/bench_host.py` times both)."""
    lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
    if not len(lengths):
        raise ValueError("pad_sequences: no sequences")
    out = np.full((len(lengths), int(lengths.max())), pad, dtype=np.int64)
    out[np.arange(out.shape[1]) < lengths[:, None]] = np.fromiter(
        itertools.chain.from_iterable(seqs), dtype=np.int64, count=int(lengths.sum())
    )
    return torch.from_numpy(out)


def encode_source(vocab: Vocab, tokens: Sequence[str]) -> list[int]:
    return vocab.encode(tokens) + [vocab.eos]


def target_batch(tgt: Sequence[Sequence[int]], bos: int = Vocab.bos, eos: int = Vocab.eos) -> dict:
    """Teacher-forcing tensors of target id lists: `tgt_in` = <s> y, `tgt_out` = y </s>."""
    return {"tgt_in": pad_sequences([[bos, *t] for t in tgt]), "tgt_out": pad_sequences([[*t, eos] for t in tgt])}


def collate(examples: Sequence[Example], index: Sequence[int], src_vocab: Vocab, tgt_vocab: Vocab | None) -> Batch:
    """A seq2seq batch of examples (`src`, and with a target vocabulary `tgt_in` / `tgt_out`)."""
    tensors = {"src": pad_sequences([encode_source(src_vocab, e.source) for e in examples])}
    if tgt_vocab is None:
        return Batch(tensors, index)
    tgt = [tgt_vocab.encode(e.target) for e in examples]
    return Batch({**tensors, **target_batch(tgt)}, index, sum(len(t) + 1 for t in tgt))


def make_batches(
    src_lens: Sequence[int],
    tgt_lens: Sequence[int],
    *,
    max_tokens: int | None = None,
    batch_size: int | None = None,
    shuffle: bool = True,
    seed: int = 0,
    group_by_length: bool = True,
    buckets: Sequence[int] | None = None,
) -> list[list[int]]:
    """Group example indices into batches.

    Examples are sorted by length (random tie-breaks when shuffling) so each batch holds similar
    lengths; a batch grows while `n * max(len) <= max_tokens` (padded tokens, fairseq's rule, with
    len = max(source, target) + 1) and `n <= batch_size`. The batch order is shuffled with `seed`.
    Without `group_by_length` the examples are taken in a random order (`seed`; in order unless shuffling) and
    cut by the same rule: batches of mixed lengths, as a DataLoader with shuffle=True.
    With `buckets` (padded lengths, `structseq.data.buckets`), examples are sorted by bucket, shuffled within
    it, and a batch holds one bucket's examples, as many as fit at the bucket's length (group_by_length unused).
    """
    if max_tokens is None and batch_size is None:
        raise ValueError("set max_tokens, batch_size or both")
    if buckets:
        return bucket_batches(
            np.maximum(np.asarray(src_lens), np.asarray(tgt_lens)),
            buckets,
            max_tokens=max_tokens,
            batch_size=batch_size,
            seed=seed,
            shuffle=shuffle,
        )
    lens = np.maximum(np.asarray(src_lens), np.asarray(tgt_lens)) + 1
    rng = np.random.default_rng(seed)
    if not group_by_length:
        order = rng.permutation(len(lens)) if shuffle else np.arange(len(lens))
        shuffle = False  # the batches are already in a random order
    else:
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
