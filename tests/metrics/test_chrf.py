"""Issue 55 friction 9: `--metric chrf` (the `evaluate --help` example) is registered: sacrebleu's chrF2 on the
0-100 scale with sacrebleu's signature, equal to sacrebleu's own CHRF on the predictions file."""

from __future__ import annotations

import csv
import json

import pytest
import yaml
from sacrebleu.metrics import CHRF
from typer.testing import CliRunner

from structseq.cli import app
from tests.fixtures.toy import toy_config, toy_tsv

runner = CliRunner()


def _columns(path):
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\"))
    head = rows[0]
    return [[r[head.index(c)] for r in rows[1:]] for c in ("hypothesis", "reference")]


def test_evaluate_and_compare_report_chrf_as_sacrebleu_computes_it(tmp_path):
    data = toy_tsv(tmp_path)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(toy_config(data, max_steps=4).to_dict()))
    assert runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "run"), "-q"]).exit_code == 0
    r = runner.invoke(
        app, ["evaluate", str(tmp_path / "run"), "--split", str(data), "--json", "-q", "--metric", "chrf"]
    )
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout.splitlines()[-1])
    hyps, refs = _columns(m["predictions"])
    want = CHRF()  # chrF2: character 6-grams, no word n-grams, beta 2
    score = want.corpus_score(hyps, [refs])
    assert m["chrf"]["score"] == pytest.approx(score.score, abs=1e-9)
    assert 0 < m["chrf"]["score"] <= 100  # percent, as sacrebleu prints it
    assert m["chrf"]["signature"] == f"chrf|{want.get_signature().format()}|scale:percent"
    assert "|nc:6|nw:0|" in m["chrf"]["signature"]

    r = runner.invoke(app, ["compare", m["predictions"], m["predictions"], "--metric", "chrf", "-f", "json"])
    assert r.exit_code == 0, r.output
    row = next(x for x in json.loads(r.stdout)["metrics"] if x["name"] == "chrf")
    assert row["A"]["values"] == [pytest.approx(score.score)] and row["delta"] == 0


def test_chrf_with_several_references_and_chrf_plus_plus():
    from structseq.metrics import chrf

    hyps, refs = ["the cat sat", "a dog"], [["the cat sat down", "a cat sat"], ["the dog"]]
    got = chrf(hyps, refs, word_order=2)
    want = CHRF(word_order=2).corpus_score(hyps, [["the cat sat down", "the dog"], ["a cat sat", None]])
    assert got.score == pytest.approx(want.score) and got.signature.startswith("chrf++|")
