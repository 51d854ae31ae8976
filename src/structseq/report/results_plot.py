"""The learning-curve plot of `structseq report results --curve ... --plot FILE`: one panel per dataset, one line
per (config, seed), the paper's mean dotted where it reports one (matplotlib, imported only here)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from .records import save_figure
from .results_paper import PAPER, PAPER_BLEU, curve_scale, paper_key, paper_split


def plot_curves(points: dict, metric: str, plot: str) -> None:
    """`points`: {(config with overrides, split): {seed: {update: score}}}, as `results.curve` collects them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scale = curve_scale(metric)
    datasets = sorted({Path(c.split(" ")[0]).parent.name for c, _ in points})  # one panel per dataset
    fig, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 4), squeeze=False)
    common = set.intersection(*(set(c.split(" ")[1:]) for c, _ in points)) if points else set()  # in the title
    with_paper = set()
    for i, ((config, split), per_seed) in enumerate(sorted(points.items())):
        path, *overrides = config.split(" ")
        overrides = [o for o in overrides if o not in common]
        ds, stem = paper_key(path)
        ax, color = axes[0][datasets.index(ds)], f"C{i}"
        for j, s in enumerate(sorted(per_seed)):
            ks = sorted(per_seed[s])
            ax.plot(
                ks,
                [per_seed[s][k] for k in ks],
                marker="o",
                color=color,
                alpha=0.9,
                linestyle="-" if j == 0 else "--",
                label=f"{Path(path).stem}{''.join(' ' + o for o in overrides)} ({split}), seed {s}",
            )
        paper = PAPER_BLEU if metric.startswith("pooled_bleu") else PAPER
        m = re.match(r"([\d.]+)", paper.get((ds, stem), "") if split == paper_split(ds) else "")
        if m:
            ax.axhline(float(m.group(1)), color=color, linestyle=":", linewidth=1)
            with_paper.add(ds)
    for ds, ax in zip(datasets, axes[0]):
        ax.set_xlabel("updates")
        ax.set_ylabel(f"test {metric.replace('_', ' ')}")
        ax.set_ylim(-0.02 * scale, 1.02 * scale if metric == "exact_match" else None)
        note = " (dotted: paper's mean)" if ds in with_paper else ""
        shared = "\n" + textwrap.fill(" ".join(sorted(common)), 80) if common else ""  # long run paths wrap
        ax.set_title(f"{ds}: learning curves{note}{shared}", fontsize=10)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    save_figure(fig, plot)
    plt.close(fig)
