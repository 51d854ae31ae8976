"""The training batches of a run, in its order: each epoch a seeded shuffle of the encoded examples into
batches under the token budget (`structseq.data.batching.make_batches`; with `optim.num_buckets` grouped by
length bucket, with `optim.static_shapes` padded to the bucket's shape), read from where the run's
`Progress` stands, so a resumed run takes the batch an uninterrupted one would have taken next."""

from __future__ import annotations

from collections.abc import Sequence

from structseq.data.batching import Batch, make_batches
from structseq.data.buckets import batch_shape, bucket_lengths, distinct_lengths, source_lengths


class TrainingBatches:
    """`next(progress)` is the next batch of a run (`Trainer.step` takes `optim.accumulate` of them);
    `epoch(e)` the example indices of epoch e's batches. `plan`, when set to a list of batches (lists of
    indices into `examples`), is every epoch's order instead of the shuffle: benchmarks train on another
    system's batches with it (`benchmarks/bench_train.py`: fairseq's own)."""

    def __init__(self, cfg, task, examples: Sequence, device):
        self.cfg, self.task, self.device = cfg, task, device
        self.examples = list(examples)  # encoded (`task.encode`)
        self.lengths = [task.length(e) for e in self.examples]
        o = cfg.optim  # length buckets: a few padded shapes (optim.num_buckets, structseq.data.buckets)
        self.buckets = o.num_buckets and bucket_lengths(distinct_lengths(self.examples, self.lengths), o.num_buckets)
        sources = [task.source_length(e) for e in self.examples]  # static shapes: a source bucket per bucket
        known = self.buckets and o.static_shapes and None not in sources
        self.source_buckets = source_lengths(sources, self.lengths, self.buckets) if known else None
        self.plan: list[list[int]] | None = None
        self._cache: tuple[int, list[list[int]]] | None = None

    def epoch(self, epoch: int) -> list[list[int]]:
        """Epoch `epoch`'s batches (example indices), in training order: the same for the same seed."""
        if self.plan is not None:
            return self.plan
        if self._cache is None or self._cache[0] != epoch:
            o = self.cfg.optim
            batches = make_batches(
                self.lengths,
                self.lengths,
                max_tokens=o.max_tokens,
                batch_size=o.batch_size,
                shuffle=True,
                seed=self.cfg.train.seed * 100003 + epoch,
                group_by_length=o.group_by_length,
                buckets=self.buckets,
            )
            self._cache = (epoch, batches)
        return self._cache[1]

    def _next_indices(self, progress) -> list[int]:
        p = progress
        batches = self.epoch(p.epoch)
        if p.batch_in_epoch >= len(batches):
            p.epoch, p.batch_in_epoch = p.epoch + 1, 0
            batches = self.epoch(p.epoch)
        idx = batches[p.batch_in_epoch]
        p.batch_in_epoch += 1
        return idx

    def next(self, progress, dist) -> Batch:
        """This rank's shard (`dist`: the run's `structseq.train.distributed` context) of the batch after
        `progress`'s position (which it advances), on the training device. A rank whose shard is empty (a batch smaller than the world) computes on a stand-in example
        whose loss counts zero. To look without moving, pass a copy (`dataclasses.replace(progress)`)."""
        index = self._next_indices(progress)
        idx = dist.shard(index)
        batch = self.task.training_batch(
            [self.examples[i] for i in idx or index[:1]], idx or index[:1], progress.step + 1
        )
        if not idx:
            batch.num_tokens = 0
        if self.cfg.optim.static_shapes:
            o = self.cfg.optim
            shape = batch_shape(
                index,
                self.lengths,
                self.buckets,
                max_tokens=o.max_tokens,
                batch_size=o.batch_size,
                world_size=dist.world_size,
            )
            source = self.source_buckets and self.source_buckets[self.buckets.index(shape[1])]
            batch = self.task.pad_batch(batch, *shape, source_length=source)
        if self.cfg.train.pin_memory and self.device.type == "cuda":
            batch = batch.pinned()  # the copy below does not make the host wait (train.pin_memory)
        return self.task.to_device(batch, self.device)
