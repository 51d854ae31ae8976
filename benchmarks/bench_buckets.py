"""How training batches are composed under each batching rule, on data with duplicates (issue 44, item 4).

    python benchmarks/bench_buckets.py -o results/perf/bench_buckets.json

SCAN add-primitive `jump` training split (14,670 examples, 1,467 of them the same `jump -> I_JUMP`) and COGS
(no duplicates), at the token budgets of the shipped configs (2,048: the pretrained fine-tuning configs;
4,096: the COGS/SCAN ones). For each rule, over `--epochs` epochs (seeds as the trainer draws them):

- `duplicate_only_batches`: the share of batches in which one repeated example fills at least 90% of the rows
  (the issue's 10 of 188 batches held nothing but one duplicated primitive);
- `max_share`, `worst_share`: the mean and the largest, over batches of 5 rows or more, of the largest share of
  rows held by copies of one example; `copies_in_duplicate_batches`: the share of the most repeated example's copies that sit in
  such >= 90% batches;
- `padding_efficiency`: real tokens / padded tokens (fairseq's length max(source, target) + 1), each batch padded
  to its longest example; `padding_efficiency_static`: padded to its bucket's fixed shape (`static_shapes`);
- `shapes`: distinct batch shapes (rows, padded length) per epoch: what a captured step compiles.

Rules: `sorted` (group_by_length: true, the default), `random` (group_by_length: false), and `buckets N`
(`optim.num_buckets: N`, with `optim.static_shapes`: shapes counted as padded to the bucket).
No training: the rule is the whole difference, and these counts are exact.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np

RULES = ["sorted", "random", "buckets 4", "buckets 8", "buckets 16"]
DATASETS = {"scan-jump": "scan-jump", "cogs": "cogs"}


def compose(examples, rule: str, max_tokens: int, epochs: int) -> dict:
    from structseq.data.batching import make_batches
    from structseq.data.buckets import batch_shape, bucket_lengths, distinct_lengths

    lengths = [max(len(e.source), len(e.target)) for e in examples]
    key = [(tuple(e.source), tuple(e.target)) for e in examples]
    n = int(rule.split()[1]) if rule.startswith("buckets") else 0  # boundaries as the trainer draws them
    buckets = bucket_lengths(distinct_lengths(key, lengths), n) if n else None
    top_key = Counter(key).most_common(1)[0][0]
    dup, share, real, padded, tight, shapes, n, stuck = 0, [], 0, 0, 0, [], 0, 0
    for epoch in range(epochs):
        batches = make_batches(
            lengths,
            lengths,
            max_tokens=max_tokens,
            seed=1 * 100003 + epoch,
            group_by_length=rule != "random",
            buckets=buckets,
        )
        epoch_shapes = set()
        for b in batches:
            top = Counter(key[i] for i in b).most_common(1)[0][1] / len(b)
            share.append(top if len(b) >= 5 else 0.0)  # a bucket's short tail of 1-4 rows is not a batch's mix
            dup += top >= 0.9 and len(b) > 1
            copies = sum(key[i] == top_key for i in b)
            stuck += copies if copies >= 0.9 * len(b) and len(b) > 1 else 0
            if buckets:
                rows, length = batch_shape(b, lengths, buckets, max_tokens=max_tokens, batch_size=None)
            else:
                rows, length = len(b), max(lengths[i] for i in b) + 1
            epoch_shapes.add((rows, length))
            real += sum(lengths[i] + 1 for i in b)
            padded += rows * length
            tight += len(b) * (max(lengths[i] for i in b) + 1)
        shapes.append(len(epoch_shapes))
        n += len(batches)
    return {
        "rule": rule,
        "max_tokens": max_tokens,
        "batches_per_epoch": n / epochs,
        "duplicate_only_batches": dup / n,
        "max_share": float(np.mean(share)),
        "worst_share": float(np.max(share)),
        "copies_in_duplicate_batches": stuck / (epochs * sum(k == top_key for k in key)),
        "padding_efficiency": real / tight,
        "padding_efficiency_static": real / padded,
        "shapes_per_epoch": max(shapes),
        "buckets": buckets,
    }


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-o", "--out", type=Path, required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--data-root", default=None)
    args = p.parse_args(argv)
    from structseq.data.registry import load_dataset

    rows = []
    for name, dataset in DATASETS.items():
        examples = load_dataset(dataset, "train", args.data_root)
        repeated = max(Counter((tuple(e.source), tuple(e.target)) for e in examples).values())
        for max_tokens in (2048, 4096):
            for rule in RULES:
                row = {"data": name, "examples": len(examples), "most_copies": repeated}
                rows.append({**row, **compose(examples, rule, max_tokens, args.epochs)})
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "buckets"}), flush=True)
    result = {
        "command": "python benchmarks/bench_buckets.py -o " + str(args.out),
        "epochs": args.epochs,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rows": rows,
    }
    from structseq.outputs import atomic_write

    args.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(args.out, json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
