"""Score difference between two systems as a function of compositional degree (paper, Figure 1a).

Examples are grouped by degree, either into bins of equal size (the paper uses 30K examples per
bin) or of equal width, and each bin gets one value per system: the mean of per-example scores, or
corpus BLEU over the bin when hypotheses and references are given (what Figure 1a plots).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from structseq.errors import ConfigError, DataError
from structseq.outputs import UNCHECKED, Outputs

BINNINGS = ("count", "width")


@dataclass
class Scores:
    """Per-example scores read from a file; `lines` (1-based pool lines) when the file names them."""

    values: np.ndarray
    lines: np.ndarray | None = None


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_scores(path: str | os.PathLike, column: str | None = None) -> Scores:
    """Read per-example scores: a bare number per line, or a TSV with a header.

    With a header, the value comes from `column` (default: `score` if present, else the last column),
    and a `line` column, when present, lets the scores be joined to a degree table by pool line.
    """
    path = Path(path)
    if not path.is_file():
        raise DataError("no such file", path)
    rows = [line.rstrip("\r\n").split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not rows:
        raise DataError("no scores", path)
    header = None
    if not all(_is_number(field) for field in rows[0]):
        header, rows = rows[0], rows[1:]
    if header is None:
        if column is not None:
            raise DataError(f"no header row, so no column {column!r}", path)
        return Scores(np.asarray([float(r[-1]) for r in rows], dtype=np.float64))
    name = column or ("score" if "score" in header else header[-1])
    if name not in header:
        raise DataError(f"no column {name!r}; columns are {', '.join(header)}", path)
    index = header.index(name)
    values = np.asarray([float(r[index]) for r in rows], dtype=np.float64)
    lines = np.asarray([int(r[header.index("line")]) for r in rows], dtype=np.int64) if "line" in header else None
    return Scores(values, lines)


def align(scores: Scores, lines: np.ndarray, what: str = "scores") -> np.ndarray:
    """Scores in the order of a degree table's `lines` (NaN where a line has no score)."""
    if scores.lines is None:
        if len(scores.values) != len(lines):
            raise DataError(
                f"{what}: {len(scores.values)} scores without a `line` column, but the degree table has "
                f"{len(lines)} rows; give one score per degree row or a `line` column"
            )
        return scores.values
    lookup = dict(zip(scores.lines.tolist(), scores.values.tolist()))
    return np.asarray([lookup.get(line, math.nan) for line in lines.tolist()], dtype=np.float64)


def degree_bins(
    degree: np.ndarray, *, bins: int = 10, binning: str = "count", bin_size: int | None = None
) -> list[np.ndarray]:
    """Index groups of the finite-degree examples, in increasing degree.

    "count": equal-size bins by rank (`bin_size` examples each when given, else `bins` bins);
    "width": `bins` equal-width intervals of degree (empty ones dropped).
    """
    if binning not in BINNINGS:
        raise ConfigError(f"binning must be one of {', '.join(BINNINGS)}, got {binning!r}")
    degree = np.asarray(degree, dtype=np.float64)
    index = np.flatnonzero(np.isfinite(degree))
    if not len(index):
        return []
    if bin_size is not None:
        if bin_size < 1:
            raise ConfigError(f"bin_size must be >= 1, got {bin_size}")
        if binning != "count":
            raise ConfigError("bin_size applies to count binning only")
        bins = math.ceil(len(index) / bin_size)
    if bins < 1:
        raise ConfigError(f"bins must be >= 1, got {bins}")
    if binning == "count":
        ordered = index[np.argsort(degree[index], kind="stable")]
        return [group for group in np.array_split(ordered, min(bins, len(ordered))) if len(group)]
    values = degree[index]
    lo, hi = float(values.min()), float(values.max())
    edges = np.linspace(lo, hi, bins + 1) if hi > lo else np.array([lo, lo + 1.0])
    which = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, len(edges) - 2)
    return [index[which == b] for b in range(len(edges) - 1) if (which == b).any()]


def score_difference_by_degree(
    degree: np.ndarray,
    scores_a: np.ndarray,
    scores_b: np.ndarray,
    *,
    bins: int = 10,
    binning: str = "count",
    bin_size: int | None = None,
) -> list[dict]:
    """Per bin: degree range, size, mean score of A and of B, and A - B (examples scored by both)."""
    degree = np.asarray(degree, dtype=np.float64)
    a, b = np.asarray(scores_a, dtype=np.float64), np.asarray(scores_b, dtype=np.float64)
    if not (len(degree) == len(a) == len(b)):
        raise DataError(f"lengths differ: {len(degree)} degrees, {len(a)} and {len(b)} scores")
    usable = np.where(np.isfinite(a) & np.isfinite(b), degree, np.nan)
    rows = []
    for group in degree_bins(usable, bins=bins, binning=binning, bin_size=bin_size):
        mean_a, mean_b = float(a[group].mean()), float(b[group].mean())
        rows.append(_bin_row(degree[group], mean_a, mean_b))
    return rows


def bleu_difference_by_degree(
    degree: np.ndarray,
    hyps_a: Sequence[str],
    hyps_b: Sequence[str],
    refs: Sequence[str],
    *,
    bins: int = 10,
    binning: str = "count",
    bin_size: int | None = None,
) -> list[dict]:
    """Per bin: corpus BLEU (sacrebleu defaults) of A and of B over the bin's examples, and A - B."""
    import sacrebleu

    if not (len(degree) == len(hyps_a) == len(hyps_b) == len(refs)):
        raise DataError(
            f"lengths differ: {len(degree)} degrees, {len(hyps_a)}/{len(hyps_b)} hypotheses, {len(refs)} references"
        )
    degree = np.asarray(degree, dtype=np.float64)
    rows = []
    for group in degree_bins(degree, bins=bins, binning=binning, bin_size=bin_size):
        picked_refs = [refs[i] for i in group.tolist()]
        bleu_a = sacrebleu.corpus_bleu([hyps_a[i] for i in group.tolist()], [picked_refs]).score
        bleu_b = sacrebleu.corpus_bleu([hyps_b[i] for i in group.tolist()], [picked_refs]).score
        rows.append(_bin_row(degree[group], bleu_a, bleu_b))
    return rows


def _bin_row(degrees: np.ndarray, value_a: float, value_b: float) -> dict:
    return {
        "degree_min": float(degrees.min()),
        "degree_max": float(degrees.max()),
        "degree_mean": float(degrees.mean()),
        "examples": int(len(degrees)),
        "a": value_a,
        "b": value_b,
        "difference": value_a - value_b,
    }


def plot_difference(
    rows: Sequence[dict],
    path: str | os.PathLike,
    *,
    labels: tuple[str, str] = ("A", "B"),
    metric: str = "score",
    outputs: Outputs = UNCHECKED,
) -> None:
    """Difference A - B against the mean degree of each bin, one point per bin, with a zero line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise DataError("nothing to plot: no example has both a degree and scores")
    x = [r["degree_mean"] for r in rows]
    y = [r["difference"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.0, 3.8), dpi=150)
    ax.axhline(0.0, color="0.6", linewidth=0.8)
    ax.plot(x, y, marker="o", color="tab:blue")
    ax.margins(x=0.06, y=0.15)  # room for the n= labels
    for xi, yi, r in zip(x, y, rows):
        ax.annotate(
            f"n={r['examples']}",
            (xi, yi),
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
            fontsize=6,
            color="0.35",
        )
    ax.set_xlabel("compositional degree (bin mean)")
    ax.set_ylabel(f"{metric}: {labels[0]} − {labels[1]}")
    ax.set_title(f"{labels[0]} vs {labels[1]} by compositional degree")
    fig.tight_layout()
    try:
        outputs.savefig(fig, path)
    finally:
        plt.close(fig)
