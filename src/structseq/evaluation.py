"""Evaluating a run on a split (`structseq evaluate`, `Run.evaluate`): decode, score, and keep the result.

Every evaluation is kept under a name of its own, so two evaluations never replace each other:
RUN/predictions/NAME.tsv and NAME.metrics.json, where NAME is the split's label (`prediction_label`) followed by
what differs from the run's own settings (`evaluation_suffix`): `.last` (another checkpoint than the run's
train.eval_checkpoint), `.beam5` (another beam than its decode.beam), `.dec-HASH` (other decode settings),
`.ensemble-HASH`, `.first200` (--limit), `.sampling-seedN[-KEYVALUE...]` (a strategy with its own keys: its name,
its seed, its keys off their defaults), `.tok-zh` (--bleu-tokenize). The metrics JSON is the
sidecar stating all of them (`settings`, with the checkpoint files' sha256), which `compare` checks. An existing
evaluation of that name is replaced only when it was made with the same settings from the same checkpoint
file (the same evaluation redone), or with `overwrite`.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from structseq.config import apply_overrides, config_from_dict
from structseq.data.registry import SplitSpec, dataset_split
from structseq.decode.batched import check_beam
from structseq.errors import ConfigError, StructseqError
from structseq.run.layout import prediction_files

if TYPE_CHECKING:
    from structseq.decode.sampling import Sampling

#: decode settings that never change what is decoded (so they are neither in a name nor compared)
NOT_SETTINGS = ("batch_size", "speedups")  # how outputs are computed, not what they are


def check_metrics(names: Sequence[str]) -> None:
    """Every name a registered metric (plugins included); a ConfigError listing them otherwise."""
    from structseq.registry import METRICS

    METRICS.check_names(names, "--metric")


def load_split(run: EvaluatedRun, split: str | None = None, data_root=None):
    """(dataset, split name, examples) of a split of the run's dataset, a file, or NAME:SPLIT. An example
    longer than the run's limits (`data.limits.input_limits`) is a DataError naming its line."""
    from structseq.data.limits import input_limits, length_limit, over_limit
    from structseq.errors import DataError

    d = run.config.data
    split = split or default_split(d)
    with length_limit(**{**input_limits(run.config), **run.task.input_measure()}) as limit:
        given = files_split(d, split)
        spec = SplitSpec.parse(given, d.dataset)
        examples = spec.load(data_root, d.columns, d.fields)
    dataset, name = spec.dataset, (split if given != split else spec.split)  # `test` of a files config: test
    for i, e in enumerate(examples):  # generated splits are not read from lines
        over = over_limit(e, limit)
        if over is not None:
            side, n, most, key = over
            raise DataError(f"example {i + 1}: {side} has {n} tokens, more than {key} {most}", f"{dataset}/{name}")
    return dataset, name, examples


def default_split(data) -> str:
    """The split an evaluation without one takes: the first of `data.test`, and for a `dataset: files` config
    with one test file `test` (so that its predictions are test*.tsv whether or not `--split test` was given); a
    named dataset's split there (`cognition:cg-test`) keeps its own name."""
    if data.dataset == "files" and len(data.test) == 1 and dataset_split(data.test[0]) is None:
        return "test"
    return data.test[0] if data.test else "test"


def files_split(data, split: str) -> str:
    """`train`, `valid` and `test` of a `dataset: files` config are its `data.train`, `data.valid` and
    `data.test` files (a file of that name in the working directory stays the file); `test` of several test files
    is a ConfigError naming them. Any other split as given."""
    if data.dataset != "files" or split not in ("train", "valid", "test") or Path(split).is_file():
        return split
    if split == "test":
        if len(data.test) != 1:
            raise ConfigError(f"split 'test': data.test holds {len(data.test)} files; give one: {', '.join(data.test)}")
        return data.test[0]
    value = getattr(data, split)
    if not value:
        raise ConfigError(f"split '{split}': the run's data.{split} is not set (a held-out part of train)")
    return value


class EvaluatedRun(Protocol):
    """What evaluating needs of a run (`structseq.api.Run` is one): its directory (where the predictions go),
    config, model, vocabularies and task, the checkpoint's name and files (an ensemble's `members`), its own
    decode settings, and its decoding."""

    run_dir: Path
    config: Any
    model: Any
    vocabs: dict
    checkpoint: str
    task: Any
    members: tuple[str, ...]
    checkpoint_files: tuple[Path, ...]
    saved_decode: dict | None

    def sampled(self, sampling: Sampling | None) -> EvaluatedRun: ...

    def decode_examples(self, examples, *, beam=None, show_progress=False) -> list: ...


@dataclasses.dataclass(frozen=True)
class EvalOptions:
    """What an evaluation is asked (`Run.evaluate`'s keywords, `structseq evaluate`'s options).

    `split`: a split of the training dataset, a file, or `NAME:SPLIT` of any registered dataset (e.g.
    `cognition:cg-test`; default: the config's first test split); `beam`: another beam than the run's;
    `bleu_tokenize`: applied as the config override `data.bleu_tokenize` (a ConfigError for a task that reports
    no BLEU); `limit`: the split's first N examples only; `sampling`: one sample per example instead of search;
    `write_predictions`: keep the predictions and metrics under the run (`predictions/`); `overwrite`: let a
    different earlier evaluation of the same name, or a file structseq did not write, be replaced; `metrics`:
    registered metrics (plugins too) to report besides the task's (`--metric`)."""

    split: str | None = None
    beam: int | None = None
    data_root: Any = None
    bleu_tokenize: str | None = None
    write_predictions: bool = True
    show_progress: bool = False
    limit: int | None = None
    sampling: Sampling | None = None
    overwrite: bool = False
    metrics: Sequence[str] = ()


def evaluate(run: EvaluatedRun, options: EvalOptions) -> dict:
    """Decode a split and compute every metric of the task (`Run.evaluate`, `options`: `EvalOptions`).

    The report holds the registered metrics of the task and the dataset, each with a signature stating its
    scale; for seq2seq: exact match, token accuracy, BLEU, NLTK BLEU, per-category exact match; CoGnition splits
    also get character BLEU and, on cg-test, the compound error rate. What produced the numbers is in the
    report's `settings`; the predictions go to a file named for what differs from the run's own settings, never
    replacing another evaluation unless `overwrite` (the module's docstring)."""
    from structseq.config import _bleu_tokenizers
    from structseq.decode.strategies import strategy_of
    from structseq.fields import check_value

    o = options
    split, beam, limit, sampling, bleu_tokenize = o.split, o.beam, o.limit, o.sampling, o.bleu_tokenize
    check_beam(beam)
    check_metrics(o.metrics)
    run, sampling = run.sampled(sampling), None  # one route: decode.strategy=sampling and its decode keys
    check_value(bleu_tokenize, {"choices": _bleu_tokenizers}, "--bleu-tokenize")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"'--limit' must be an integer >= 1, got {limit!r}")
    d = run.config.data
    split = split or default_split(d)
    dataset, split_name, examples = load_split(run, split, o.data_root)
    examples = examples[:limit]
    if not examples:
        where = split if SplitSpec.parse(split, d.dataset).kind == "file" else f"{dataset}/{split_name}"
        raise StructseqError(f"{where}: no examples to evaluate (an empty file?)")
    run.task.check_examples(examples, f"{dataset}/{split_name}")
    scorer = _scoring_task(run, dataset, bleu_tokenize)
    settings = evaluation_settings(run, beam, limit, sampling, bleu_tokenize)
    target = None
    if o.write_predictions:  # refused before anything is decoded
        label = prediction_label(split, dataset, split_name) + evaluation_suffix(settings, run_defaults(run))
        target = _check_target(prediction_files(run.run_dir, label), settings, split, o.overwrite)
    predictions = run.decode_examples(examples, beam=beam, show_progress=o.show_progress)
    metrics = scorer.evaluate(
        examples, predictions, dataset=dataset, split=split_name, data_root=o.data_root, metrics=o.metrics
    )
    metrics.update(
        {
            "dataset": dataset,
            "split": split_name,
            "n": len(examples),
            "beam": settings["decode"]["beam"],
            "checkpoint": run.checkpoint,
            "seed": run.config.train.seed,
            "task": run.task.name,
        }
    )
    if "src" in run.vocabs:
        metrics["source_oov_tokens"] = sum(t not in run.vocabs["src"] for e in examples for t in e.source)
    metrics["strategy"] = strategy_of(run.model, run.config.decode, beam)
    _note_variant(run, metrics, limit, settings["sampling"])
    metrics["settings"] = settings
    if target is not None:
        _write(run, target, examples, predictions, metrics)
    return metrics


# ---------------------------------------------------------------- what produced an evaluation
def run_defaults(run: EvaluatedRun) -> dict:
    """What a run evaluates with when told nothing: its train.eval_checkpoint (as resolved: best falls back
    to last), its saved decode settings and BLEU tokenizer."""
    from structseq.run.checkpoint import resolve_checkpoint

    dirs = run.members or (str(run.run_dir),)
    try:
        checkpoint = "+".join(sorted({resolve_checkpoint(m, run.config.train.eval_checkpoint)[0] for m in dirs}))
    except StructseqError:  # a Run built in memory, with no checkpoint file
        checkpoint = run.checkpoint
    return {
        "checkpoint": checkpoint,
        "decode": run.saved_decode or dataclasses.asdict(run.config.decode),
        "bleu_tokenize": run.config.data.bleu_tokenize,
    }


def evaluation_settings(run: EvaluatedRun, beam, limit, sampling, bleu_tokenize) -> dict:
    """Everything that made an evaluation's numbers: the checkpoint (its name and each file's sha256), the
    decode settings in force (`beam` applied), the limit, sampling, an ensemble's members, the BLEU tokenizer."""
    from structseq.outputs import file_digest

    decode = applying(dataclasses.asdict(run.config.decode))
    if beam is not None:
        decode["beam"] = beam
    own = own_keys(decode.get("strategy"))
    draws = any(f.metadata.get("role") == "seed" for f in own.values())
    return {
        "checkpoint": run.checkpoint,
        "checkpoint_sha256": [file_digest(p) for p in run.checkpoint_files],
        "decode": {k: v for k, v in decode.items() if k not in NOT_SETTINGS},
        "limit": limit,
        "sampling": {k: decode[k] for k in own} if draws else None,  # a drawing strategy's settings
        "ensemble": list(run.members) or None,
        "bleu_tokenize": bleu_tokenize or run.config.data.bleu_tokenize,
    }


def own_keys(strategy: str | None) -> dict:
    """The `decode` keys strategy `strategy` declares (`register_strategy(options=)`): name -> field."""
    from structseq.registry import STRATEGIES

    options = STRATEGIES.get(strategy).options if strategy in STRATEGIES else None
    return {f.name: f for f in dataclasses.fields(options)} if options else {}


def applying(decode: dict) -> dict:
    """A `decode` section's keys without those of strategies it does not name (their defaults: what an
    evaluation's settings and name leave out)."""
    from structseq.config import DecodeConfig

    shared = {f.name for f in dataclasses.fields(DecodeConfig)}
    own = own_keys(decode.get("strategy"))
    return {k: v for k, v in decode.items() if k in shared or k in own}


def _strategy_part(decode: dict, saved: dict) -> str | None:
    """The name part of a strategy with its own keys: `NAME-seedS-KEYVALUE...` (the seed always, other keys
    where not their default), when it or a key differs from the run's own, or it draws; else None."""
    own = own_keys(decode.get("strategy"))
    draws = any(f.metadata.get("role") == "seed" for f in own.values())
    changed = decode.get("strategy") != saved.get("strategy") or any(
        decode[k] != saved.get(k, f.default) for k, f in own.items()
    )
    if not own or not (changed or draws):
        return None
    keys = [f"seed{decode[k]}" for k, f in own.items() if f.metadata.get("role") == "seed"]
    keys += [f"{k}{decode[k]}" for k, f in own.items() if f.metadata.get("role") != "seed" and decode[k] != f.default]
    return "-".join([decode["strategy"], *keys])


def _short(value) -> str:
    return hashlib.sha1(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:8]


def evaluation_suffix(settings: dict, defaults: dict) -> str:
    """The part of an evaluation's file name saying how it differs from the run's defaults (the module's
    docstring lists the parts); '' for an evaluation with the run's own settings."""
    parts = []
    if settings["checkpoint"] != defaults["checkpoint"]:
        parts.append(settings["checkpoint"])
    decode, saved = settings["decode"], defaults["decode"]
    if decode.get("beam") != saved.get("beam"):
        parts.append(f"beam{decode.get('beam')}")
    strategy = _strategy_part(decode, saved)
    named = {"beam", *own_keys(decode.get("strategy"))} | ({"strategy"} if strategy else set())
    other = {k: v for k, v in decode.items() if k not in named and saved.get(k) != v}
    if other:
        parts.append(f"dec-{_short(other)}")
    if strategy:
        parts.append(strategy)
    if settings.get("ensemble"):
        parts.append("ensemble-" + hashlib.sha1("\n".join(settings["ensemble"]).encode()).hexdigest()[:8])
    if settings.get("limit") is not None:
        parts.append(f"first{settings['limit']}")
    if settings.get("bleu_tokenize") and settings["bleu_tokenize"] != defaults.get("bleu_tokenize"):
        parts.append(f"tok-{settings['bleu_tokenize']}")
    return "".join(f".{p}" for p in parts)


def describe(settings: dict | None, strategy: str | None = None) -> str:
    """One line of an evaluation's settings, for people: `checkpoint best, strategy beam, beam 5, len_penalty
    0.6, limit 200`: of the decode keys, only those the strategy (`strategy`: the one that decoded, else the
    named one) reads and its own, no null."""
    from structseq.registry import STRATEGIES

    if not settings:
        return "settings not recorded"
    decode = dict(settings.get("decode") or {})
    strategy = strategy or decode.get("strategy")
    if strategy in STRATEGIES:
        keep = {*STRATEGIES.get(strategy).reads, *own_keys(strategy), "processors", "grammar"}  # every strategy's
        decode = {"strategy": strategy, **{k: v for k, v in decode.items() if k in keep}}
    out = [f"checkpoint {settings.get('checkpoint')}"]
    out += [f"{k} {v}" for k, v in decode.items() if v is not None and v != {}]
    for key in ("limit", "bleu_tokenize"):
        if settings.get(key) is not None:
            out.append(f"{key} {settings[key]}")
    if settings.get("ensemble"):
        out.append(f"ensemble of {len(settings['ensemble'])}")
    return ", ".join(out)


def legacy_settings(report: dict) -> dict | None:
    """The settings an older metrics JSON (before `settings` was recorded) states: its checkpoint, beam, limit."""
    if "settings" in report:
        return report["settings"]
    if "checkpoint" not in report:
        return None
    return {
        "checkpoint": report.get("checkpoint"),
        "decode": {"beam": report.get("beam")},
        "limit": report.get("limit"),
        "sampling": report.get("sampling"),
    }


def _note_variant(run: EvaluatedRun, metrics: dict, limit, sampling) -> None:
    """State an ensemble, a limit and sampling in the report (`ensemble`, `limit`, `sampling`) and at the
    end of every signature (`|limit:N`, as recomputed scores in `compare` keep it)."""
    notes = []
    if run.members:
        from structseq.decode.ensemble import AVERAGE

        metrics["ensemble"] = {"members": list(run.members), "average": AVERAGE}
        notes.append(f"ensemble:{len(run.members)}|average:{AVERAGE}")
    if limit is not None:
        metrics["limit"] = limit
        notes.append(f"limit:{limit}")
    if sampling is not None:  # a drawing strategy's settings (seed included)
        metrics["sampling"] = dict(sampling)
        notes.append("sample:" + ",".join(f"{k}={v}" for k, v in metrics["sampling"].items()))
    if notes:
        append_signatures(metrics, "|" + "|".join(notes))


def append_signatures(report, note: str) -> None:
    """`note` appended to every `signature` string of a report, however deep."""
    if isinstance(report, dict):
        for k, v in report.items():
            if k == "signature" and isinstance(v, str):
                report[k] = v + note
            else:
                append_signatures(v, note)


def _scoring_task(run: EvaluatedRun, dataset: str, bleu_tokenize: str | None):
    """The run's task, or with `bleu_tokenize` the same task under the config override `data.bleu_tokenize`
    (its learned state copied; the run's config is left as it is). A ConfigError when the task reports no
    BLEU on this dataset."""
    from structseq.tasks import get_task

    if not bleu_tokenize:
        return run.task
    if "bleu" not in run.task.metric_names(dataset):
        raise ConfigError(
            f"--bleu-tokenize: task {run.task.name} reports no BLEU (its metrics: "
            f"{', '.join(run.task.metric_names(dataset)) or 'its own'})"
        )
    cfg = config_from_dict(apply_overrides(run.config.to_dict(), [f"data.bleu_tokenize={bleu_tokenize}"]), saved=True)
    task = get_task(cfg)
    task.load_state_dict(run.task.state_dict())
    return task


# ---------------------------------------------------------------- keeping it
def _check_target(paths: tuple[Path, Path], settings: dict, spec: str, overwrite: bool):
    """(Outputs, tsv, metrics json) for an evaluation at `paths` (`run.layout.prediction_files`), refused before
    decoding when an earlier evaluation of that name was made otherwise (other settings, or its checkpoint file changed since) unless
    `overwrite`; an input of the evaluation or a file structseq did not write is refused too (`Outputs`)."""
    from structseq.outputs import Outputs

    path, metrics_path = paths
    outputs = Outputs([spec], overwrite=overwrite)
    for target in (path, metrics_path):
        outputs.check(target)
    if path.exists() and not overwrite:
        try:
            earlier = json.loads(metrics_path.read_text(encoding="utf-8")).get("settings")
        except (OSError, ValueError, AttributeError):
            earlier = None
        if earlier != settings:
            why = "its checkpoint file changed since" if _same_but_file(earlier, settings) else describe(earlier)
            raise StructseqError(
                f"{path}: holds an earlier evaluation ({why}); pass --overwrite to replace it, or keep it and "
                "evaluate with other settings"
            )
    return outputs, path, metrics_path


def _same_but_file(earlier, settings: dict) -> bool:
    return isinstance(earlier, dict) and {**earlier, "checkpoint_sha256": None} == {
        **settings,
        "checkpoint_sha256": None,
    }


def _write(run: EvaluatedRun, target, examples, predictions, metrics: dict) -> None:
    """The TSV and its metrics JSON, each atomically; the old metrics file goes first, so a failure midway
    never leaves metrics describing other predictions."""
    outputs, path, metrics_path = target
    metrics_path.unlink(missing_ok=True)
    header, rows = run.task.prediction_rows(examples, predictions)
    with outputs.open(path) as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar="\\")
        w.writerow(header)
        w.writerows(rows)
    metrics["predictions"] = str(path)
    outputs.write(metrics_path, json.dumps(metrics, indent=1))


def prediction_label(spec: str, dataset: str, split_name: str) -> str:
    """The split's part of an evaluation's file name: SPLIT for a split of the run's dataset, NAME-SPLIT for
    NAME:SPLIT, and for a file its stem and a short hash of its resolved path (`test-1a2b3c4d`), so that
    evaluating `--split test` and `--split /elsewhere/test.tsv` never share a file."""
    kind = SplitSpec.parse(spec).kind
    if kind == "named":
        return f"{dataset}-{split_name}"
    if kind == "split":
        return spec
    parts = [Path(p) for p in spec.split(",")]
    resolved = ",".join(str(p.resolve()) for p in parts)
    return f"{parts[0].name.split('.')[0] or 'file'}-{hashlib.sha256(resolved.encode()).hexdigest()[:8]}"
