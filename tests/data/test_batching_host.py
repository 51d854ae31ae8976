"""Batch building on the host (issue 53 goal 3): `pad_sequences` in one numpy pass equals the plain row loop,
and on CUDA a training batch is pinned before its non-blocking copy unless `train.pin_memory: false`."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch

from structseq.data.batching import Batch, pad_sequences
from structseq.train.batches import TrainingBatches


def reference_pad(seqs, pad):
    """Plain Python: each row padded to the longest with `pad`."""
    width = max(len(s) for s in seqs)
    return [list(s) + [pad] * (width - len(s)) for s in seqs]


@pytest.mark.parametrize("seed", range(5))
def test_pad_sequences_equals_the_plain_loop(seed):
    r = random.Random(seed)
    for _ in range(50):
        seqs = [[r.randrange(10**6) for _ in range(r.choice([0, 1, r.randrange(40)]))] for _ in range(r.randint(1, 9))]
        if not any(seqs):
            seqs[0].append(7)
        for pad in (0, 1, -1):
            got = pad_sequences(seqs, pad)
            assert got.dtype == torch.long and got.tolist() == reference_pad(seqs, pad)
    assert pad_sequences([[], []], 5).shape == (2, 0)  # every row empty: (B, 0), as the row loop gave
    assert pad_sequences([(1, 2), range(3)]).tolist() == [[1, 2, 0], [0, 1, 2]]  # any sequences of ints


def test_a_task_batch_is_the_same_as_with_the_row_loop(tmp_path, monkeypatch):
    """Through the seq2seq task's collate: src, tgt_in, tgt_out equal those built with the row loop."""
    from structseq.tasks import seq2seq
    from structseq.train.loop import Trainer
    from tests.fixtures.toy import toy_config, toy_tsv

    t = Trainer(toy_config(toy_tsv(tmp_path), max_steps=1), tmp_path / "run", show_progress=False)
    batches = t.batches.epoch(0)
    fast = [t.task.collate([t.batches.examples[i] for i in idx], idx) for idx in batches]

    def row_loop(seqs, pad=0):
        return torch.tensor(reference_pad(seqs, pad), dtype=torch.long)

    monkeypatch.setattr(seq2seq, "pad_sequences", row_loop)
    monkeypatch.setattr("structseq.data.batching.pad_sequences", row_loop)
    slow = [t.task.collate([t.batches.examples[i] for i in idx], idx) for idx in batches]
    for a, b in zip(fast, slow):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("device, pin, pinned", [("cuda", True, True), ("cuda", False, False), ("cpu", True, False)])
def test_training_batches_are_pinned_on_cuda_unless_switched_off(tmp_path, monkeypatch, device, pin, pinned):
    """The copy to a GPU is non-blocking only from page-locked memory: TrainingBatches pins each batch on
    CUDA (the device copy itself is faked here, the CPU having no GPU); `train.pin_memory: false` does not."""
    from structseq.train.loop import Trainer
    from tests.fixtures.toy import toy_config, toy_tsv

    t = Trainer(toy_config(toy_tsv(tmp_path), max_steps=1, pin_memory=pin), tmp_path / "run", show_progress=False)
    calls = []
    monkeypatch.setattr(Batch, "pinned", lambda self: calls.append(self) or self)
    monkeypatch.setattr(t.task, "to_device", lambda batch, dev: batch)
    batches = TrainingBatches(t.cfg, t.task, t.batches.examples, torch.device(device))
    b = batches.next(dataclasses.replace(t.progress), t.dist)
    assert isinstance(b, Batch) and len(calls) == int(pinned)
