"""docs/extending.md is executable: its dataset, task, model, head and metric, saved as one plugin file outside the
package, train, evaluate and predict through the unchanged CLI, and no file of the package is edited."""

import json
import os
import re
import subprocess
import sys

import pytest
import yaml

from tests.fixtures.paths import ROOT

DOC = ROOT / "docs" / "extending.md"
PACKAGE = ROOT / "src" / "structseq"

SENTENCES = (
    "the cat sat",
    "elephants wander",
    "a big giraffe",
    "dogs bark loudly",
    "the quiet afternoon",
    "birds sing",
    "a tiny mouse squeaks",
)


def _package_state() -> dict[str, float]:
    return {str(p): p.stat().st_mtime_ns for p in PACKAGE.rglob("*.py")}


def _cli(args, env, cwd):
    return subprocess.run(
        [sys.executable, "-m", "structseq.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300
    )


@pytest.fixture(scope="module")
def walkthrough(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("extending")
    text = DOC.read_text(encoding="utf-8")
    plugin = tmp / "wordtag.py"
    plugin.write_text("\n".join(re.findall(r"```python\n(.*?)```", text, re.S)), encoding="utf-8")
    rows = ["source\ttarget"] + [
        f"{s}\t{' '.join('long' if len(w) > 4 else 'short' for w in s.split())}" for s in SENTENCES
    ]
    (tmp / "words.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    config = next(c for c in map(yaml.safe_load, re.findall(r"```yaml\n(.*?)```", text, re.S)) if "task" in c)
    config["train"].update(threads=1, log_every=50)
    (tmp / "wordtag.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {**os.environ, "STRUCTSEQ_PLUGINS": str(plugin), "PYTHONPATH": str(ROOT / "src")}
    before = _package_state()
    train = _cli(["train", "wordtag.yaml", "-o", "run", "-q"], env, tmp)
    assert train.returncode == 0, train.stderr
    return tmp, env, before


def test_the_plugin_trains_evaluates_and_predicts(walkthrough):
    tmp, env, _ = walkthrough
    evaluation = _cli(["evaluate", "run", "--split", "words.tsv", "--json"], env, tmp)
    assert evaluation.returncode == 0, evaluation.stderr
    report = json.loads(evaluation.stdout)
    assert report["task"] == "word-tag"
    assert report["tag_accuracy"]["score"] == 1.0
    assert report["tag_accuracy"]["signature"].endswith("|scale:fraction")
    assert report["exact_match"]["score"] == 1.0
    table = _cli(["evaluate", "run", "--split", "words.tsv"], env, tmp)
    assert "tag_accuracy" in table.stdout  # the CLI renders a metric it has never heard of
    predicted = subprocess.run(
        [sys.executable, "-m", "structseq.cli", "predict", "run"],
        input="the elephants\n",
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
        timeout=300,
    )
    assert predicted.returncode == 0, predicted.stderr
    assert predicted.stdout.split("\n")[0] == "short long"


def test_the_plugin_metric_drives_validation_and_early_stopping(walkthrough):
    """tag_accuracy is no attribute of the task: the config's task.metrics names it, validation computes it as
    evaluate does, and train.valid_metric picks best.pt by it (higher is better, from its registration)."""
    tmp, env, _ = walkthrough
    records = [json.loads(line) for line in (tmp / "run" / "metrics.jsonl").read_text().splitlines() if line]
    valid = [r for r in records if "valid_tag_accuracy" in r]
    assert len(valid) == 2 and all(0.0 <= r["valid_tag_accuracy"] <= 1.0 for r in valid)
    # best.pt holds the best validation score, which evaluate (best checkpoint, same file) reports: 1.0 above
    assert max(r["valid_tag_accuracy"] for r in valid) == 1.0
    assert (tmp / "run" / "checkpoints" / "best.pt").exists()


def test_the_plugin_dataset_is_listed_shown_and_evaluated_by_name(walkthrough):
    tmp, env, _ = walkthrough
    listed = _cli(["data", "list", "--json"], env, tmp)
    assert listed.returncode == 0, listed.stderr
    entry = next(d for d in json.loads(listed.stdout) if d["name"] == "word-lengths")
    assert entry["splits"] == {"train": 2, "test": 2} and entry["source"] == "generated"
    shown = _cli(["data", "show", "word-lengths", "--split", "test"], env, tmp)
    assert shown.returncode == 0 and "elephants bark" in shown.stdout and "long short" in shown.stdout
    evaluation = _cli(["evaluate", "run", "--split", "word-lengths:test", "--json"], env, tmp)
    assert evaluation.returncode == 0, evaluation.stderr
    report = json.loads(evaluation.stdout)
    assert report["dataset"] == "word-lengths" and report["tag_accuracy"]["n"] == 5  # words of the two phrases


def test_the_plugin_strategy_decodes_a_sequence_run_through_predict_with_its_setting(walkthrough):
    """The doc's sibling-beam strategy: with penalty 0 it is beam search; with a prohibitive one each hypothesis
    continues only with its best token, so the best output is greedy's; its key is refused under another
    strategy and out of its bounds."""
    tmp, env, _ = walkthrough
    run = ROOT / "tests" / "fixtures" / "old_runs" / "lstm"
    lines = "dax lug\nlug blicket wif\nlug kiki wif fep\nwif dax lug kiki\n"

    def predict(*extra):
        return subprocess.run(
            [sys.executable, "-m", "structseq.cli", "predict", str(run), "-q", *extra],
            input=lines, capture_output=True, text=True, env=env, cwd=tmp, timeout=300,
        )  # fmt: skip

    sibling = ["--set", "decode.strategy=sibling-beam", "--set"]
    outputs = []
    for extra in (["--beam", "4"], ["--beam", "4", *sibling, "decode.sibling_penalty=0"], ["--beam", "1"]):
        done = predict(*extra)
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout.splitlines())
    assert outputs[0] == outputs[1]
    done = predict("--beam", "4", *sibling, "decode.sibling_penalty=1000")
    assert done.returncode == 0 and done.stdout.splitlines() == outputs[2], done.stderr
    for extra, words in (
        (["decode.sibling_penalty=2"], "sibling-beam"),
        ([*sibling[1:], "decode.sibling_penalty=-1"], ">= 0"),
    ):
        done = predict("--set", *extra)
        assert done.returncode == 2 and "decode.sibling_penalty" in done.stderr and words in done.stderr, done.stderr


def test_the_seq2seq_gru_trains_evaluates_test_and_predicts(walkthrough):
    """Issue 55.10: the doc's autoregressive example (a GRU over vocabs["src"] / batch["tgt_in"]) with its own
    config trains, evaluates `--split test` (the config's data.test file, predictions test.tsv) and predicts
    through the unchanged CLI; its teacher-forced log-probabilities equal its step-by-step ones (the contract
    test_architecture checks for the package's archs)."""
    import importlib.util

    import torch

    tmp, env, _ = walkthrough
    text = DOC.read_text(encoding="utf-8")
    config = next(c for c in map(yaml.safe_load, re.findall(r"```yaml\n(.*?)```", text, re.S)) if "task" not in c)
    assert config["model"]["arch"] == "tiny-gru"
    config["train"].update(threads=1, max_steps=20, valid_every=10)
    pairs = [f"{s}\t{' '.join(reversed(s.split()))}" for s in SENTENCES]
    (tmp / "pairs.tsv").write_text("source\ttarget\n" + "\n".join(pairs) + "\n", encoding="utf-8")
    (tmp / "gru.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    train = _cli(["train", "gru.yaml", "-o", "gru", "-q"], env, tmp)
    assert train.returncode == 0, train.stderr
    evaluation = _cli(["evaluate", "gru", "--split", "test", "--json"], env, tmp)
    assert evaluation.returncode == 0, evaluation.stderr
    assert json.loads(evaluation.stdout)["exact_match"]["n"] == len(SENTENCES)
    assert (tmp / "gru" / "predictions" / "test.tsv").is_file()
    predicted = subprocess.run(
        [sys.executable, "-m", "structseq.cli", "predict", "gru", "-q", "--beam", "3"],
        input="the cat sat\n", capture_output=True, text=True, env=env, cwd=tmp, timeout=300,
    )  # fmt: skip
    assert predicted.returncode == 0 and len(predicted.stdout.splitlines()) == 1, predicted.stderr
    spec = importlib.util.spec_from_file_location("extending_plugin", tmp / "wordtag.py")
    plugin = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(plugin)
    except Exception:  # noqa: BLE001 - the names are registered by the CLI's process already in a shared registry
        pytest.skip("the plugin's names are registered in this process already")
    torch.manual_seed(0)
    from structseq.data.vocab import Vocab
    from structseq.models.heads import SoftmaxHeadConfig

    vocab = Vocab.build([["a", "b", "c", "d"]])
    model = plugin.build_tiny_gru(plugin.TinyGRUConfig(dim=8, head=SoftmaxHeadConfig()), {"src": vocab, "tgt": vocab})
    model.eval()
    batch = {"src": torch.tensor([[4, 5, 6], [5, 0, 0]]), "tgt_in": torch.tensor([[1, 4, 5], [1, 6, 0]])}
    torch.testing.assert_close(model(batch), model.incremental_log_probs(batch))


def test_the_head_and_the_model_contract_are_checked_when_the_config_loads(walkthrough):
    tmp, env, _ = walkthrough
    config = yaml.safe_load((tmp / "wordtag.yaml").read_text())
    config["model"]["head"] = {"type": "copy"}  # reads attention, which the word tagger does not give
    (tmp / "copy.yaml").write_text(yaml.safe_dump(config))
    out = _cli(["train", "copy.yaml", "-o", "copy-run"], env, tmp)
    assert out.returncode != 0
    assert "'model.head.type': a copy head reads attention weights" in out.stderr
    assert "Traceback" not in out.stderr


def test_without_the_plugin_the_names_are_unknown(walkthrough):
    tmp, env, _ = walkthrough
    out = _cli(["train", "wordtag.yaml", "-o", "other"], {**env, "STRUCTSEQ_PLUGINS": ""}, tmp)
    assert out.returncode != 0 and "unknown task 'word-tag'" in out.stderr and "STRUCTSEQ_PLUGINS" in out.stderr


def test_no_file_of_the_package_was_edited(walkthrough):
    _, _, before = walkthrough
    assert _package_state() == before
