"""`structseq plot RUN... -o FILE.png`: training and validation curves from each run's metrics.jsonl.

One panel per metric (`--metric`, repeatable; default: the loss, training and validation together, and each
run's `train.valid_metric`). Several runs are overlaid; runs whose configs differ only in `train.seed` are drawn
as one curve, the mean over the seeds at each update they all logged, with a band of ± one standard deviation.
The figure is written atomically (a temporary file renamed into place) as PNG, PDF or SVG by the file's
suffix; an existing file is refused unless `--overwrite`.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import typer

from structseq.errors import StructseqError
from structseq.textio import iter_lines

FORMATS = (".png", ".pdf", ".svg")
#: a name's trailing seed marker, removed to label a group of seeds: run-s1, run_seed2, run3
SEED_SUFFIX = re.compile(r"[-_.]?(seed|s)?\d+$")


@dataclass
class RunCurves:
    """A run directory's metrics.jsonl records and its config (None when config.yaml cannot be read)."""

    path: Path
    records: list[dict]
    config: dict | None

    @property
    def keys(self) -> set[str]:
        return {k for r in self.records for k, v in r.items() if k != "step" and _is_number(v)}


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def read_run(run_dir: str | Path) -> RunCurves:
    """A run's records (a line that is not a JSON object with a step is an error naming file and line)."""
    from structseq.run.layout import metrics_file
    from structseq.run.saved_config import read_run_config

    run_dir = Path(run_dir)
    path = metrics_file(run_dir)
    if not path.is_file():
        raise StructseqError(f"{run_dir}: no metrics.jsonl (is this a training run directory?)")
    records = []
    for i, line in iter_lines(path):  # not UTF-8: an error naming the file and line
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            rec = None
        if not isinstance(rec, dict) or not _is_number(rec.get("step")):
            raise StructseqError(f"{path}:{i}: not a metrics record (a JSON object with a step)")
        records.append(rec)
    try:
        config = read_run_config(run_dir)
    except StructseqError:
        config = None
    return RunCurves(run_dir, records, config)


def seedless(config: dict | None) -> str | None:
    """A run's config without `train.seed`, as canonical JSON: runs with the same one are seeds of one setup.
    The config is first completed with today's defaults (as a run's saved config is read), so that runs
    written before a key existed still match the runs written after."""
    from structseq.config import config_from_dict

    if config is None:
        return None
    try:
        config = config_from_dict(config, saved=True).to_dict()
    except Exception:  # noqa: BLE001 - a config this version cannot read is compared as written
        pass
    config = {k: dict(v) if isinstance(v, dict) else v for k, v in config.items()}
    if isinstance(config.get("train"), dict):
        config["train"].pop("seed", None)
    return json.dumps(config, sort_keys=True, default=str)


def group_runs(runs: Sequence[RunCurves]) -> list[list[RunCurves]]:
    """Runs grouped by `seedless` config, in the order of their first run (a run without a config alone)."""
    groups: dict[object, list[RunCurves]] = {}
    for i, run in enumerate(runs):
        key = seedless(run.config)
        groups.setdefault(key if key is not None else ("alone", i), []).append(run)
    return list(groups.values())


def group_label(group: Sequence[RunCurves], names_seen: dict[str, int]) -> str:
    """A run's directory name (its path when two runs share a name); for seeds, their shared name and count."""

    def name(run: RunCurves) -> str:
        return run.path.name if names_seen.get(run.path.name, 0) < 2 else str(run.path)

    if len(group) == 1:
        return name(group[0])
    stems = {SEED_SUFFIX.sub("", name(r)) or name(r) for r in group}
    label = (
        stems.pop()
        if len(stems) == 1
        else (os.path.commonprefix([name(r) for r in group]).rstrip("-_.") or name(group[0]))
    )
    return f"{label} (mean ± sd, {len(group)} seeds)"


def series(run: RunCurves, key: str) -> dict[int, float]:
    """{step: value} of `key` in a run's records (a step logged twice keeps its last value)."""
    return {int(r["step"]): float(r[key]) for r in run.records if _is_number(r.get(key))}


def band(group: Sequence[RunCurves], key: str) -> tuple[list[int], list[float], list[float]]:
    """(steps, mean, sd) of `key` over the runs of a group, at the steps every run logged it (sd 0 for one
    run; otherwise the sample standard deviation)."""
    per_run = [series(r, key) for r in group]
    steps = sorted(set.intersection(*(set(s) for s in per_run))) if per_run else []
    mean, sd = [], []
    for step in steps:
        values = [s[step] for s in per_run]
        m = sum(values) / len(values)
        mean.append(m)
        sd.append(math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0)
    return steps, mean, sd


def panels(metrics: Sequence[str], runs: Sequence[RunCurves]) -> list[tuple[str, list[str]]]:
    """(title, record keys) of each panel. `loss` shows the training and the validation loss; any other name
    is a record key (`lr`, `grad_norm`, `valid_bleu`) or a validated metric (`bleu` for `valid_bleu`). The
    default: the loss and each run's `train.valid_metric`."""
    available = set().union(*(r.keys for r in runs))
    if not metrics:
        valid = [((r.config or {}).get("train") or {}).get("valid_metric", "loss") for r in runs]
        metrics = ["loss", *[m for m in dict.fromkeys(valid) if m != "loss" and f"valid_{m}" in available]]
    out = []
    for name in dict.fromkeys(metrics):
        if name == "loss":
            keys = [k for k in ("loss", "valid_loss") if k in available]
        elif name in available:
            keys = [name]
        elif f"valid_{name}" in available:
            keys = [f"valid_{name}"]
        else:
            keys = []
        if not keys:
            raise StructseqError(
                f"--metric {name}: no run logged it; their metrics: {', '.join(sorted(available)) or 'none'}"
            )
        out.append(("loss" if name == "loss" else key_label(keys[0]).replace("_", " "), keys))
    return out


def value_range(key: str) -> tuple[float, float]:
    """Where a logged value can lie, so a ± sd band never leaves it: a registered metric's scale (BLEU 0-100,
    a fraction 0-1); anything else (a loss, a learning rate) is at least 0."""
    from structseq.metrics.significance import RANGES
    from structseq.registry import METRICS

    name = key.removeprefix("valid_")
    if name in METRICS:
        return RANGES.get(METRICS.get(name).scale, (0.0, float("inf")))
    return 0.0, float("inf")


def key_label(key: str) -> str:
    return f"valid {key.removeprefix('valid_')}" if key.startswith("valid_") else f"train {key}"


def draw(runs: Sequence[RunCurves], metrics: Sequence[str], title: str | None = None):
    """The figure: one panel per metric, one colour per group of runs (solid: training, dashed: validation;
    bands: ± one standard deviation over seeds)."""
    from matplotlib.figure import Figure

    layout = panels(metrics, runs)
    groups = group_runs(runs)
    names_seen: dict[str, int] = {}
    for r in runs:
        names_seen[r.path.name] = names_seen.get(r.path.name, 0) + 1
    cols = len(layout) if len(layout) <= 3 else 2  # four panels and more: a grid, not one long row
    rows = -(-len(layout) // cols)
    fig = Figure(figsize=(5.5 * cols, 4.2 * rows), dpi=110, layout="constrained")
    axes = list(fig.subplots(rows, cols, squeeze=False).flat)
    for ax in axes[len(layout) :]:
        ax.set_visible(False)
    for ax, (panel_title, keys) in zip(axes, layout):
        for gi, group in enumerate(groups):
            colour, label = f"C{gi % 10}", group_label(group, names_seen)
            for key in keys:
                steps, mean, sd = band(group, key)
                if not steps:
                    continue
                style = "--" if key.startswith("valid_") else "-"
                marker = "o" if key.startswith("valid_") and len(steps) <= 30 else None
                ax.plot(
                    steps,
                    mean,
                    style,
                    color=colour,
                    marker=marker,
                    markersize=3,
                    label=f"{label}: {key_label(key)}" if len(keys) > 1 else label,
                )
                if len(group) > 1:
                    low, high = value_range(key)
                    ax.fill_between(
                        steps,
                        [max(low, m - s) for m, s in zip(mean, sd)],
                        [min(high, m + s) for m, s in zip(mean, sd)],
                        color=colour,
                        alpha=0.2,
                        linewidth=0,
                    )
        ax.set_xlabel("update")
        ax.set_ylabel(panel_title)
        ax.set_title(panel_title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    return fig


def save_figure(fig, out: str | Path, overwrite: bool = False) -> Path:
    """Write the figure atomically in the format of the suffix (png, pdf, svg); an existing `out` is refused
    unless `overwrite` (and never silently replaced by a concurrent writer: the rename does not clobber)."""
    out = Path(out)
    if out.suffix.lower() not in FORMATS:
        raise StructseqError(f"{out}: the figure's format comes from its suffix: one of {', '.join(FORMATS)}")
    if out.is_dir():
        raise StructseqError(f"{out}: is a directory, expected a figure file")
    if out.exists() and not overwrite:
        raise StructseqError(f"{out} exists; pass --overwrite to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=out.suffix, dir=out.parent)
    os.close(fd)
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)  # as open() would create it (mkstemp's files are private)
    try:
        fig.savefig(tmp, format=out.suffix.lower()[1:])
        if overwrite:
            os.replace(tmp, out)
        else:
            try:
                os.link(tmp, out)  # fails when `out` appeared meanwhile
            except FileExistsError:
                raise StructseqError(f"{out} exists; pass --overwrite to replace it") from None
            except OSError:  # no hard links here: a rename that may replace
                os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def plot(
    runs: list[Path] = typer.Argument(..., help="run directories (each with its metrics.jsonl)"),
    out: Path = typer.Option(..., "--out", "-o", help="the figure: FILE.png, FILE.pdf or FILE.svg"),
    metric: list[str] = typer.Option(
        [],
        "--metric",
        "-m",
        help="a panel (repeatable): loss (training and "
        "validation), a validated metric (bleu, exact_match, accuracy) or any "
        "record key (lr, grad_norm, tokens_per_s) [default: loss and each run's "
        "train.valid_metric]",
    ),
    title: Optional[str] = typer.Option(None, "--title", help="a title above the panels"),
    overwrite: bool = typer.Option(False, "--overwrite", help="replace an existing FILE"),
):
    """Draw the training and validation curves of one or more runs from their metrics.jsonl. Runs whose
    configs differ only in train.seed are drawn as their mean with a band of ± one standard deviation."""
    curves = [read_run(r) for r in runs]
    fig = draw(curves, metric, title)
    path = save_figure(fig, out, overwrite)
    typer.echo(f"wrote {path}")
