"""The systems `structseq compare` reads: predictions TSVs of `structseq evaluate` and their metrics JSONs, from
files or run directories (evaluated first where missing), with the settings each evaluation states."""

from __future__ import annotations

import csv
import glob
import json
import math
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from structseq.errors import StructseqError
from structseq.run.layout import config_file, prediction_files
from structseq.textio import read_text


@dataclass
class Output:
    """One system's predictions on one split (one seed): the TSV's rows and the metrics JSON beside it."""

    system: str  # "A" or "B"
    path: Path
    sources: list[str]
    references: list[str]
    hypotheses: list[str]
    kind: str  # the task that wrote it (`compared_metrics` reads its registered metrics)
    report: dict = field(default_factory=dict)
    seed: int | None = None

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metrics recomputed from these predictions (`compared_metrics` of the task)."""
        return compared_metrics(self.kind)

    @property
    def settings(self) -> dict | None:
        """What produced the predictions (`evaluation.legacy_settings`: checkpoint, decode settings, limit)."""
        from structseq.evaluation import legacy_settings

        return legacy_settings(self.report)

    @property
    def label(self) -> str:
        return f"{self.system}: {self.path}"

    @property
    def ident(self) -> int | str:
        """The seed, or the file's name when its report states none."""
        return self.seed if self.seed is not None else self.path.name


# ---------------------------------------------------------------- reading systems
def read_predictions(path: Path, system: str) -> Output:
    """A predictions TSV (`source`, `reference`, `hypothesis` columns, as `evaluate` writes them) and its
    `LABEL.metrics.json` when present."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\"))
    if not rows:
        raise StructseqError(f"{path}: an empty predictions file")
    header = rows[0]
    missing = [c for c in ("source", "reference", "hypothesis") if c not in header]
    if missing:
        raise StructseqError(
            f"{path}: not a predictions file of `structseq evaluate` (no column "
            f"{', '.join(missing)}; its header: {' '.join(header)})"
        )
    col = {name: header.index(name) for name in ("source", "reference", "hypothesis")}
    for n, row in enumerate(rows[1:], 2):
        if len(row) != len(header):
            raise StructseqError(f"{path}:{n}: {len(row)} columns but the header names {len(header)}")
    report_path = path.with_name(path.name[: -len(".tsv")] + ".metrics.json") if path.name.endswith(".tsv") else None
    report = _report(report_path) if report_path and report_path.is_file() else {}
    kind = task_kind(report.get("task")) or ("supertag" if "correct_words" in header else "seq2seq")
    return Output(
        system,
        path,
        [r[col["source"]] for r in rows[1:]],
        [r[col["reference"]] for r in rows[1:]],
        [r[col["hypothesis"]] for r in rows[1:]],
        kind,
        report,
        report.get("seed"),
    )


def task_kind(task: str | None) -> str | None:
    """The task a run's metrics JSON names, when it is registered; None otherwise, or for a file without a report
    (then its columns decide)."""
    if not task:
        return None
    from structseq.registry import TASKS

    return task if task in TASKS else None


def compared_metrics(task: str) -> tuple[str, ...]:
    """What `compare` recomputes from a task's predictions, with a paired test: the task's registered metrics
    (`Task.metrics`, the registry's) that have one (per-example ratios, `significance.RATIO_METRICS`, or BLEU
    through sacrebleu), in the task's order."""
    from structseq.metrics.significance import RATIO_METRICS
    from structseq.registry import TASKS

    return tuple(m for m in TASKS.get(task).metrics if m == "bleu" or m in RATIO_METRICS)


def _report(path: Path) -> dict:
    """A metrics JSON (an object), every problem an error naming the file."""
    try:
        report = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise StructseqError(f"{path}: not valid JSON ({e.msg}, line {e.lineno}, column {e.colno})") from None
    if not isinstance(report, dict):
        raise StructseqError(f"{path}: not a metrics report (a JSON {type(report).__name__}, not an object)")
    return report


def report_score(o: Output, metric: str) -> float:
    """The score of `metric` in an output's metrics JSON; one that is not a finite number (NaN, null) is an
    error naming the file and the metric, never a NaN mean or delta."""
    score = o.report[metric]["score"]
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
        raise StructseqError(
            f"{o.path.with_name(o.path.name[: -len('.tsv')] + '.metrics.json')}: {metric}'s score is "
            f"{json.dumps(score)}, not a finite number; compare cannot rank it (evaluate again to rewrite it)"
        )
    return float(score)


def expand(spec: str) -> list[Path]:
    """A system spec: comma-separated runs or predictions files, each maybe a glob (quoted, so the shell leaves
    it). Runs by the one rule of every command that takes runs (`run.layout.run_folders`: a glob's run folders,
    so train-many's NAME.log and many.json beside `runs/many/x-seed*` are skipped, never read as predictions); a
    glob takes the predictions TSVs it matches besides."""
    from structseq.run.layout import RunDirError, run_folders

    out: list[Path] = []
    for part in (p for p in spec.split(",") if p):
        pattern = glob.has_magic(part) and not Path(part).exists()
        tables = [Path(m) for m in glob.glob(part) if m.endswith(".tsv") and Path(m).is_file()] if pattern else []
        try:
            runs = run_folders([part])
        except RunDirError:
            if not tables:
                raise
            runs = []
        missing = [r for r in runs if not r.exists()]
        if missing:
            raise StructseqError(f"{missing[0]}: no such run directory or predictions file")
        out += sorted(tables + runs)
    if not out:
        raise StructseqError(f"{spec!r}: names no run or predictions file")
    return out


def predictions_path(run_dir: Path, split: str, request: dict | None = None) -> Path:
    """Where `structseq evaluate RUN --split SPLIT` with the `request`ed settings (`checkpoint`, `beam`,
    `limit`; none: the run's own) writes its predictions (`structseq.evaluation`): the requested checkpoint
    resolved as loading resolves it, so both name an evaluation alike."""
    from structseq.config import config_from_dict
    from structseq.data.registry import dataset_split
    from structseq.evaluation import evaluation_suffix, prediction_label
    from structseq.run.checkpoint import resolve_checkpoint
    from structseq.run.saved_config import read_run_config

    request = request or {}
    cfg = config_from_dict(read_run_config(run_dir), saved=True)
    try:
        own = resolve_checkpoint(run_dir, cfg.train.eval_checkpoint)[0]
    except StructseqError:  # no checkpoint: the error says how to evaluate, which says that
        own = cfg.train.eval_checkpoint
    decode = {k: v for k, v in asdict(cfg.decode).items() if k != "batch_size"}
    defaults = {"checkpoint": own, "decode": decode, "bleu_tokenize": cfg.data.bleu_tokenize}
    # the checkpoint as loading resolves it (best falls back to last), so the name is the one evaluate gives; a
    # checkpoint the run lacks is said first (how to make an average), never "no predictions"
    asked = resolve_checkpoint(run_dir, request["checkpoint"])[0] if request.get("checkpoint") else own
    wanted = {
        "checkpoint": asked,
        "decode": {**decode, **({"beam": request["beam"]} if request.get("beam") else {})},
        "limit": request.get("limit"),
    }
    dataset, name = dataset_split(split) or ("", split)
    return prediction_files(run_dir, f"{prediction_label(split, dataset, name)}{evaluation_suffix(wanted, defaults)}")[
        0
    ]


def _run_predictions(run_dir: Path, split: str | None, evaluate: bool, data_root, request: dict) -> Path:
    if split is None:
        raise StructseqError(f"{run_dir}: a run directory needs --split (which of its evaluations to compare)")
    path = predictions_path(run_dir, split, request)
    if path.is_file():
        return path
    flags = "".join(f" --{k} {v}" for k, v in request.items() if v)
    how = f"structseq evaluate {run_dir} --split {split}{flags}"
    if not evaluate:
        raise StructseqError(
            f"{run_dir}: no predictions for split {split!r} ({path} is missing); make them with "
            f"`{how}`, or let compare run it (without --no-evaluate)"
        )
    from structseq import api

    print(f"{run_dir}: no predictions for {split!r}; running `{how}`", file=sys.stderr, flush=True)
    run = api.load_run(run_dir, request.get("checkpoint"))
    m = run.evaluate(split, data_root=data_root, beam=request.get("beam"), limit=request.get("limit"))
    return Path(m["predictions"])


def load_system(
    spec: str, system: str, split: str | None = None, *, evaluate: bool = True, data_root=None, request=None
) -> list[Output]:
    """Every output (seed) of one side, sorted by seed; runs without predictions for `split` (with the
    `request`ed checkpoint, beam, limit; default: each run's own) are evaluated first (unless `evaluate` is
    False: then the error says how to make them)."""
    outputs = []
    for path in expand(spec):
        if path.is_dir():
            if not config_file(path).is_file():
                raise StructseqError(f"{path}: not a run directory (no config.yaml) nor a predictions file")
            path = _run_predictions(path, split, evaluate, data_root, request or {})
        outputs.append(read_predictions(path, system))
    if all(o.seed is not None for o in outputs):
        outputs.sort(key=lambda o: o.seed)
        seeds = [o.seed for o in outputs]
        if len(set(seeds)) != len(seeds):
            twice = sorted(s for s, c in Counter(seeds).items() if c > 1)
            raise StructseqError(f"system {system} ({spec}): seed {twice[0]} appears twice; give each run once")
    return outputs


def _comparable(settings: dict | None, decode_keys) -> tuple:
    """The part of an evaluation's settings that must agree across the seeds of one side."""
    s = settings or {}
    decode = s.get("decode") or {}
    return (
        s.get("checkpoint"),
        tuple((k, json.dumps(decode.get(k), sort_keys=True)) for k in sorted(decode_keys)),  # values may be dicts
        s.get("limit"),
        json.dumps(s.get("sampling"), sort_keys=True),
    )


def check_settings(outputs: list[Output], name: str, allow_mixed: bool) -> list[str]:
    """Each output's settings in one line; a StructseqError when the outputs of one side were evaluated
    with different settings (checkpoint, decode settings, limit, sampling), unless `allow_mixed`."""
    from structseq.evaluation import describe

    keys = set.intersection(*(set((o.settings or {}).get("decode") or {}) for o in outputs))
    lines = [f"{o.label}: {describe(o.settings)}" for o in outputs]
    values = [_comparable(o.settings, keys) for o in outputs]
    if len(set(values)) > 1 and not allow_mixed:
        part = next(i for i in range(len(values[0])) if len({v[i] for v in values}) > 1)
        what = ("checkpoint", "decode settings", "limit", "sampling")[part]
        if part == 1:  # only the decode settings that differ
            differ = {k for k in keys if len({dict(v[1])[k] for v in values}) > 1}
            values = [(v[0], tuple(kv for kv in v[1] if kv[0] in differ), *v[2:]) for v in values]
        seen = {}  # each differing value once, with the first file that has it
        for o, v in zip(outputs, values):
            seen.setdefault(_shown(v[part], part), o.path)
        raise StructseqError(
            f"system {name} mixes evaluations made with different settings ({what}: "
            + ", ".join(f"{v} in {p}" for v, p in seen.items())
            + "); evaluate every run alike (compare --checkpoint/--beam/--limit choose which), or pass --allow-mixed"
        )
    return lines


def _shown(value, part: int) -> str:
    """One part of `_comparable` as a person reads it: `beam 2, len_penalty 1.0` for decode settings."""
    if part == 1:
        return ", ".join(f"{k} {v}" for k, v in value)
    return "none" if value is None else str(value)


def check_same_examples(outputs: list[Output]) -> None:
    """Every output is of the same examples (sources and references, in order) and of one kind of task."""
    first = outputs[0]
    for o in outputs[1:]:
        if o.metrics != first.metrics:
            raise StructseqError(f"{first.label} is {first.kind} output but {o.label} is {o.kind} output")
        if len(o.references) != len(first.references):
            raise StructseqError(
                f"{first.label} has {len(first.references)} examples but {o.label} has "
                f"{len(o.references)}: compare predictions of the same split"
            )
        for i, (a, b) in enumerate(zip(zip(first.sources, first.references), zip(o.sources, o.references))):
            if a != b:
                k = 0 if a[0] != b[0] else 1
                raise StructseqError(
                    f"{first.label} and {o.label} differ at example {i + 1} "
                    f"({('source', 'reference')[k]} {a[k]!r} vs {b[k]!r}): compare predictions "
                    "of the same split"
                )
