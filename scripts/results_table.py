"""Render the JSON lines written by scripts/reproduce.py as a Markdown table (mean ± sd over seeds).

    python scripts/results_table.py results/foundation.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict

#: paper exact match for the baselines (Akyürek & Andreas 2021 Table 2; Dangle/COGS literature for the Transformer)
PAPER = {
    ("scan-jump", "lstm"): "0.00 (LSTM, A&A 2021)",
    ("scan-around-right", "lstm"): "0.09 (LSTM, A&A 2021)",
    ("cogs", "lstm"): "0.51 (LSTM, A&A 2021)",
}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+")
    a = p.parse_args(argv)
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for path in a.files:
        for line in open(path):
            if line.strip():
                r = json.loads(line)
                groups[(r["config"], tuple(r.get("overrides", [])), r["split"])].append(r)
    print("| config | split | seeds | exact match | token acc. | BLEU | train wall (min) | updates | paper |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (config, overrides, split), rs in sorted(groups.items()):
        em = [r["metrics"]["exact_match"]["score"] for r in rs]
        ta = [r["metrics"]["token_accuracy"]["score"] for r in rs]
        bl = [r["metrics"]["bleu"]["score"] for r in rs]
        fmt = lambda xs, d=3: f"{statistics.mean(xs):.{d}f}" + (f" ± {statistics.stdev(xs):.{d}f}" if len(xs) > 1 else "")  # noqa: E731
        parts = config.split("/")
        key = (parts[-2], parts[-1].split("-")[0].replace(".yaml", ""))
        wall = statistics.mean(r["train_wall_s"] for r in rs) / 60
        shown = f"`{config}`" + "".join(f" `{o}`" for o in overrides if "max_steps" not in o and "valid_every" not in o)
        print(f"| {shown} | {split} | {', '.join(str(r['seed']) for r in rs)} | {fmt(em)} | {fmt(ta)} | {fmt(bl, 1)} "
              f"| {wall:.0f} | {rs[0]['steps']} | {PAPER.get(key, '') if split in ('test', 'gen') else ''} |")


if __name__ == "__main__":
    main()
