"""Markdown table of the ctx-commands records (scripts/reproduce.py output): exact match per split, mean and
sd over seeds, one row per (config, overrides).

    python scripts/context_results.py results/context/commands.jsonl [MORE.jsonl ...]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

SPLITS = ("test", "longer", "position", "combination")


def table(*paths: str) -> str:
    runs: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for line in (x for path in paths for x in Path(path).read_text().splitlines() if x.strip()):
        r = json.loads(line)
        key = (Path(r["config"]).stem, " ".join(r["overrides"]) or "-")
        runs[key][r["split"]].append(100 * r["metrics"]["exact_match"]["score"])
    out = ["| decoder | overrides | seeds | " + " | ".join(SPLITS) + " |", "|---|---|---|" + "---|" * len(SPLITS)]
    for (decoder, over), splits in runs.items():
        cells = []
        for s in SPLITS:
            v = splits.get(s, [])
            cells.append("-" if not v else f"{statistics.mean(v):.1f}" + (f" ± {statistics.stdev(v):.1f}" if len(v) > 1 else ""))
        out.append(f"| {decoder} | {over} | {len(splits.get('test', []))} | " + " | ".join(cells) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    print(table(*(sys.argv[1:] or ["results/context/commands.jsonl"])))
