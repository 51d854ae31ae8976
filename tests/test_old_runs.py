"""Run directories written before the core moved to registries (commit 17d4576: an LSTM with a lexical head on
Colors, a tree supertagger on the AB grammar) still load, evaluate and give the same predictions."""

import csv
import json
import shutil
from pathlib import Path

import pytest

from structseq import api

OLD = Path(__file__).resolve().parent / "fixtures" / "old_runs"


def _rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return [row[:3] for row in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE, escapechar="\\")]


@pytest.mark.parametrize("name", ["lstm", "tree"])
def test_an_old_run_loads_and_predicts_as_before(name, tmp_path):
    run_dir = tmp_path / name
    shutil.copytree(OLD / name, run_dir)  # evaluation writes predictions into the run
    run = api.load_run(run_dir)  # its train.eval_checkpoint: best for the LSTM, last for the tagger
    metrics = run.evaluate("test")
    expected = json.loads((OLD / name / "expected-metrics.json").read_text())
    assert metrics["n"] == expected["n"]
    if name == "lstm":
        assert metrics["exact_match"]["score"] == expected["exact_match"]["score"]
    else:  # supertag accuracy was a percent; it is a fraction now, with its scale in the signature
        assert metrics["accuracy"]["correct"] == expected["accuracy"]["correct"]
        assert metrics["accuracy"]["score"] == pytest.approx(expected["accuracy"]["score"] / 100)
    assert _rows(metrics["predictions"]) == _rows(OLD / name / "expected-test.tsv")
