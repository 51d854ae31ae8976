"""Padded work of static shapes, counted analytically (issue 53): the linear and attention FLOPs of one epoch of
COGS training batches for the Transformer and Dangle / R-Dangle_sep (the Dangle paper's COGS sizes), under

- `sorted`: batches of examples sorted by length (`optim.num_buckets: 0`), each padded to its own longest source
  and target, Dangle computing only the (point, sentence) rows within a sentence (the reference's work);
- `static, one length`: `optim.static_shapes` before issue 53: source and target padded to the bucket's length,
  the bucket's fixed row count, every (point, sentence) row;
- `static, source bucket`: the same, with the source padded to the longest source of its bucket (one shape per
  bucket still: `structseq.data.buckets.source_lengths`).

FLOPs are 2 x multiply-adds of the forward pass (the backward is about twice that for every scheme alike):
linear = projections, FFNs and the output layer; attention = Q.K and weights.V. No timing: the counts are exact
for the shapes the batches have. `--out FILE` writes the record; `--table FILE` prints the markdown table of a
record (docs/performance.md generates its table with it).

    python scripts/padding_flops.py --out results/perf/padding_flops.json
    python scripts/padding_flops.py --table results/perf/padding_flops.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from structseq.data.batching import make_batches
from structseq.data.buckets import batch_shape, bucket_lengths, distinct_lengths, source_lengths

D, FFN, V = 300, 512, 700  # the Dangle paper's COGS sizes (configs/cogs/*.yaml); V: about COGS's target vocabulary
ARCHS = {  # layers: encoder, fusion (k1), post-fusion (k2), decoder; interval; values encoded once (sep)
    "transformer": dict(enc=2, k1=0, k2=0, dec=2, o=None, sep=False),
    "dangle": dict(enc=0, k1=1, k2=1, dec=2, o=1, sep=False),
    "rdangle-sep o=1": dict(enc=2, k1=1, k2=1, dec=2, o=1, sep=True),
    "rdangle-sep o=4": dict(enc=2, k1=1, k2=1, dec=2, o=4, sep=True),
}
CHUNK_STEPS = 32  # a chunk's target steps on an accelerator (RDangleSeq2Seq.AUTO_CHUNK_STEPS_ACCELERATOR)


def lin(n):  # an encoder layer's projections and FFN over n positions
    return 2 * n * (4 * D * D + 2 * D * FFN)


def att(nq, nk):
    return 4 * nq * nk * D


def batch_flops(arch: dict, S: int, T: int, tgt_lens: list[int]) -> tuple[float, float]:
    """(linear, attention) FLOPs of one batch: rows padded to S source / T target positions; `tgt_lens`: each
    row's decoder inputs (a filler row: 0; Dangle skips rows past them only in `sorted`, given as T)."""
    B = len(tgt_lens)
    a = arch
    linear = B * a["enc"] * lin(S) + B * T * 2 * D * V  # value / standard encoder, output layer
    attn = B * a["enc"] * att(S, S)
    if a["o"] is None:  # the Transformer's decoder: self- and cross-attention over the whole target
        return linear + B * a["dec"] * (lin(T) + 2 * T * 2 * D * D + 2 * S * 2 * D * D), attn + B * a["dec"] * (
            att(T, T) + att(T, S)
        )
    o = a["o"]
    points = list(range(0, T, o))
    size = -(-CHUNK_STEPS // o)
    lens = np.asarray(tgt_lens)
    for i in range(0, len(points), size):
        group = points[i : i + size]
        L, end = group[-1] + 2, min(group[-1] + o, T)
        rows = sum(int((lens > p).sum()) for p in group)
        linear += rows * (a["k1"] * lin(S + L) + a["k2"] * lin(S))
        attn += rows * (a["k1"] * att(S + L, S + L) + a["k2"] * att(S, S))
        kv = (1 if a["sep"] else 2) * S * 2 * D * D  # keys projected per row (values too unless sep)
        linear += rows * a["dec"] * (lin(end) + 2 * end * 2 * D * D + kv)
        attn += rows * a["dec"] * (att(end, end) + att(end, S))
    if a["sep"]:
        linear += B * a["dec"] * S * 2 * D * D  # values projected once per batch
    return linear, attn


def epoch_flops(arch, src, tgt, scheme, num_buckets, max_tokens):
    """(linear, attention) of one epoch's batches under `scheme`."""
    lengths = np.maximum(src - 1, tgt - 1)  # the task's length (SeqTask.length)
    total = np.zeros(2)
    if scheme == "sorted":
        for batch in make_batches(lengths, lengths, max_tokens=max_tokens, shuffle=False):
            total += batch_flops(arch, int(src[batch].max()), int(tgt[batch].max()), tgt[batch].tolist())
        return total
    buckets = bucket_lengths(distinct_lengths(list(zip(src.tolist(), tgt.tolist())), lengths.tolist()), num_buckets)
    src_pad = source_lengths(src.tolist(), lengths.tolist(), buckets)
    for batch in make_batches(lengths, lengths, max_tokens=max_tokens, shuffle=False, buckets=buckets):
        rows, length = batch_shape(batch, lengths, buckets, max_tokens=max_tokens, batch_size=None)
        S = length if scheme == "static, one length" else src_pad[buckets.index(length)]
        full = [length] * rows  # every (point, sentence) row, filler rows too
        total += batch_flops(arch, S, length, full)
    return total


def measure(data_root, num_buckets, max_tokens) -> dict:
    from structseq.data.registry import load_dataset

    train = load_dataset("cogs", data_root=data_root)
    src = np.asarray([len(e.source) + 1 for e in train])  # + </s>
    tgt = np.asarray([len(e.target) + 1 for e in train])  # decoder inputs: <s> y
    rows = []
    for name, arch in ARCHS.items():
        base = epoch_flops(arch, src, tgt, "sorted", num_buckets, max_tokens)
        for scheme in ("sorted", "static, one length", "static, source bucket"):
            f = base if scheme == "sorted" else epoch_flops(arch, src, tgt, scheme, num_buckets, max_tokens)
            rows.append(
                {
                    "arch": name,
                    "scheme": scheme,
                    "linear_tflop": f[0] / 1e12,
                    "attention_tflop": f[1] / 1e12,
                    "linear_ratio": f[0] / base[0],
                    "attention_ratio": f[1] / base[1],
                    "total_ratio": f.sum() / base.sum(),
                }
            )
    settings = {"dataset": "cogs train", "num_buckets": num_buckets, "max_tokens": max_tokens, "d_model": D}
    return {"settings": {**settings, "ffn_dim": FFN, "chunk_steps": CHUNK_STEPS}, "rows": rows}


def table(record: dict) -> str:
    s = record["settings"]
    lines = [
        f"COGS train, one epoch, {s['num_buckets']} buckets, {s['max_tokens']} tokens a batch, d {s['d_model']}, "
        f"FFN {s['ffn_dim']}, {s['chunk_steps']}-step chunks; forward FLOPs, ratio to sorted batches.",
        "",
        "| arch | batches | linear TFLOP | attention TFLOP | linear / sorted | attention / sorted | all / sorted |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in record["rows"]:
        lines.append(
            f"| {r['arch']} | {r['scheme']} | {r['linear_tflop']:.1f} | {r['attention_tflop']:.1f} | "
            f"{r['linear_ratio']:.2f} | {r['attention_ratio']:.2f} | {r['total_ratio']:.2f} |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", help="write the record here (refused if it exists)")
    p.add_argument("--table", help="print the markdown table of this record")
    p.add_argument("--data-root", default=None)
    p.add_argument("--num-buckets", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=4096)
    args = p.parse_args(argv)
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return 0
    if not args.out:
        p.error("give --out FILE (write a record) or --table FILE (print one)")
    out = Path(args.out)
    if out.exists():
        p.error(f"{out} exists; choose another --out")
    record = measure(args.data_root, args.num_buckets, args.max_tokens)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(json.dumps(record, indent=1) + "\n")
    tmp.replace(out)
    print(table(record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
