"""Length buckets (`optim.num_buckets`, `optim.static_shapes`): every example once an epoch, at most N batch
shapes, duplicates mixed into their bucket, and padding to a bucket's shape changes no loss or gradient."""

import random

import pytest
import torch

from structseq.config import config_from_dict
from structseq.data.batching import make_batches
from structseq.data.buckets import batch_shape, bucket_lengths, bucketed, distinct_lengths
from structseq.errors import ConfigError
from structseq.train.loop import Trainer
from tests.fixtures.toy import toy_tsv


def lengths(n=500, seed=0):
    r = random.Random(seed)
    return [r.randint(1, 40) for _ in range(n)]


def test_bucket_lengths_cover_every_example_in_at_most_n_buckets():
    lens = lengths()
    for n in (1, 3, 8, 100):
        b = bucket_lengths(lens, n)
        assert len(b) <= n and b == sorted(b) and b[-1] == max(lens) + 1
        padded = bucketed([x + 1 for x in lens], b)
        assert all(p >= x + 1 for p, x in zip(padded, lens))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("budget", [dict(max_tokens=200, batch_size=None), dict(max_tokens=300, batch_size=7)])
def test_every_example_once_an_epoch_in_at_most_n_shapes(seed, budget):
    lens = lengths(seed=seed)
    b = bucket_lengths(lens, 6)
    batches = make_batches(lens, lens, seed=seed, buckets=b, **budget)
    seen = sorted(i for batch in batches for i in batch)
    assert seen == list(range(len(lens)))
    shapes = {batch_shape(batch, lens, b, **budget) for batch in batches}
    assert len(shapes) <= 6
    for batch in batches:
        rows, length = batch_shape(batch, lens, b, **budget)
        assert len(batch) <= rows and max(lens[i] for i in batch) + 1 <= length
        assert rows * length <= budget["max_tokens"] or rows == 1
    other = make_batches(lens, lens, seed=seed + 10, buckets=b, **budget)
    assert other != batches  # a fresh order every epoch (the trainer's seed changes with the epoch)


@pytest.mark.parametrize("seed", range(5))
def test_duplicates_mix_with_their_bucket_instead_of_filling_batches(seed):
    """SCAN's add-primitive split in small: a tenth of the data is one short example. Sorting by exact length
    fills whole batches with its copies; 4 or 16 buckets mix them with the other short examples (5 seeds)."""
    r = random.Random(seed)
    keys = [("dup",)] * 100 + [tuple(str(r.random()) for _ in range(r.randint(3, 30))) for _ in range(900)]
    lens = [2 if k == ("dup",) else len(k) for k in keys]

    def worst(batches):
        return max(sum(keys[i] == ("dup",) for i in b) / len(b) for b in batches if len(b) >= 5)  # not a tail

    assert worst(make_batches(lens, lens, max_tokens=120, seed=seed)) >= 0.9
    for n in (4, 16):  # boundaries from the distinct examples, as the trainer draws them
        buckets = bucket_lengths(distinct_lengths(keys, lens), n)
        assert worst(make_batches(lens, lens, max_tokens=120, seed=seed, buckets=buckets)) < 0.9


def test_static_shapes_need_buckets(tmp_path):
    with pytest.raises(ConfigError, match="num_buckets"):
        from structseq.config import check_config

        check_config(config_from_dict({"optim": {"static_shapes": True}}))


MODELS = {
    "transformer": {"arch": "transformer", "encoder_layers": 1, "decoder_layers": 1},
    "dangle": {"arch": "dangle", "fusion_layers": 1, "post_fusion_layers": 1, "decoder_layers": 1},
    "rdangle-sep-o2": {
        "arch": "rdangle-sep",
        "interval": 2,
        "encoder_layers": 1,
        "fusion_layers": 1,
        "post_fusion_layers": 1,
        "decoder_layers": 1,
    },
    "lstm": {"arch": "lstm", "embed_dim": 16, "hidden_dim": 16, "layers": 1},
}


def trainer(tmp_path, model, path=None, **optim):
    width = {} if model["arch"] == "lstm" else {"d_model": 16, "n_heads": 2, "ffn_dim": 32}
    path = path or toy_tsv(tmp_path)
    cfg = config_from_dict(
        {
            "data": {"dataset": "files", "train": str(path), "valid": str(path), "test": [str(path)]},
            "model": {**model, **width, "dropout": 0.0},
            "optim": {"max_tokens": 48, **optim},
            "train": {"max_steps": 6, "valid_every": 0, "seed": 2},
        }
    )
    return Trainer(cfg, tmp_path / "run", show_progress=False)


@pytest.mark.parametrize("name", list(MODELS))
def test_padding_to_a_static_shape_changes_no_loss_or_gradient(tmp_path, name):
    t = trainer(tmp_path, MODELS[name])
    idx = [0, 3, 5]
    batch = t.task.training_batch([t.batches.examples[i] for i in idx], idx, 1)
    rows, length = batch["src"].shape[0] + 3, max(batch["src"].shape[1], batch["tgt_in"].shape[1]) + 4
    padded = t.task.pad_batch(batch, rows, length)
    assert padded["src"].shape == padded["tgt_in"].shape == (rows, length)

    def loss_and_grads(b):
        t.model.zero_grad()
        loss, nll, units = t.task.loss(t.model, b, 0.1)
        loss.backward()
        return loss.detach(), units, {n: p.grad.clone() for n, p in t.model.named_parameters() if p.grad is not None}

    t.model.train()  # dropout is 0: training mode, and the LSTM packs its sequences as it trains
    a, units_a, grads_a = loss_and_grads(batch)
    b, units_b, grads_b = loss_and_grads(padded)
    assert units_a == units_b and torch.isfinite(b)
    torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
    assert grads_a.keys() == grads_b.keys()
    for n in grads_a:
        torch.testing.assert_close(grads_b[n], grads_a[n], rtol=1e-4, atol=1e-6, msg=n)


def test_training_with_static_shapes_sees_at_most_n_shapes_and_every_example(tmp_path):
    t = trainer(tmp_path, MODELS["transformer"], num_buckets=3, static_shapes=True)
    shapes, seen = set(), []
    loss = t.task.loss

    def recording(model, batch, eps):
        shapes.add((tuple(batch["src"].shape), tuple(batch["tgt_in"].shape)))
        seen.extend(batch.index)
        return loss(model, batch, eps)

    t.task.loss = recording
    epoch = len(t.batches.epoch(0))
    for _ in range(epoch):
        t.step()
    assert sorted(seen) == list(range(len(t.batches.examples)))
    assert len(shapes) <= 3 and all(s[1] == d[1] for s, d in shapes)


def _bucket_of(n, buckets):
    """The smallest bucket length >= n: a plain loop, independent of `bucketed`."""
    for b in sorted(buckets):
        if b >= n:
            return b
    raise AssertionError(f"{n} exceeds every bucket")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("budget", [dict(max_tokens=400, batch_size=5), dict(max_tokens=60, batch_size=50)])
def test_bucket_batches_respect_both_budgets_checked_by_hand(seed, budget):
    """Issue 52: no batch holds more than `optim.batch_size` examples when `max_tokens` is set too, nor more
    padded tokens than `max_tokens` (unless it is one example); the padded length and the row count are
    recomputed with plain loops, not with `batch_shape` / `rows_for`."""
    lens = lengths(seed=seed)
    b = bucket_lengths(lens, 5)
    for batch in make_batches(lens, lens, seed=seed, buckets=b, **budget):
        length = _bucket_of(max(lens[i] for i in batch) + 1, b)
        assert len(batch) <= budget["batch_size"]
        assert len(batch) * length <= budget["max_tokens"] or len(batch) == 1
        expected_rows = max(1, min(budget["max_tokens"] // length, budget["batch_size"]))
        assert batch_shape(batch, lens, b, **budget) == (expected_rows, length)


@pytest.mark.parametrize("world_size", [2, 3])
def test_a_ranks_static_row_count_holds_its_whole_shard(world_size):
    """Issue 52: under data parallelism each rank pads its shard (`index[rank::world_size]`) to the rows that
    `batch_shape` gives; that count is rounded up, so the largest shard fits (floored it would not for a
    bucket of 7 rows over 3 ranks: shards 3, 2, 2 against 2 rows)."""
    lens = [6] * 7 + [12] * 30
    b = [7, 13]
    budget = dict(max_tokens=49, batch_size=None)  # 7 rows of length 7, 3 rows of length 13
    batches = make_batches(lens, lens, seed=0, buckets=b, **budget)
    assert sorted(len(x) for x in batches)[-1] == 7
    for batch in batches:
        rows, _ = batch_shape(batch, lens, b, world_size=world_size, **budget)
        shards = [batch[r::world_size] for r in range(world_size)]
        full = max(1, 49 // _bucket_of(max(lens[i] for i in batch) + 1, b))
        assert max(len(s) for s in shards) <= rows == -(-full // world_size)


def test_static_shapes_pad_sources_to_their_buckets_longest_source(tmp_path):
    """Issue 53: with `optim.static_shapes` a batch's source is padded to the longest source among the training
    examples of its bucket (one shape per bucket still), its target to the bucket's length: found here with
    plain loops over the examples; padding to it changes no loss (Dangle, a source shorter than the target)."""
    r = random.Random(0)  # COGS-like: short sources, targets 1-3 times as long
    rows = [[r.choice("abcdef") for _ in range(r.randint(1, 4))] for _ in range(60)]
    lines = [" ".join(x) + "\t" + " ".join(x * r.randint(1, 3)).upper() for x in rows]
    (tmp_path / "long.tsv").write_text("\n".join(lines) + "\n")
    t = trainer(tmp_path, MODELS["dangle"], tmp_path / "long.tsv", num_buckets=3, static_shapes=True)
    buckets, lens = t.batches.buckets, t.batches.lengths
    longest = {b: 1 for b in buckets}
    for e, n in zip(t.batches.examples, lens):
        b = _bucket_of(n + 1, buckets)
        longest[b] = max(longest[b], len(e["src"]))
    assert any(longest[b] < b for b in buckets)  # the test data has sources shorter than their bucket
    shapes = []
    loss = t.task.loss

    def recording(model, batch, eps):
        shapes.append((batch["src"].shape[1], batch["tgt_in"].shape[1]))
        return loss(model, batch, eps)

    t.task.loss = recording
    for _ in range(len(t.batches.epoch(0))):
        t.step()
    assert shapes and all(src == longest[tgt] for src, tgt in shapes)
    idx = [0, 3, 5]
    batch = t.task.training_batch([t.batches.examples[i] for i in idx], idx, 1)
    src_len = batch["src"].shape[1] + 1
    length = max(src_len, batch["tgt_in"].shape[1]) + 3
    padded = t.task.pad_batch(batch, 5, length, source_length=src_len)
    assert padded["src"].shape == (5, src_len) and padded["tgt_in"].shape == (5, length)
    t.model.train()
    with torch.no_grad():
        a, b = (t.task.loss(t.model, x, 0.1)[0] for x in (batch, padded))
    torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6)
