"""Which definition did a ctx-commands model read? Error analysis of a predictions TSV.

    python scripts/analysis/ctx_errors.py runs/ctx-explore-lex/ctx-commands-interleave-*-s1/predictions/test.tsv

For the commands made of one defined word alone (e.g. `dax`), each hypothesis is one of: correct; the meaning
of *another* definition of the same context (`other definition, before` / `after` the right one: the model
copied a definition but matched the wrong word); or no definition of the context at all (`none`: it did not
compose the meaning from the context). The counts separate "cannot copy" from "cannot find the right word".
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import Counter

PRIMITIVES = {"walk": "WALK", "run": "RUN", "jump": "JUMP", "look": "LOOK"}


def classify(source: str, context: str, hypothesis: str, reference: str) -> str | None:
    """The class of one prediction, or None when the command is not a single defined word."""
    src, ctx = source.split(), context.split()
    if len(src) != 1 or src[0] in PRIMITIVES:
        return None
    defs = [
        (ctx[i - 1], [PRIMITIVES[w] for w in ctx[i + 1 : ctx.index(".", i)]]) for i, t in enumerate(ctx) if t == "means"
    ]
    if hypothesis == reference:
        return "correct"
    right = next(k for k, (w, _) in enumerate(defs) if w == src[0])
    hyp = hypothesis.split()
    other = [k for k, (w, m) in enumerate(defs) if m == hyp and k != right]
    if other:
        return "other definition, before" if other[0] < right else "other definition, after"
    return "none"


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("predictions", help="a run's predictions/<split>.tsv (with its context column)")
    a = p.parse_args(argv)
    with open(a.predictions, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\"))
    counts = Counter(c for r in rows if (c := classify(r["source"], r["context"], r["hypothesis"], r["reference"])))
    out = {"single_defined_word_commands": sum(counts.values()), **dict(sorted(counts.items()))}
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
