"""Looking at a lexicon: a source x target heatmap (like the paper's Figures 3-6) and a text table."""

from __future__ import annotations

import io
import logging
import os
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from structseq.errors import ConfigError
from structseq.lexicon.lexicon import Lexicon
from structseq.outputs import UNCHECKED, Outputs

#: Fonts tried for CJK labels (Tatoeba en-zh); the default font is used when none is installed.
CJK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Sans SC",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "SimHei",
    "AR PL UMing CN",
    "Droid Sans Fallback",
)


def select_rows(lexicon: Lexicon, max_sources: int | None) -> list[str]:
    """The sources to show: all of them, or the `max_sources` with the highest best score (ties by name)."""
    sources = lexicon.sources()
    if max_sources is None or len(sources) <= max_sources:
        return sources
    ranked = sorted(sources, key=lambda s: (-max(lexicon[s].values()), s))[:max_sources]
    return sorted(ranked)


def lexicon_matrix(
    lexicon: Lexicon,
    sources: list[str] | None = None,
    targets: list[str] | None = None,
    tau: float | None = None,
    max_targets: int | None = None,
) -> tuple[list[str], list[str], np.ndarray]:
    """(sources, targets, matrix). Raw scores with NaN where there is no entry, or, with `tau`, each row's
    softmax(score / tau) over its entries (0 elsewhere), which is what a soft lexicon layer would use.
    Without explicit `targets`, columns are the rows' best targets first, then the rest by score, at most
    `max_targets` of them (the softmax still runs over each row's full entries)."""
    if tau is not None and tau <= 0:
        raise ConfigError(f"tau must be > 0 (or None for raw scores), not {tau}")
    sources = lexicon.sources() if sources is None else list(sources)
    if targets is None:
        # Columns in the order of the first row that prefers them, so one-to-one lexicons show a diagonal.
        best = list(dict.fromkeys(next(iter(lexicon[s])) for s in sources if lexicon.get(s)))
        rest = sorted(
            ((v, t) for s in sources for t, v in lexicon.get(s, {}).items() if t not in best), key=lambda vt: -vt[0]
        )
        targets = (best + list(dict.fromkeys(t for _, t in rest)))[:max_targets]
    col = {t: i for i, t in enumerate(targets)}
    mat = np.full((len(sources), len(targets)), np.nan)
    for r, s in enumerate(sources):
        row = lexicon.get(s, {})
        if tau is not None and row:
            scores = np.array(list(row.values())) / tau
            probs = np.exp(scores - scores.max())
            row = dict(zip(row, (probs / probs.sum()).tolist()))
        for t, v in row.items():
            if t in col:
                mat[r, col[t]] = v
    if tau is not None:
        mat = np.nan_to_num(mat, nan=0.0)
    return sources, targets, mat


def _cjk_font() -> str | None:
    from matplotlib import font_manager

    for name in CJK_FONTS:
        try:
            font_manager.findfont(font_manager.FontProperties(family=name), fallback_to_default=False)
            return name
        except ValueError:
            continue
    return None


@contextmanager
def _quiet_font_manager():
    """CJK fonts often lack a "normal" weight; matplotlib logs every fallback, which is noise here."""
    log = logging.getLogger("matplotlib.font_manager")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def plot_lexicon(
    lexicon: Lexicon,
    path: str | os.PathLike,
    *,
    sources: list[str] | None = None,
    targets: list[str] | None = None,
    tau: float | None = None,
    max_sources: int | None = 40,
    max_targets: int | None = 60,
    title: str | None = None,
    annotate: bool | None = None,
    outputs: Outputs = UNCHECKED,
) -> Path:
    """Save a source (rows) x target (columns) heatmap; the format follows the file extension (png, pdf, svg).
    Written atomically; `outputs` (the command's) refuses an input or a file the toolkit did not write."""
    outputs.check(path)
    with _quiet_font_manager():
        return _plot(lexicon, Path(path), sources, targets, tau, max_sources, max_targets, title, annotate, outputs)


def _plot(lexicon, path, sources, targets, tau, max_sources, max_targets, title, annotate, outputs) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    if sources is None:
        sources = select_rows(lexicon, max_sources)
    sources, targets, mat = lexicon_matrix(lexicon, sources, targets, tau, max_targets)
    if not sources or not targets:
        raise ConfigError("nothing to plot: the lexicon has no entries for the selected sources")
    rows, cols = mat.shape
    fig = Figure(figsize=(min(2.0 + 0.45 * cols, 40.0), min(1.5 + 0.35 * rows, 40.0)), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    shown = np.ma.masked_invalid(mat)
    im = ax.imshow(
        shown,
        cmap="Blues",
        aspect="auto",
        interpolation="nearest",
        vmin=0.0 if tau is not None else None,
        vmax=1.0 if tau is not None else None,
    )
    fig.colorbar(im, ax=ax, label=f"softmax(score / {tau})" if tau is not None else "score")
    font = _cjk_font()
    label_kw = {"fontfamily": [font, "DejaVu Sans"]} if font else {}
    ax.set_xticks(range(cols), targets, rotation=90, fontsize=8, **label_kw)
    ax.set_yticks(range(rows), sources, fontsize=8, **label_kw)
    ax.set_xlabel("target token")
    ax.set_ylabel("source token")
    ax.set_title(
        title
        or f"{lexicon.method} lexicon ({lexicon.num_entries} entries"
        + (f", {rows} of {len(lexicon)} sources" if rows < len(lexicon) else "")
        + ")"
    )
    if annotate if annotate is not None else rows * cols <= 400:
        peak = np.nanmax(mat) if np.isfinite(mat).any() else 1.0
        for r in range(rows):
            for c in range(cols):
                v = mat[r, c]
                if np.isfinite(v) and (tau is None or v >= 0.005):
                    ax.text(
                        c,
                        r,
                        _num(v) if tau is None else f"{v:.2f}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if v > 0.6 * peak else "black",
                    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from")
        outputs.savefig(fig, path, dpi=150)
    return path


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else f"{v:.3g}"


def format_table(
    lexicon: Lexicon, *, top: int = 3, limit: int | None = None, plain: bool = False, width: int = 100
) -> str:
    """One row per source with its `top` targets. `plain=True` gives `source<TAB>target<TAB>score` lines
    (every entry, for scripts); otherwise a rich table."""
    sources = lexicon.sources()[:limit] if limit is not None else lexicon.sources()
    if plain:
        return "".join(f"{s}\t{t}\t{v:g}\n" for s in sources for t, v in lexicon[s].items())
    from rich.console import Console
    from rich.table import Table

    settings = ", ".join(f"{k}={v}" for k, v in lexicon.settings.items())
    table = Table(
        title=f"{lexicon.method} lexicon: {len(lexicon)} sources, {lexicon.num_entries} entries",
        caption=settings or None,
    )
    table.add_column("source", style="bold")
    for k in range(max(1, top)):
        table.add_column(f"target {k + 1}" if top > 1 else "target")
    for s in sources:
        row = list(lexicon[s].items())
        cells = [f"{t} ({_num(v)})" for t, v in row[:top]]
        if len(row) > top:
            cells[-1] += f" +{len(row) - top}"
        table.add_row(s, *cells, *[""] * (max(1, top) - len(cells)))
    if limit is not None and limit < len(lexicon):
        table.add_row(f"... {len(lexicon) - limit} more", *[""] * max(1, top))
    out = io.StringIO()
    Console(file=out, width=width, force_terminal=False, color_system=None).print(table)
    return out.getvalue()
