"""What a COGS model gets wrong on `gen`: the share of wrong outputs that miss a content word of the reference
(a noun, name or verb lemma: a lexical error) against those with every content word right (a structural error),
and in how many training logical forms the most-missed words occur (COGS's exposure words occur in one).
`--lexicon` adds, for a lexical-translation run, the source words whose row of the trained L puts at least half its
mass on each most-missed word ("-": none, so only the decoder's own softmax can write it).

    python scripts/analysis/cogs_errors.py runs/budget/cogs-lstm-256-s1 runs/budget/cogs-lstm-lex-simple-256-s1
    python scripts/analysis/cogs_errors.py runs/budget/cogs-lstm-lex-bayesian-256-s1 --lexicon
    python scripts/analysis/cogs_errors.py --exposure      # data only: which gen sentences need a word seen once in training

Reads each run's `predictions/gen.tsv` (written by `structseq evaluate RUN --split gen` and by reproduce.py) and
COGS's `train.tsv` under the data root ($STRUCTSEQ_DATA, else ../shared/data).
"""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path

#: logical-form tokens that are structure, not content
STRUCTURE = {
    "(",
    ")",
    ",",
    ".",
    "AND",
    ";",
    "*",
    "x",
    "_",
    "agent",
    "theme",
    "recipient",
    "ccomp",
    "xcomp",
    "nmod",
    "in",
    "on",
    "beside",
    "LAMBDA",
    "e",
}


def content(lf: str) -> Counter:
    return Counter(t for t in lf.split() if t not in STRUCTURE and not t.isdigit())


def analyse(run: Path, train_freq: Counter, top: int = 5) -> dict:
    with open(run / "predictions" / "gen.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\"))
    wrong = [r for r in rows if r["correct"] != "1"]
    missing: Counter = Counter()
    lexical = 0
    for r in wrong:
        lost = content(r["reference"]) - content(r["hypothesis"])
        lexical += bool(lost)
        missing.update(lost)
    return {
        "run": run.name,
        "n": len(rows),
        "wrong": len(wrong),
        "lexical": lexical,
        "top": [(w, n, train_freq.get(w)) for w, n in missing.most_common(top)],
    }


def exposure(gen: Path, train_freq: Counter, at_most: int = 1) -> dict[str, tuple[int, int]]:
    """Per gen category: (sentences, sentences whose reference holds a content word in at most `at_most` training
    logical forms). Such a sentence cannot be right unless the model writes a word it saw that rarely."""
    out: dict[str, list[int]] = {}
    for line in open(gen, encoding="utf-8"):
        _, lf, category = line.rstrip("\n").split("\t")[:3]
        n = out.setdefault(category, [0, 0])
        n[0] += 1
        n[1] += any(train_freq.get(w, 0) <= at_most for w in content(lf))
    return {c: (n, r) for c, (n, r) in sorted(out.items())}


def translated_from(run: Path, words: list[str], min_prob: float = 0.5) -> dict[str, list[str]] | None:
    """Per word, the source words whose row of the run's lexicon L gives it >= min_prob; None for a run without one."""
    from structseq import api
    from structseq.errors import StructseqError

    try:
        lexicon = api.load_run(run, device="cpu").lexicon(min_prob, keep_copies=True)
    except StructseqError:
        return None
    return {w: [x for x, row in lexicon.items() if row.get(w, 0.0) >= min_prob] for w in words}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="*", type=Path)
    p.add_argument("--data-root", type=Path, help="default: $STRUCTSEQ_DATA, else ../shared/data")
    p.add_argument("--top", type=int, default=5, help="most-missed words to list")
    p.add_argument(
        "--lexicon",
        action="store_true",
        help="add the source words each most-missed word is L's translation of (lexical runs)",
    )
    p.add_argument(
        "--exposure",
        action="store_true",
        help="no runs: per gen category, the sentences whose reference needs a word of at most one "
        "training logical form",
    )
    a = p.parse_args(argv)
    if not a.runs and not a.exposure:
        p.error("give run directories, or --exposure")
    from structseq.paths import data_root

    train = (a.data_root or data_root()) / "cogs" / "train.tsv"
    freq: Counter = Counter()
    for line in open(train, encoding="utf-8"):  # training logical forms holding each content word
        freq.update(set(content(line.split("\t")[1])))
    if a.exposure:
        cats = exposure(train.with_name("gen.tsv"), freq)
        print("| gen category | sentences | with a word of at most one training example |")
        print("|---|---|---|")
        for c, (n, r) in cats.items():
            print(f"| `{c}` | {n} | {r} ({r / n:.0%}) |")
        n, r = (sum(v[i] for v in cats.values()) for i in (0, 1))
        print(f"| all | {n} | {r} ({r / n:.1%}) |")
        return
    print(
        "| run | gen sentences | wrong | wrong with a content word missed | most missed (times; training examples "
        "with the word" + ("; source words L translates to it" if a.lexicon else "") + ") |"
    )
    print("|---|---|---|---|---|")
    for run in a.runs:
        r = analyse(run, freq, a.top)
        sources = translated_from(run, [w for w, _, _ in r["top"]]) if a.lexicon else None
        top = ", ".join(
            f"`{w}` ({n}; {'-' if f is None else f}"
            + (f"; {' '.join(sources[w]) or '-'}" if sources is not None else "")
            + ")"
            for w, n, f in r["top"]
        )
        print(
            f"| `{r['run']}` | {r['n']} | {r['wrong']} | {r['lexical']} ({r['lexical'] / max(r['wrong'], 1):.1%}) "
            f"| {top} |"
        )


if __name__ == "__main__":
    main()
