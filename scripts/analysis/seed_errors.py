"""Which test examples fail across seeds, and how: the spread of a small test set (Colors has 10 commands) is a
question of which examples each seed loses, and what it writes instead.

    python scripts/analysis/seed_errors.py runs/colors-spread/colors-lstm-lex-simple-threads1-s* \\
        runs/colors-spread/colors-lstm-lex-simple-threads1-feed_dropouttrue-s* --lexicon

Runs are grouped by their directory name without the `-s<seed>` suffix (one group per config), and each run's
`predictions/<split>.tsv` (written by `structseq evaluate` and by reproduce.py) is read; a directory that holds
run directories stands for them all. `--keep DIR` copies those files to DIR/RUN/predictions/, which is all
this script reads without --lexicon: a small record that regenerates the tables without the run directories. Prints, in Markdown:
per example, how many seeds of each group got it wrong and the wrong outputs they wrote; per run, its score
and the examples it lost. `--lexicon` adds each group's learned lexicon L (the rows of source words whose best
output has at least --min-prob), and says whether the rows are the same in every seed of the group.
"""

from __future__ import annotations

import argparse
import csv
import re
from collections import Counter
from pathlib import Path

SEED = re.compile(r"-s(\d+)$")


def group_of(run: Path) -> tuple[str, int | None]:
    m = SEED.search(run.name)
    return (run.name[: m.start()], int(m.group(1))) if m else (run.name, None)


def read_predictions(run: Path, split: str) -> list[dict[str, str]]:
    path = run / "predictions" / f"{split}.tsv"
    if not path.is_file():
        raise SystemExit(f"{path}: no predictions (run `structseq evaluate {run} --split {split}` first)")
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\"))


def expand(paths: list[Path], split: str) -> list[Path]:
    """Run directories: each path, or the runs a directory of runs holds."""
    runs = []
    for p in paths:
        inner = sorted(d for d in p.iterdir() if (d / "predictions" / f"{split}.tsv").is_file()) if p.is_dir() else []
        runs += inner if inner and not (p / "predictions").is_dir() else [p]
    return runs


def keep(runs: list[Path], split: str, out: Path) -> None:
    from structseq.outputs import atomic_write

    for run in runs:
        dest = out / run.name / "predictions" / f"{split}.tsv"
        dest.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(dest, (run / "predictions" / f"{split}.tsv").read_text(encoding="utf-8"))


def collect(runs: list[Path], split: str) -> tuple[dict[str, list[tuple[int | None, Path, list[dict]]]], list]:
    """Per group, its runs (seed, dir, rows); and the examples (source, reference) in the order of the first run."""
    groups: dict[str, list] = {}
    examples: list[tuple[str, str]] = []
    for run in sorted(runs, key=lambda r: (group_of(r)[0], group_of(r)[1] or 0)):
        rows = read_predictions(run, split)
        keys = [(r["source"], r["reference"]) for r in rows]
        if not examples:
            examples = keys
        elif keys != examples:
            raise SystemExit(f"{run}: its {split} examples differ from the other runs'")
        name, seed = group_of(run)
        groups.setdefault(name, []).append((seed, run, rows))
    return groups, examples


def example_table(groups: dict, examples: list) -> list[str]:
    names = list(groups)
    head = "| source | reference | " + " | ".join(f"wrong in `{n}`" for n in names) + " | wrong outputs (seeds) |"
    out = [head, "|" + "---|" * (3 + len(names))]
    order = sorted(
        range(len(examples)),
        key=lambda i: -sum(r[i]["correct"] != "1" for runs in groups.values() for _, _, r in runs),
    )
    for i in order:
        cells, wrong = [], Counter()
        for runs in groups.values():
            bad = [r[i]["hypothesis"] for _, _, r in runs if r[i]["correct"] != "1"]
            cells.append(f"{len(bad)} / {len(runs)}")
            wrong.update(h or "(empty)" for h in bad)
        shown = "; ".join(f"`{h}` ({n})" for h, n in wrong.most_common(4)) or "-"
        src, ref = examples[i]
        out.append(f"| `{src}` | `{ref}` | " + " | ".join(cells) + f" | {shown} |")
    return out


def run_table(groups: dict, examples: list) -> list[str]:
    out = ["| run | seed | correct | lost (source) |", "|---|---|---|---|"]
    for runs in groups.values():
        for seed, run, rows in runs:
            lost = [examples[i][0] for i, r in enumerate(rows) if r["correct"] != "1"]
            right = len(rows) - len(lost)
            out.append(f"| `{run.name}` | {seed} | {right} / {len(rows)} | " + ", ".join(f"`{s}`" for s in lost) + " |")
    return out


def lexicon_table(groups: dict, min_prob: float) -> list[str]:
    from structseq import api
    from structseq.errors import StructseqError

    out = ["| group | source word: best output (probability) | same in every seed |", "|---|---|---|"]
    for name, runs in groups.items():
        seen = []
        for _, run, _ in runs:
            try:
                lex = api.load_run(run, device="cpu").lexicon(min_prob)
            except StructseqError:
                break  # a run without a lexicon: no row for the group
            best = {x: max(row.items(), key=lambda kv: kv[1]) for x, row in lex.items() if row}
            seen.append(tuple(sorted((x, y, round(p, 3)) for x, (y, p) in best.items())))
        if seen:
            rows = ", ".join(f"`{x}`: `{y}` ({p:.2f})" for x, y, p in seen[0])
            out.append(f"| `{name}` | {rows or '-'} | {'yes' if len(set(seen)) == 1 else 'no'} |")
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+", type=Path, help="run directories (one per seed; several configs allowed)")
    p.add_argument("--split", default="test", help="the predictions file to read (default: test)")
    p.add_argument("--lexicon", action="store_true", help="add each group's learned lexicon rows")
    p.add_argument("--min-prob", type=float, default=0.5, help="with --lexicon: lowest probability shown")
    p.add_argument("--keep", type=Path, metavar="DIR", help="copy each run's predictions file under DIR/RUN/")
    a = p.parse_args(argv)
    if not 0.0 < a.min_prob <= 1.0:
        p.error(f"--min-prob must be in (0, 1], got {a.min_prob}")
    runs = expand(a.runs, a.split)
    groups, examples = collect(runs, a.split)
    if a.keep:
        keep(runs, a.split, a.keep)
    print("\n".join(example_table(groups, examples)))
    print()
    print("\n".join(run_table(groups, examples)))
    if a.lexicon:
        print()
        print("\n".join(lexicon_table(groups, a.min_prob)))


if __name__ == "__main__":
    main()
