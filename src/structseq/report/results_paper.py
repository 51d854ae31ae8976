"""The papers' numbers that `structseq report results` prints beside ours (and `results_plot` draws dotted), and
how a record's config names the paper's cell: (dataset, model) from the config's path, on the split the paper
reports."""

from __future__ import annotations

import re
from pathlib import Path

#: the papers' numbers beside ours: exact match (Akyürek & Andreas 2021 Table 2), BLEU (Wang et al. 2019 Table 5)
PAPER = {
    ("scan-jump", "lstm"): "0.00 (LSTM, A&A 2021)",
    ("scan-around-right", "lstm"): "0.09 (LSTM, A&A 2021)",
    ("cogs", "lstm"): "0.51 (LSTM, A&A 2021)",
    ("scan-jump", "lstm-lex-simple"): "0.92 ± 0.17 (+ Simple, A&A 2021, 10 seeds)",
    ("scan-around-right", "lstm-lex-simple"): "0.95 ± 0.01 (+ Simple, A&A 2021, 10 seeds)",
    ("cogs", "lstm-lex-simple"): "0.82 ± 0.01 (+ Simple, A&A 2021, 10 seeds)",
    ("cogs", "lstm-copy"): "0.66 (+ copy, A&A 2021)",
    ("scan-jump", "lstm-copy"): "- (+ copy: no SCAN row in A&A 2021; input and output share no token)",
    ("scan-around-right", "lstm-copy"): "- (+ copy: no SCAN row in A&A 2021; input and output share no token)",
    ("colors", "lstm"): "0.00 (LSTM, A&A 2021)",
    ("colors", "lstm-lex-simple"): "0.79 ± 0.02 (+ Simple, A&A 2021, 16 seeds)",
    ("colors", "lstm-lex-simple-reference"): "0.79 ± 0.02 (+ Simple, A&A 2021, 16 seeds)",
    # Wang et al. (2019) Table 5: BLEU on IWSLT fr-en (another language pair, ~25x the 9k sentences of maruf-ted:dev)
    ("ctx-maruf-ted", "sequential"): "BLEU 36.85 with context, 36.47 without (Wang et al. 2019, IWSLT fr-en)",
    ("ctx-maruf-ted", "interleave"): "BLEU 37.30 (Wang et al. 2019, IWSLT fr-en)",
    ("ctx-maruf-ted", "concatenate"): "BLEU 37.08 (Wang et al. 2019, IWSLT fr-en)",
    ("ctx-maruf-ted", "alternate"): "BLEU 36.81 (Wang et al. 2019, IWSLT fr-en)",
    ("ctx-maruf-ted", "doc-nmt"): "BLEU 36.61 (Wang et al. 2019's doc-NMT, IWSLT fr-en)",
}
for _ds, _row in (
    ("scan-jump", (0.95, 0.79, 0.82)),
    ("scan-around-right", (0.02, 0.00, 0.02)),
    ("cogs", (0.82, 0.82, 0.70)),
):
    PAPER[(_ds, "lstm-lex-pmi")] = PAPER[(_ds, "lstm-lex-pmi-first-seen")] = f"{_row[0]:.2f} (+ PMI, A&A 2021)"
    PAPER[(_ds, "lstm-lex-ibm1")] = f"{_row[1]:.2f} (+ IBMM2 = fast_align's Model 1, A&A 2021)"
    PAPER[(_ds, "lstm-lex-bayesian")] = f"{_row[2]:.2f} (+ Bayesian, A&A 2021)"
    PAPER[(_ds, "lstm-lex-ibm2")] = "- (our IBM Model 2; not in the paper)"
#: Table 5 (COGS gen, the lexicon ablation), mean ± sd over the paper's seeds
PAPER.update(
    {
        ("cogs", f"lstm-lex-{name}"): f"{score} (+ {label}, A&A 2021 Table 5)"
        for name, label, score in (
            ("uniform", "Uniform, learned", "0.56 ± 0.07"),
            ("soft", "Soft, tau 0.1", "0.83 ± 0.00"),
            ("learned", "Learned, from Simple", "0.83 ± 0.01"),
        )
    }
)


#: the lexicon paper's Tatoeba BLEU (Table 4; NLTK BLEU x 100, references pooled by source): full, 1-shot
PAPER_BLEU = {
    ("tatoeba-en-zh", "lstm"): "24.18 ± 0.37 / 17.47 ± 0.64",
    ("tatoeba-en-zh", "lstm-lex-pmi"): "24.36 ± 0.09 / 18.46 ± 0.13",
    ("tatoeba-en-zh", "lstm-lex-ibm1"): "25.49 ± 0.42 / 19.62 ± 0.64",
    ("tatoeba-en-zh", "lstm-lex-simple"): "24.35 ± 0.09 / 18.46 ± 0.19",
    ("tatoeba-en-zh", "lstm-lex-simple-frequent"): "24.35 ± 0.09 / 18.46 ± 0.19",
}


def paper_split(dataset: str) -> str:
    """The split the papers report: COGS's generalisation set, every other column's test set."""
    return "gen" if dataset == "cogs" else "test"


def paper_key(config: str) -> tuple[str, str]:
    """(dataset, config stem without its budget suffix: -cpu, -cpu-short, -256, ...)."""
    p = Path(config)
    return p.parent.name, re.sub(r"(-cpu-short|-cpu|-\d+)$", "", p.stem)


def curve_scale(metric: str) -> int:
    """100 for the paper's pooled BLEU (printed x 100, as the paper prints it), else 1."""
    return 100 if metric.startswith("pooled_bleu") else 1
