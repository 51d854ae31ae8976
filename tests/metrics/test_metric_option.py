"""Issue 47 item 6 and issue 46 item 4 through the CLI: one metric system. A registered metric (here a plugin,
registered by this test) is reported by `evaluate --metric`, compared by `compare --metric`, added to a task by
`task.metrics` in the config, and drives validation and early stopping in the direction it registers
(`Metric.higher_is_better`: this one is an error rate, lower is better)."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from typer.testing import CliRunner

from structseq.cli import app
from structseq.metrics.base import signature
from structseq.registry import METRICS, register_metric
from tests.fixtures.paths import ROOT as REPO
from tests.fixtures.toy import toy_config, toy_tsv

runner = CliRunner()


@pytest.fixture()
def error_rate():
    @register_metric("error_rate", scale="fraction", higher_is_better=False)
    def _error_rate(inputs):
        """The share of outputs that differ from their reference (1 - exact match)."""
        wrong = sum(h.split() != r.split() for h, r in zip(inputs.hyp_text, inputs.ref_text))
        return {"score": wrong / max(len(inputs.ref_text), 1), "signature": signature("error_rate", tok="space")}

    yield "error_rate"
    METRICS.remove("error_rate")


def test_a_registered_metric_everywhere(tmp_path, error_rate):
    data = toy_tsv(tmp_path)
    d = toy_config(data, max_steps=6, valid_every=2, valid_metric="exact_match").to_dict()
    d["task"]["metrics"] = ["error_rate"]
    d["train"]["valid_metric"] = "error_rate"
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(d))
    r = runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    values = [float(v) for v in re.findall(r"valid_error_rate (\S+)", r.output)]
    best = [float(v) for v in re.findall(r"best_error_rate (\S+)", r.output)]
    assert len(values) == 3 and best == [min(values[: i + 1]) for i in range(3)]  # lower is better
    history = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [h["best"] for h in history if "valid_error_rate" in h] == pytest.approx(best, abs=1e-3)

    r = runner.invoke(app, ["evaluate", str(tmp_path / "run"), "--split", str(data), "--json", "-q"])
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout.splitlines()[-1])
    assert m["error_rate"]["score"] == pytest.approx(1 - m["exact_match"]["score"])  # task.metrics reported
    assert m["error_rate"]["signature"].endswith("|scale:fraction")

    plain = tmp_path / "plain.yaml"
    d["task"]["metrics"], d["train"]["valid_metric"] = [], "loss"
    plain.write_text(yaml.safe_dump(d))
    assert runner.invoke(app, ["train", str(plain), "-o", str(tmp_path / "plain"), "-q"]).exit_code == 0
    r = runner.invoke(
        app, ["evaluate", str(tmp_path / "plain"), "--split", str(data), "--json", "-q", "--metric", "error_rate"]
    )
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout.splitlines()[-1])
    assert m["error_rate"]["score"] == pytest.approx(1 - m["exact_match"]["score"])
    r = runner.invoke(app, ["evaluate", str(tmp_path / "plain"), "--split", str(data), "--metric", "nosuch"])
    assert r.exit_code != 0 and "no registered metric 'nosuch'" in str(r.exception) and "error_rate" in str(r.exception)

    preds = sorted((tmp_path / "plain" / "predictions").glob("*.tsv"))[0]
    r = runner.invoke(app, ["compare", str(preds), str(preds), "--metric", "error_rate", "-f", "json"])
    assert r.exit_code == 0, r.output
    row = next(x for x in json.loads(r.stdout)["metrics"] if x["name"] == "error_rate")
    assert row["A"]["values"] == [pytest.approx(m["error_rate"]["score"])] and row["delta"] == 0


def test_task_metrics_must_be_registered(tmp_path):
    d = toy_config(toy_tsv(tmp_path)).to_dict()
    d["task"]["metrics"] = ["nosuch"]
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(d))
    r = runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "run")])
    assert r.exit_code != 0 and "'task.metrics': no registered metric 'nosuch'" in str(r.exception)


def test_context_use_is_a_registered_metric_of_context_tasks():
    """Issue 46 item 4: the context diagnostic is a registered metric: a context task's report computes it
    (`--metric context_use`) with the same numbers as `decode.contrastive.context_use`; a sequence task's
    inputs, having no contexts, do not get it."""
    from structseq.config import config_from_dict
    from structseq.data.example import Example
    from structseq.decode.contrastive import context_use
    from structseq.tasks import get_task

    examples = [
        Example.from_text("das ist gut", "the cat is good", context="the cat sat on the mat"),
        Example.from_text("er schläft", "the dog sleeps", context="a dog and a house"),
    ]
    hyps = [["the", "cat", "is", "fine"], ["it", "sleeps"]]
    task = get_task(config_from_dict({"task": {"type": "context-seq2seq"}, "model": {"arch": "context-transformer"}}))
    report = task.evaluate(examples, hyps, dataset="files", split="x", metrics=("context_use",))
    want = context_use(
        [e.context_text for e in examples], [e.target_text for e in examples], ["the cat is fine", "it sleeps"]
    )
    assert report["context_use"]["score"] == pytest.approx(want.score) == pytest.approx(0.5)  # cat kept, dog lost
    plain = get_task(config_from_dict({}))
    assert "context_use" not in plain.evaluate(examples, hyps, dataset="files", split="x", metrics=("context_use",))


def test_a_tagger_validates_on_a_registered_metric_its_config_adds(tmp_path):
    """The supertagger's validation computes a `task.metrics` metric when train.valid_metric names it."""

    cfg = REPO / "configs" / "ab-grammar" / "classifier.yaml"
    r = runner.invoke(
        app,
        [
            "train", str(cfg), "-o", str(tmp_path / "tag"), "-q",
            "--set", "train.max_steps=2", "--set", "train.valid_every=2",
            "--set", "task.metrics=[sentence_accuracy]", "--set", "train.valid_metric=sentence_accuracy",
        ],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in (tmp_path / "tag" / "metrics.jsonl").read_text().splitlines()]
    valid = [x for x in rows if "valid_sentence_accuracy" in x]
    assert len(valid) == 1 and 0.0 <= valid[0]["valid_sentence_accuracy"] <= 1.0
    assert valid[0]["best"] == valid[0]["valid_sentence_accuracy"]
