"""`structseq compare A B --split S`: two systems on the same examples, each one run, several runs (seeds) or
prediction files, read from the predictions TSV that `structseq evaluate` writes (RUN/predictions/LABEL.tsv,
`api.prediction_label`) and the metrics JSON beside it.

Per metric: mean ± sd and a t confidence interval over each side's seeds (`metrics.significance.seed_summary`),
and a paired test between the sides on the same examples: exact match, token accuracy and supertag accuracy
by resampling examples (paired bootstrap, or approximate randomisation), BLEU through sacrebleu's own paired
test. With several seeds a side, the test runs on each seed pair (`pairing: seeds`; by seed number when both
sides have the same seeds, else in seed order) or once on the per-example pool (`pairing: pooled`: the
per-example statistics averaged over seeds; for BLEU the output most seeds agree on). The report says which.
Rendering (Markdown, LaTeX, JSON) is in `structseq.compare_render`.
"""

from __future__ import annotations

import csv
import glob
import json
import sys
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from structseq.errors import StructseqError
from structseq.metrics import significance as sig

PAIRINGS = ("seeds", "pooled")
#: the metrics computed from a predictions TSV, by the kind of task that wrote it
KIND_METRICS = {"seq2seq": ("exact_match", "token_accuracy", "bleu"), "supertag": ("accuracy", "sentence_accuracy")}
SUPERTAG_SIGNATURE = "{name}|acc:whole-category|from:predictions|scale:fraction"


@dataclass
class Output:
    """One system's predictions on one split (one seed): the TSV's rows and the metrics JSON beside it."""

    system: str  # "A" or "B"
    path: Path
    sources: list[str]
    references: list[str]
    hypotheses: list[str]
    kind: str  # a key of KIND_METRICS
    report: dict = field(default_factory=dict)
    seed: int | None = None

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
    report = json.loads(report_path.read_text(encoding="utf-8")) if report_path and report_path.is_file() else {}
    kind = "supertag" if "correct_words" in header or report.get("task") == "supertag" else "seq2seq"
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


def expand(spec: str) -> list[Path]:
    """A system spec: comma-separated runs or files, each maybe a glob (quoted, so the shell leaves it)."""
    out: list[Path] = []
    for part in (p for p in spec.split(",") if p):
        matches = sorted(glob.glob(part)) if glob.has_magic(part) else [part]
        if not matches or not Path(matches[0]).exists():
            raise StructseqError(f"{part}: no such run directory or predictions file")
        out += [Path(m) for m in matches]
    if not out:
        raise StructseqError(f"{spec!r}: names no run or predictions file")
    return out


def predictions_path(run_dir: Path, split: str, request: dict | None = None) -> Path:
    """Where `structseq evaluate RUN --split SPLIT` with the `request`ed settings (`checkpoint`, `beam`,
    `limit`; none: the run's own) writes its predictions (`structseq.evaluation`)."""
    from structseq.config import config_from_dict
    from structseq.data.registry import dataset_split
    from structseq.evaluation import evaluation_suffix, prediction_label
    from structseq.train.checkpoint import resolve_checkpoint
    from structseq.train.rundir import read_run_config

    request = request or {}
    cfg = config_from_dict(read_run_config(run_dir), saved=True)
    try:
        own = resolve_checkpoint(run_dir, cfg.train.eval_checkpoint)[0]
    except StructseqError:  # no checkpoint: the error says how to evaluate, which says that
        own = cfg.train.eval_checkpoint
    decode = {k: v for k, v in asdict(cfg.decode).items() if k != "batch_size"}
    defaults = {"checkpoint": own, "decode": decode, "bleu_tokenize": cfg.data.bleu_tokenize}
    wanted = {
        "checkpoint": request.get("checkpoint") or own,
        "decode": {**decode, **({"beam": request["beam"]} if request.get("beam") else {})},
        "limit": request.get("limit"),
    }
    dataset, name = dataset_split(split) or ("", split)
    return (
        run_dir / "predictions" / f"{prediction_label(split, dataset, name)}{evaluation_suffix(wanted, defaults)}.tsv"
    )


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
            if not (path / "config.yaml").is_file():
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
        tuple((k, decode.get(k)) for k in sorted(decode_keys)),
        s.get("limit"),
        json.dumps(s.get("sampling"), sort_keys=True),
    )


def check_settings(outputs: list[Output], name: str, allow_mixed: bool) -> list[str]:
    """Each output's settings in one line; a StructseqError when the outputs of one side were evaluated
    with different settings (checkpoint, decode settings, limit, sampling), unless `allow_mixed`."""
    from structseq.evaluation import describe

    keys = set.intersection(*(set((o.settings or {}).get("decode") or {}) for o in outputs))
    lines = [f"{o.label}: {describe(o.settings)}" for o in outputs]
    if len({_comparable(o.settings, keys) for o in outputs}) > 1 and not allow_mixed:
        raise StructseqError(
            f"system {name} mixes evaluations made with different settings; evaluate every run alike (compare "
            "--checkpoint/--beam/--limit choose which), or pass --allow-mixed:\n  " + "\n  ".join(lines)
        )
    return lines


def check_same_examples(outputs: list[Output]) -> None:
    """Every output is of the same examples (sources and references, in order) and of one kind of task."""
    first = outputs[0]
    for o in outputs[1:]:
        if o.kind != first.kind:
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


# ---------------------------------------------------------------- the comparison
def bleu_tokenizer(outputs: list[Output], given: str | None) -> str:
    """`given`, else the tokenizer the metrics JSONs' BLEU signatures state (one for all), else 13a."""
    if given:
        return given
    stated = {
        part[4:]
        for o in outputs
        for part in o.report.get("bleu", {}).get("signature", "").split("|")
        if part.startswith("tok:")
    }
    if len(stated) > 1:
        raise StructseqError(
            f"the evaluations scored BLEU with different tokenizers ({', '.join(sorted(stated))}); "
            "choose one with --bleu-tokenize"
        )
    return stated.pop() if stated else "13a"


def metric_scores(o: Output, tokenize: str) -> dict[str, dict]:
    """{metric: {score, signature}} of one output, computed from its predictions."""
    from structseq.metrics.base import MetricInputs
    from structseq.metrics.report import compute_metric

    if o.kind == "supertag":
        return _limited(
            {
                m: {
                    "score": sig.ratio_score(sig.ratio_stats(m, o.hypotheses, o.references)),
                    "signature": SUPERTAG_SIGNATURE.format(name=m),
                }
                for m in KIND_METRICS["supertag"]
            },
            o,
        )
    inputs = MetricInputs(o.hypotheses, o.references, bleu_tokenize=tokenize, tokenized=True)
    return _limited({m: compute_metric(m, inputs) for m in KIND_METRICS["seq2seq"]}, o)


def _limited(scores: dict, o: Output) -> dict:
    """Recomputed scores keep the `|limit:N` their evaluation's signatures state."""
    limit = (o.settings or {}).get("limit")
    if limit is not None:
        for v in scores.values():
            if not v["signature"].endswith(f"|limit:{limit}") and f"|limit:{limit}|" not in v["signature"]:
                v["signature"] += f"|limit:{limit}"
    return scores


def report_scores(outputs: list[Output], computed: set[str]) -> dict[str, list[tuple[float, str]]]:
    """Scores of the metrics JSONs not computed from predictions, for metrics every output's report holds."""
    shared = None
    for o in outputs:
        names = {k for k, v in o.report.items() if isinstance(v, dict) and "score" in v and "signature" in v}
        shared = names if shared is None else shared & names
    return {
        m: [(float(o.report[m]["score"]), o.report[m]["signature"]) for o in outputs]
        for m in sorted((shared or set()) - computed)
    }


def _pairs(a: list[Output], b: list[Output]) -> list[tuple[Output, Output]]:
    """Seed pairs: each side is sorted by seed, so equal seed lists pair by seed number; otherwise in order, as
    many pairs as the smaller side has seeds."""
    return list(zip(a, b))


def _majority(outputs: list[Output]) -> list[str]:
    """Per example, the output most seeds agree on (ties: the lowest seed's)."""
    out = []
    for hyps in zip(*(o.hypotheses for o in outputs)):
        counts = Counter(hyps)
        out.append(max(hyps, key=lambda h: (counts[h], -hyps.index(h))))
    return out


def _test(metric: str, a: list[Output], b: list[Output], opts: dict) -> dict:
    """One paired test of `metric` between the outputs `a` and `b` (one each, or pooled over seeds)."""
    refs = a[0].references
    if metric == "bleu":
        ha = a[0].hypotheses if len(a) == 1 else _majority(a)
        hb = b[0].hypotheses if len(b) == 1 else _majority(b)
        return sig.sacrebleu_paired(
            ha, hb, refs, tokenize=opts["tokenize"], test=opts["test"], resamples=opts["resamples"], seed=opts["seed"]
        )
    sa = np.mean([sig.ratio_stats(metric, o.hypotheses, refs) for o in a], axis=0)
    sb = np.mean([sig.ratio_stats(metric, o.hypotheses, refs) for o in b], axis=0)
    return sig.paired_test(sa, sb, opts["test"], opts["resamples"], opts["seed"])


def _paired(metric: str, a: list[Output], b: list[Output], opts: dict) -> list[dict]:
    if opts["pairing"] == "pooled":
        return [{"a": [o.ident for o in a], "b": [o.ident for o in b], **_test(metric, a, b, opts)}]
    return [{"a": x.ident, "b": y.ident, **_test(metric, [x], [y], opts)} for x, y in _pairs(a, b)]


def compare(
    a: list[Output],
    b: list[Output],
    *,
    test: str = "bootstrap",
    resamples: int = 1000,
    seed: int = 12345,
    pairing: str = "seeds",
    level: float = 0.95,
    bleu_tokenize: str | None = None,
    names: tuple[str, str] = ("A", "B"),
    split: str | None = None,
    allow_mixed: bool = False,
) -> dict:
    """The comparison report (JSON-able): per metric each side's `seed_summary`, the difference of the means,
    and the paired test(s). A side whose outputs were evaluated with different settings is an error unless
    `allow_mixed` (`check_settings`)."""
    if test not in sig.TESTS:
        raise StructseqError(f"--test: unknown test {test!r}; choices: {', '.join(sig.TESTS)}")
    if pairing not in PAIRINGS:
        raise StructseqError(f"--pairing: unknown {pairing!r}; choices: {', '.join(PAIRINGS)}")
    if resamples < 1 or seed < 1 or not 0 < level < 1:
        raise StructseqError("--resamples and --seed must be >= 1 and --level within (0, 1)")
    check_same_examples(a + b)
    for side, name in ((a, names[0]), (b, names[1])):
        check_settings(side, name, allow_mixed)
    tokenize = bleu_tokenizer(a + b, bleu_tokenize)
    opts = {"test": test, "resamples": resamples, "seed": seed, "pairing": pairing, "tokenize": tokenize}
    scores = {o.path: metric_scores(o, tokenize) for o in a + b}
    metrics = []
    for m in KIND_METRICS[a[0].kind]:
        xs, ys = [scores[o.path][m]["score"] for o in a], [scores[o.path][m]["score"] for o in b]
        metrics.append(
            {
                "name": m,
                "signature": scores[a[0].path][m]["signature"],
                "A": sig.seed_summary(xs, level),
                "B": sig.seed_summary(ys, level),
                "delta": sig.mean_sd(xs)[0] - sig.mean_sd(ys)[0],
                "paired": _paired(m, a, b, opts),
            }
        )
    for m, pairs in report_scores(a + b, set(KIND_METRICS[a[0].kind])).items():
        xs, ys = [s for s, _ in pairs[: len(a)]], [s for s, _ in pairs[len(a) :]]
        metrics.append(
            {
                "name": m,
                "signature": pairs[0][1],
                "A": sig.seed_summary(xs, level),
                "B": sig.seed_summary(ys, level),
                "delta": sig.mean_sd(xs)[0] - sig.mean_sd(ys)[0],
                "paired": None,
                "note": "from the metrics JSON; no paired test",
            }
        )
    pairs = [[x.ident, y.ident] for x, y in _pairs(a, b)] if pairing == "seeds" else None
    return {
        "split": split,
        "n_examples": len(a[0].references),
        "kind": a[0].kind,
        "systems": {
            key: {
                "name": name,
                "outputs": [
                    {
                        "path": str(o.path),
                        "seed": o.seed,
                        "checkpoint": o.report.get("checkpoint"),
                        "settings": o.settings,
                    }
                    for o in side
                ],
            }
            for key, name, side in (("A", names[0], a), ("B", names[1], b))
        },
        "test": {
            "name": test,
            "resamples": resamples,
            "seed": seed,
            "pairing": pairing,
            "pairs": pairs,
            "level": level,
            "bleu": f"sacrebleu PairedTest ({'bs' if test == 'bootstrap' else 'ar'})",
            "bleu_tokenize": tokenize,
        },
        "metrics": metrics,
    }
