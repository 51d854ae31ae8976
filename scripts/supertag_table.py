"""Tables of the supertagging records (issue 10) from runs/supertag/*/eval-test-beam{1,5}.json.

    python scripts/supertag_table.py runs/supertag [-o results/supertag/summary.json]

Prints Markdown: Table 2 columns (overall / frequent / uncommon / rare / unseen word accuracy, sentence accuracy)
as mean +- sd over seeds per config, greedy vs beam 5 with the k-best oracle, the unseen-category counts, and
the beta curve of the tree tagger (accuracy vs categories per word), and writes every number as JSON.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

ORDER = ["classifier", "tree", "tree-nosf", "tree-nonf", "tree-nosf-nonf"]


def val(m: dict, key: str) -> float:
    """A score of an evaluation JSON (current form {score, ...}; records of the first runs held bare numbers and
    the bins under `bins`)."""
    if key.startswith("accuracy_") and key not in m:
        return m["bins"][key[len("accuracy_"):]]["accuracy"]
    v = m[key]
    return v["score"] if isinstance(v, dict) else v


COLS = [("overall", lambda m: val(m, "accuracy"))] + \
    [(b, lambda m, b=b: val(m, f"accuracy_{b}")) for b in ("frequent", "uncommon", "rare", "unseen")] + \
    [("sentence", lambda m: val(m, "sentence_accuracy"))]


def fmt(xs: list[float]) -> str:
    if not xs:
        return "—"
    if len(xs) == 1:
        return f"{xs[0]:.2f}"
    return f"{statistics.mean(xs):.2f} ± {statistics.stdev(xs):.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs", type=Path)
    ap.add_argument("-o", "--out", type=Path)
    args = ap.parse_args()
    runs: dict[str, dict[int, dict]] = defaultdict(dict)
    for d in sorted(args.runs.iterdir()):
        m = re.fullmatch(r"(.+)-s(\d+)", d.name)
        if not m or not (d / "eval-test-beam1.json").exists():
            continue
        rec = {"beam1": json.loads((d / "eval-test-beam1.json").read_text())}
        if (d / "eval-test-beam5.json").exists():
            rec["beam5"] = json.loads((d / "eval-test-beam5.json").read_text())
        runs[m.group(1)][int(m.group(2))] = rec
    configs = [c for c in ORDER if c in runs] + sorted(c for c in runs if c not in ORDER)
    out = {"configs": {c: {str(s): r for s, r in runs[c].items()} for c in configs}}
    print("| model | seeds | " + " | ".join(n for n, _ in COLS) + " |")
    print("|---|---|" + "---|" * len(COLS))
    for c in configs:
        recs = list(runs[c].values())
        print(f"| {c} (greedy) | {len(recs)} | " + " | ".join(fmt([f(r['beam1']) for r in recs]) for _, f in COLS) + " |")
    print()
    print("| model | greedy | beam 5 best | beam 5 oracle | unseen predicted (right) | ill-formed argmax repaired |")
    print("|---|---|---|---|---|---|")
    for c in configs:
        recs = [r for r in runs[c].values() if "beam5" in r]
        if not recs:
            continue
        unseen = ", ".join(f"{r['beam1']['unseen_predicted']} ({r['beam1']['unseen_predicted_correct']})" for r in recs)
        rep = ", ".join(str(r["beam1"].get("ill_formed_repaired", "—")) for r in recs)
        print(f"| {c} | {fmt([val(r['beam1'], 'accuracy') for r in recs])} | "
              f"{fmt([val(r['beam5'], 'accuracy') for r in recs])} "
              f"| {fmt([val(r['beam5'], 'oracle_accuracy') for r in recs])} | {unseen} | {rep} |")
    print()
    for c in configs:
        recs = [r for r in runs[c].values() if "beam5" in r]
        if not recs:
            continue
        print(f"beta curve, {c} (beam 5; mean over {len(recs)} seed(s)): " + "; ".join(
            f"beta {p['beta']:g}: {statistics.mean(r['beam5']['multitag'][i]['accuracy'] for r in recs):.2f}% at "
            f"{statistics.mean(r['beam5']['multitag'][i]['tags_per_word'] for r in recs):.2f}/word"
            for i, p in enumerate(recs[0]["beam5"]["multitag"])))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
