"""structseq's teacher-forced loss against the backbone's own `model(labels=...)` loss, per target convention.

    python benchmarks/check_hf_conventions.py [-o results.json]

On tiny random BART, mBART (transformers' MBartTokenizer with language codes), T5 and Marian checkpoints built
offline (structseq.testing.hf_tiny), four Colors sentences: the per-token loss of each side, their difference and the
number of target positions each scores. Run with `PYTHONPATH=OTHER/src` to measure another checkout that has
`structseq.testing` (for one before it, e.g. before issue 44, which shifted mBART's labels BART-style, run this
script as of 69534ea, when the checkpoints were built by tests/hf_tiny.py). docs/pretrained.md quotes its numbers.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from structseq.data.example import Example
from structseq.testing.hf_tiny import EXAMPLES as SENTENCES
from structseq.testing.hf_tiny import convention_checkpoints, hf_setup, labels_loss

HERE = Path(__file__).resolve().parent

EXAMPLES = [Example.from_text(src, tgt) for src, tgt in SENTENCES]


def measure(folder: Path) -> dict:
    task, vocabs, model = hf_setup(folder, EXAMPLES)
    with torch.no_grad():
        _, nll, n = task.loss(model, task.batch(EXAMPLES, vocabs), 0.0)
    theirs, labels = labels_loss(folder, EXAMPLES)
    ours = float(nll) / n
    return {
        "structseq": ours,
        "transformers": theirs,
        "difference": abs(ours - theirs),
        "positions": int(n),
        "transformers_positions": int(labels.ne(-100).sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, help="also write the rows as JSON here (a new file)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        rows = {family: measure(folder) for family, folder in convention_checkpoints(Path(tmp)).items()}
    print("| family | structseq loss | transformers loss | difference | positions (structseq / transformers) |")
    print("|---|---|---|---|---|")
    for family, r in rows.items():
        print(
            f"| {family} | {r['structseq']:.7f} | {r['transformers']:.7f} | {r['difference']:.1e} | "
            f"{r['positions']} / {r['transformers_positions']} |"
        )
    if args.output is not None:
        with open(args.output, "x") as f:  # never replaces a file
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
