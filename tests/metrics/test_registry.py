"""Metrics are registered functions that a task or a dataset names; every signature states its score's scale;
the CLI renders any report entry by its shape; `--bleu-tokenize` goes through the config."""

import dataclasses
import json
from collections import Counter

import pytest
from typer.testing import CliRunner

from structseq import api
from structseq.config import config_from_dict
from structseq.data.example import Example
from structseq.data.registry import datasets, load_dataset
from structseq.errors import ConfigError
from structseq.metrics import CTER, MetricInputs, compute_metric, with_scale
from structseq.models import build_model
from structseq.registry import METRICS, register_metric
from structseq.tasks import get_task
from structseq.tasks.seq2seq import Seq2SeqTask
from tests.fixtures.tiny import tiny_transformer

NAME = "mean_hyp_length_test"
TINY = tiny_transformer(ffn_dim=16, dropout=None)


@pytest.fixture
def length_metric():
    """A throw-away metric: hypothesis length over reference length, in percent."""

    @register_metric(NAME, scale="percent")
    def mean_hyp_length(inputs: MetricInputs) -> dict:
        h, r = sum(map(len, inputs.hyp_tokens)), sum(map(len, inputs.ref_tokens))
        return {"score": 100.0 * h / r, "signature": "hyp_len|unit:token", "n": inputs.n}

    yield NAME
    METRICS.remove(NAME)


def report_header(m: dict) -> dict:
    return {"dataset": "x", "split": "test", "n": m["n"], "beam": 1, "checkpoint": "last", **m}


def test_a_metric_named_by_a_task_subclass_is_in_the_report_and_the_table(length_metric, capsys, monkeypatch):
    from structseq import cli

    class LengthTask(Seq2SeqTask):
        metrics = Seq2SeqTask.metrics + (NAME,)

    task = LengthTask(config_from_dict({"model": TINY}))
    examples = [Example(("a",), ("x", "y")), Example(("b",), ("z", "z"))]
    m = task.evaluate(examples, [["x", "y"], ["z"]], dataset="files", split="test")
    assert m[NAME] == {"score": 75.0, "signature": "hyp_len|unit:token|scale:percent", "n": 2}
    assert m["exact_match"]["score"] == 0.5  # the task's own metrics are still there
    assert NAME not in Seq2SeqTask(task.cfg).evaluate(examples, [["x", "y"], ["z"]], dataset="files", split="test")
    monkeypatch.setenv("COLUMNS", "250")
    cli.print_metrics(report_header(m))
    out = capsys.readouterr().out
    assert NAME in out and "75.0000" in out and "hyp_len|unit:token|scale:percent" in out


def test_a_metric_named_by_a_dataset_reaches_evaluate_and_the_cli(length_metric, tmp_path, monkeypatch):
    """A dataset's `metrics` add to every task's report on its splits (a one-update Colors run, decoded as its
    references), in `--json` and in the table."""
    from structseq import cli

    monkeypatch.setitem(datasets(), "colors", dataclasses.replace(datasets()["colors"], metrics=(NAME,)))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "data: {dataset: colors, valid: null}\n"
        f"model: {json.dumps(TINY)}\n"
        "optim: {max_tokens: 200, schedule: constant}\ntrain: {max_steps: 1, valid_every: 1, threads: 1}\n"
    )
    api.train(cfg, tmp_path / "run", show_progress=False)
    monkeypatch.setattr(api.Run, "decode_examples", lambda self, examples, **kw: [list(e.target) for e in examples])
    r = CliRunner().invoke(cli.app, ["evaluate", str(tmp_path / "run"), "--json"])
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout)
    assert m[NAME]["score"] == 100.0 and m[NAME]["signature"].endswith("|scale:percent")
    monkeypatch.setenv("COLUMNS", "250")
    r = CliRunner().invoke(cli.app, ["evaluate", str(tmp_path / "run")])
    assert r.exit_code == 0 and NAME in r.stdout and "100.0000" in r.stdout


def _signatures(result) -> list[str]:
    if not isinstance(result, dict):
        return []
    own = [result["signature"]] if isinstance(result.get("signature"), str) else []
    return own + [s for v in result.values() for s in _signatures(v)]


def _scores(result) -> list[float]:
    if not isinstance(result, dict):
        return []
    own = [result["score"]] if isinstance(result.get("score"), (int, float)) else []
    return own + [s for v in result.values() for s in _scores(v)]


def _every_kind_of_inputs() -> list[MetricInputs]:
    """Sequence outputs with categories, a CoGnition compound and a pooled-reference dataset; and a tagger's."""
    cter = CTER({"dog": ("狗",), "the": None}, {"N": ["dog"], "DET": ["the"]}, {}, block_size=1)
    pool = dataclasses.make_dataclass("Spec", ["splits", "pooled_references"])(("train", "test"), ("train", "test"))
    train = [Example(("the", "dog"), ("狗",))]
    text = MetricInputs(
        ["狗", "猫 跑"],
        ["狗", "猫 走"],
        sources=[("the", "dog"), ("a", "cat")],
        categories=["a", "b"],
        meta={"compound": ["the dog", "the dog"]},
        dataset="x",
        split="test",
        dataset_spec=pool,
        load_split=lambda split: train,
        extras={"cter": cter},
    )
    tagger = MetricInputs(
        [["n", "s"]],
        [["n", "np"]],
        extras={
            "kbest": [[[("n", -0.1)], [("s", -0.5), ("np", -0.9)]]],
            "train_counts": Counter({"n": 150, "np": 20}),
            "beam": 2,
            "betas": (1.0, 0.1),
        },
    )
    return [text, tagger]


def test_every_registered_metric_states_its_scale():
    kinds = _every_kind_of_inputs()
    builtin = [(name, m) for name, m in METRICS.items() if m.compute.__module__.startswith("structseq.metrics")]
    assert {"exact_match", "bleu", "cter", "pooled_bleu", "accuracy", "oracle_accuracy"} <= {n for n, _ in builtin}
    for name, metric in builtin:
        assert metric.scale in ("fraction", "percent")
        result = next((r for r in (compute_metric(name, x) for x in kinds) if r is not None), None)
        assert result is not None, f"{name}: no inputs it applies to"
        json.dumps(result)
        sigs = _signatures(result)
        assert sigs and all(s.count("|scale:") == 1 and f"|scale:{metric.scale}" in s for s in sigs), (name, sigs)
        top = 1.0 if metric.scale == "fraction" else 100.0
        assert all(0.0 <= s <= top for s in _scores(result)), (name, result)


def test_a_signature_stating_another_scale_is_refused():
    assert with_scale("x|a:b", "fraction") == "x|a:b|scale:fraction"
    assert with_scale("x|scale:fraction|a:b", "fraction") == "x|scale:fraction|a:b"
    with pytest.raises(ValueError, match="registered as 'percent'"):
        with_scale("x|scale:fraction", "percent")


def test_supertag_scores_are_fractions_that_say_so():
    from structseq.metrics.supertag import supertag_facts

    _, tagger = _every_kind_of_inputs()
    acc = compute_metric("accuracy", tagger)
    assert acc["score"] == 0.5 and acc["signature"].endswith("|scale:fraction")
    facts = supertag_facts(tagger)
    assert "|scale:fraction" in facts["signature"] and facts["multitag"][0]["accuracy"] == 0.5


def test_print_metrics_renders_every_shape_generically(capsys, monkeypatch):
    from structseq import cli

    monkeypatch.setenv("COLUMNS", "250")
    m = {
        "dataset": "d",
        "split": "s",
        "n": 10,
        "beam": 1,
        "checkpoint": "last",
        "exact_match": {"score": 0.5, "signature": "em|scale:fraction", "n": 10},
        "pooled_bleu": {
            "full": {"score": 0.25, "signature": "p|scale:fraction"},
            "1-shot": {"score": None, "n": 0, "signature": "p|scale:fraction"},
        },
        "error_rate": {"instance": 0.125, "aggregate": 0.5, "n": 10, "signature": "er|scale:fraction"},
        "by_genre": {
            "metric": "em",
            "exact_match": {"news": 0.75, "talk": 0.25},
            "n": {"news": 4, "talk": 6},
            "signature": "em|scale:fraction",
        },
        "multitag": [{"beta": 1.0, "accuracy": 0.5}],
        "unseen_predicted": 3,
        "signature": "shared",
    }
    cli.print_metrics(m)
    out = capsys.readouterr().out
    for text in (
        "exact_match",
        "0.5000",
        "pooled_bleu.full",
        "0.2500",
        "pooled_bleu.1-shot",
        "error_rate_instance",
        "0.1250",
        "error_rate_aggregate",
        "exact match by genre",
        "news",
        "0.7500",
        "talk",
    ):
        assert text in out, text
    assert "error_rate_n" not in out and "unseen_predicted" not in out and "multitag" not in out


def _tiny_run(tmp_path, cfg: dict, train) -> api.Run:
    cfg = config_from_dict(cfg)
    task = get_task(cfg)
    vocabs = task.build_vocabs(train)
    return api.Run(tmp_path, cfg, build_model(cfg.model, vocabs), vocabs, "last", task)


def test_bleu_tokenize_on_a_task_without_bleu_is_a_config_error(tmp_path):
    """It used to reach the supertag task's `evaluate` as a keyword it does not take (a TypeError)."""
    cfg = {
        "task": "supertag",
        "data": {"dataset": "ab-grammar"},
        "model": {"arch": "supertag-classifier", "d_model": 16, "encoder": {"hidden": 8, "word_dim": 8, "layers": 1}},
    }
    run = _tiny_run(tmp_path, cfg, load_dataset("ab-grammar", "train"))
    with pytest.raises(ConfigError, match="task supertag reports no BLEU"):
        run.evaluate("test", bleu_tokenize="none", write_predictions=False)
    m = run.evaluate("test", write_predictions=False)
    assert 0.0 <= m["accuracy"]["score"] <= 1.0 and m["accuracy"]["signature"].endswith("|scale:fraction")


def test_bleu_tokenize_is_the_config_override_data_bleu_tokenize(tmp_path, monkeypatch):
    run = _tiny_run(tmp_path, {"data": {"dataset": "colors"}, "model": TINY}, load_dataset("colors", "train"))
    monkeypatch.setattr(api.Run, "decode_examples", lambda self, examples, **kw: [list(e.target) for e in examples])
    given = run.evaluate("test", bleu_tokenize="none", write_predictions=False)
    assert "tok:none" in given["bleu"]["signature"] and given["bleu"]["signature"].endswith("|scale:percent")
    assert run.config.data.bleu_tokenize is None  # the run's own config is left as it was
    assert "tok:13a" in run.evaluate("test", write_predictions=False)["bleu"]["signature"]
    with pytest.raises(ConfigError):
        run.evaluate("test", bleu_tokenize="nosuch", write_predictions=False)
