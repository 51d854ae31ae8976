"""docs/extending.md is executable: its task, model and config train, evaluate and predict through the
shared loop, evaluator and API unchanged."""

import re
from pathlib import Path

import yaml

from structseq import api
from structseq.config import config_from_dict
from structseq.models.registry import ARCHS
from structseq.tasks import TASKS

DOC = Path(__file__).resolve().parents[1] / "docs" / "extending.md"


def test_the_walkthrough_runs(tmp_path, monkeypatch):
    text = DOC.read_text()
    code = "\n".join(re.findall(r"```python\n(.*?)```", text, re.S))
    config = yaml.safe_load(re.findall(r"```yaml\n(.*?)```", text, re.S)[0])
    monkeypatch.setattr("structseq.tasks.TASKS", dict(TASKS))
    monkeypatch.setattr("structseq.models.registry.ARCHS", dict(ARCHS))
    import structseq.tasks as tasks_module
    import structseq.models.registry as registry

    namespace = {}
    exec(compile(code, str(DOC), "exec"), namespace)  # registers into the (copied) registries
    assert "word-tag" in tasks_module.TASKS and "word-tagger" in registry.ARCHS
    rows = ["source\ttarget"] + [f"{s}\t{' '.join('long' if len(w) > 4 else 'short' for w in s.split())}"
                                 for s in ("the cat sat", "elephants wander", "a big giraffe", "dogs bark loudly",
                                           "the quiet afternoon", "birds sing", "a tiny mouse squeaks")]
    data = tmp_path / "words.tsv"
    data.write_text("\n".join(rows) + "\n")
    config["data"].update(train=str(data), valid=str(data), test=str(data))
    config["train"].update(threads=1, log_every=50)
    api.train(config_from_dict(config), tmp_path / "run", show_progress=False)
    run = api.load_run(tmp_path / "run")
    assert run.task.name == "word-tag"
    assert run.evaluate(str(data))["accuracy"]["score"] == 1.0
    assert run.predict(["the elephants"]) == ["short long"]
