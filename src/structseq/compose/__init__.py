"""Compositional benchmark construction (the ReaCT method of Zheng & Lapata 2023, sec. 4).

degree: OOV filter, n-gram atom dictionary, minimum-cover compositional degree.
uncertainty: Malinin & Gales ensemble measures (total, data, MI, EPKL, reverse MI).
select: top-K distinct candidates, uncertainty-window sampling, the whole `build_benchmark` pipeline.
stats: Table 2 statistics (average degree, novel word / POS n-grams). plot: Figure 1a.
"""

from structseq.compose.corpus import read_corpora, read_sentences
from structseq.compose.degree import (
    Cover,
    DegreeResult,
    NgramDictionary,
    all_min_covers,
    compositional_degree,
    min_cover,
    score_pool,
)
from structseq.compose.plot import (
    bleu_difference_by_degree,
    degree_bins,
    plot_difference,
    read_scores,
    score_difference_by_degree,
)
from structseq.compose.select import (
    BuildConfig,
    Selection,
    build_benchmark,
    read_degree_tsv,
    read_uncertainty_tsv,
    select_uncertain,
    top_k_unique,
    write_degree_tsv,
    write_uncertainty_tsv,
)
from structseq.compose.stats import get_tagger, novel_ngrams, table2_stats, textblob_tagger
from structseq.compose.uncertainty import (
    MEASURES,
    UncertaintyResult,
    VocabularyMismatch,
    load_ensemble,
    score_ensemble,
    sequence_measures,
    token_measures,
)

__all__ = [
    "MEASURES",
    "BuildConfig",
    "Cover",
    "DegreeResult",
    "NgramDictionary",
    "Selection",
    "UncertaintyResult",
    "VocabularyMismatch",
    "all_min_covers",
    "bleu_difference_by_degree",
    "build_benchmark",
    "compositional_degree",
    "degree_bins",
    "get_tagger",
    "load_ensemble",
    "min_cover",
    "novel_ngrams",
    "plot_difference",
    "read_corpora",
    "read_degree_tsv",
    "read_scores",
    "read_sentences",
    "read_uncertainty_tsv",
    "score_difference_by_degree",
    "score_ensemble",
    "score_pool",
    "select_uncertain",
    "sequence_measures",
    "table2_stats",
    "textblob_tagger",
    "token_measures",
    "top_k_unique",
    "write_degree_tsv",
    "write_uncertainty_tsv",
]
