"""Grammar constraints on a trained run (issue 54 item 5): each split decoded with and without `decode.grammar`,
the share of ill-formed outputs (not sentences of the grammar), exact match overall and per category, and the
decoding CPU seconds of each (with the machine's load average: rerun on a quiet machine for timings).

    python benchmarks/bench_grammar.py RUN_DIR --grammar cogs --split test --split gen --beam 5 \
        --out results/decode/grammar-cogs.json

The record (JSON, written atomically; an existing --out is refused unless --overwrite) is what `structseq report
grammar` renders into docs/decoding.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch


def _exact(outputs, examples) -> dict:
    by: dict[str, list[int]] = defaultdict(list)
    for out, e in zip(outputs, examples):
        by[e.category or "all"].append(int(tuple(out) == tuple(e.target)))
    hits = [h for v in by.values() for h in v]
    return {"exact_match": sum(hits) / max(len(hits), 1), "per_category": {k: sum(v) / len(v) for k, v in by.items()}}


def measure(run, examples, grammar: str, beam: int, repeats: int) -> dict:
    from structseq.decode.processors.grammar import grammar_constraint

    checker = grammar_constraint(grammar, run.task.output_space(run.vocabs))
    out = {}
    for label, overrides in (("free", []), ("grammar", [f"decode.grammar={grammar}"])):
        r = run.with_overrides(overrides)
        seconds = []
        for _ in range(repeats):
            start = time.process_time()
            lists = r.search(examples, beam=beam)
            seconds.append(time.process_time() - start)
        outputs = [c[0].tokens for c in lists]
        ill = sum(not checker.accepts(o) for o in outputs)
        out[label] = {
            "ill_formed": ill,
            "ill_formed_share": ill / len(outputs),
            "cpu_seconds": min(seconds),
            "cpu_seconds_all": seconds,
            **_exact(outputs, examples),
        }
    out["time_ratio"] = out["grammar"]["cpu_seconds"] / out["free"]["cpu_seconds"]
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", help="a trained run directory")
    p.add_argument("--grammar", required=True, help="a registered grammar (decode.grammar)")
    p.add_argument("--split", action="append", required=True, help="a split to decode (repeatable)")
    p.add_argument("--beam", type=int, action="append", help="beam sizes (repeatable; default 1 and 5)")
    p.add_argument("--sample", type=int, default=None, help="N examples of each split, evenly spaced (every k-th)")
    p.add_argument("--repeats", type=int, default=1, help="decodings of each setting (the least CPU time kept)")
    p.add_argument("--data-root", default=None)
    p.add_argument("--out", required=True, help="the record's JSON file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --out")
    a = p.parse_args(argv)
    if Path(a.out).exists() and not a.overwrite:
        print(f"error: {a.out} exists; give --overwrite to replace it", file=sys.stderr)
        return 2
    from structseq.api import load_run
    from structseq.outputs import atomic_write

    torch.set_num_threads(1)
    run = load_run(a.run, device="cpu")
    rows = []
    for split in a.split:
        dataset, name, examples = run.load_split(split, a.data_root)
        if a.sample and a.sample < len(examples):
            examples = examples[:: -(-len(examples) // a.sample)]
        for beam in a.beam or [1, 5]:
            rows.append(
                {"dataset": dataset, "split": name, "beam": beam, "n": len(examples)}
                | measure(run, examples, a.grammar, beam, a.repeats)
            )
            print(json.dumps({k: v for k, v in rows[-1].items() if k not in ("free", "grammar")}), flush=True)
    record = {
        "run": str(a.run),
        "grammar": a.grammar,
        "arch": run.config.model.arch,
        "command": "python benchmarks/bench_grammar.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "load_average": os.getloadavg(),
        "machine": f"{platform.machine()} {os.cpu_count()} CPUs, torch threads 1",
        "rows": rows,
    }
    atomic_write(a.out, json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
