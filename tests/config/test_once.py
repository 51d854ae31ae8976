"""Issue 56 item 4: a command validates its config once, and validating a config imports only the packages of
the names it gives (`structseq.registry`: a lookup of one name imports the module that registers it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

import structseq.config as config
from tests.fixtures.cli_run import run_main
from tests.fixtures.toy import toy_config, toy_tsv


def test_train_validates_its_config_once(tmp_path, monkeypatch, capsys):
    """`structseq train` validated a config with a relative local folder twice: once loaded, once more when the
    folder was made absolute (`config.absolute_paths`); and a Transformer's config once."""
    from structseq.testing.hf_tiny import tiny_bart

    monkeypatch.chdir(tmp_path)
    tiny_bart(tmp_path / "bart")
    hf = {
        "task": "hf-seq2seq",
        "data": {"dataset": "colors", "valid": "train", "test": ["test"]},
        "model": {"arch": "hf-seq2seq", "pretrained": "bart"},  # relative: the run stores it absolute
        "optim": {"lr": 3e-3, "schedule": "constant", "max_tokens": None, "batch_size": 7},
        "train": {"max_steps": 2, "valid_every": 0, "seed": 1, "threads": 1},
    }
    tiny = toy_config(toy_tsv(tmp_path), max_steps=2, valid_every=0).to_dict()
    validate = config.check_config
    for name, cfg in (("hf", hf), ("tiny", tiny)):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        calls = []
        monkeypatch.setattr(config, "check_config", lambda cfg: calls.append(cfg) or validate(cfg))
        code, err = run_main(monkeypatch, capsys, "train", path, "-o", tmp_path / name, "-q")
        assert code == 0, err
        assert len(calls) == 1, name
    saved = yaml.safe_load((tmp_path / "hf" / "config.yaml").read_text())
    assert saved["model"]["pretrained"] == str(tmp_path / "bart")


def test_making_paths_absolute_validates_nothing_again(monkeypatch):
    cfg = config.config_from_dict({"task": "hf-seq2seq", "model": {"arch": "hf-seq2seq", "pretrained": "base"}})
    monkeypatch.setattr(config, "check_config", lambda cfg: pytest.fail("validated again"))
    moved = config.absolute_paths(cfg)
    assert moved.model.pretrained == os.path.abspath("base") and cfg.model.pretrained == "base"


#: modules a Transformer config for seq2seq has no use for: other tasks, other archs, other datasets (the lexicon
#: package is imported: models/heads.py, the module of the softmax head, imports it for the lexical head)
UNNAMED = (
    "structseq.tasks.supertag",
    "structseq.tasks.context",
    "structseq.tasks.hf_seq2seq",
    "structseq.models.supertagger",
    "structseq.models.lstm",
    "structseq.models.dangle",
    "structseq.models.context",
    "structseq.models.hf_seq2seq",
    "structseq.data.tlgbank",
    "structseq.data.scan",
    "structseq.data.colors",
    "structseq.decode.processors.grammar",
)


def _imported_after(code: str) -> set[str]:
    """The structseq modules a fresh interpreter holds after running `code`."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(m for m in sys.modules if m.startswith('structseq'))))"
    env = {**os.environ, "STRUCTSEQ_PLUGINS": ""}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_validating_a_config_imports_only_what_it_names():
    loaded = _imported_after(
        "from structseq.config import config_from_dict\n"
        "config_from_dict({'task': 'seq2seq', 'model': {'arch': 'transformer', 'head': {'type': 'softmax'}}})"
    )
    assert {"structseq.models.transformer", "structseq.tasks.seq2seq"} <= loaded
    assert not loaded & set(UNNAMED), sorted(loaded & set(UNNAMED))
    # a config that names them imports them; listing a kind imports all of it
    loaded = _imported_after(
        "from structseq.config import config_from_dict\n"
        "config_from_dict({'task': 'supertag', 'model': 'supertag-tree'})\n"
        "from structseq.registry import ARCHS\n"
        "assert 'dangle' in ARCHS.names()"
    )
    assert {"structseq.tasks.supertag", "structseq.models.supertagger", "structseq.models.dangle"} <= loaded
