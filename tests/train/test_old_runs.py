"""Run directories written before the core moved to registries (commit 17d4576: an LSTM with a lexical head on
Colors, a tree supertagger on the AB grammar) still load, evaluate and give the same predictions."""

import csv
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from structseq import api
from structseq.errors import ConfigError
from tests.fixtures.paths import FIXTURES

OLD = FIXTURES / "old_runs"


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


def _saved_with_strategy(tmp_path, strategy):
    """The old tree run as a run trained with `--set decode.strategy=STRATEGY` would be (its checkpoint and its
    config.yaml): a supertagger ignored the key before its searches were strategies."""
    from structseq.run.checkpoint import load_checkpoint, save_checkpoint

    run_dir = tmp_path / "tree"
    shutil.copytree(OLD / "tree", run_dir)
    path = run_dir / "checkpoints" / "last.pt"
    ckpt = load_checkpoint(path)
    ckpt["config"]["decode"]["strategy"] = strategy
    save_checkpoint(ckpt, path)
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    config["decode"]["strategy"] = strategy
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return run_dir, path


def test_an_old_tree_run_saved_with_a_sequence_strategy_loads_decodes_and_takes_set(tmp_path):
    """The strategy it was saved with does not search a tree: one warning naming the checkpoint, the model's
    default decodes (the predictions as before), and `--set decode.strategy` still changes it; a strategy the
    user gives that does not fit is refused, naming the --set item."""
    run_dir, path = _saved_with_strategy(tmp_path, "greedy")
    with pytest.warns(UserWarning) as caught:
        run = api.load_run(run_dir)
    assert [str(w.message).split(":")[0] for w in caught] == [str(path)]
    assert "'greedy' does not search model TreeSupertagger" in str(caught[0].message)
    assert run.config.decode.strategy is None
    metrics = run.evaluate("test")
    assert _rows(metrics["predictions"]) == _rows(OLD / "tree" / "expected-test.tsv")
    assert Path(metrics["predictions"]).name == "test.tsv"  # its own settings: no suffix
    for given in ("tree-greedy", "null"):
        assert run.with_overrides([f"decode.strategy={given}"]).config.decode.strategy in (given, None)
    with pytest.raises(ConfigError, match=r"^--set decode.strategy=beam: 'decode.strategy': 'beam' searches") as e:
        run.with_overrides(["decode.strategy=beam"])
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("given", [[], ["--set", "decode.strategy=tree-greedy"], ["--set", "decode.strategy=null"]])
def test_structseq_predict_decodes_an_old_run_saved_with_a_strategy_it_ignored(tmp_path, given):
    from typer.testing import CliRunner

    from structseq.cli import app

    run_dir, _ = _saved_with_strategy(tmp_path, "greedy")
    with pytest.warns(UserWarning, match="'decode.strategy' 'greedy' does not search model TreeSupertagger"):
        result = CliRunner().invoke(app, ["predict", str(run_dir), *given], input="the old bird sleeps\n")
    assert result.exit_code == 0, result.output
    assert "the|NP/N old|NP/N bird|NP/N sleeps|NP/N" in result.stdout  # the fixture's own predictions
    with pytest.warns(UserWarning):
        refused = CliRunner().invoke(app, ["predict", str(run_dir), "--set", "decode.strategy=beam"], input="the\n")
    assert refused.exit_code != 0 and isinstance(refused.exception, ConfigError)  # the CLI's one-line error
    assert str(refused.exception).startswith("--set decode.strategy=beam: 'decode.strategy': 'beam' searches")


def test_resuming_an_old_tree_run_saved_with_a_sequence_strategy_validates_with_the_default(tmp_path):
    """`--resume` (two more updates, one validation): the saved strategy is treated as null with one warning
    naming the checkpoint, and the run's checkpoints keep its config as it was given."""
    from structseq.run.checkpoint import load_checkpoint

    run_dir, path = _saved_with_strategy(tmp_path, "greedy")
    with pytest.warns(UserWarning, match=f"^{re.escape(str(path))}: the checkpoint's 'decode.strategy' 'greedy'"):
        summary = api.resume(run_dir, overrides=["train.max_steps=22"], show_progress=False)
    assert summary["steps"] == 22 and "valid_accuracy" in summary["history"][-1]
    assert load_checkpoint(path)["config"]["decode"]["strategy"] == "greedy"
