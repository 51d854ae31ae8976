"""Issue 47 item 10: docs/pretrained.md's recipe for a small local model (a byte-level BPE tokenizer and a BART
from a config, saved with save_pretrained) runs as written, and the folder it writes trains, evaluates and
predicts through the CLI."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys

import pytest
import yaml
from typer.testing import CliRunner

from structseq.cli import app
from tests.fixtures.paths import ROOT as REPO

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

DOC = REPO / "docs" / "pretrained.md"


def _recipe() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## A small model of your own, built locally") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_documented_recipe_builds_a_model_that_trains(tmp_path, monkeypatch):
    rng = random.Random(0)
    words = "jump walk run look turn left right twice thrice".split()
    lines = []
    for _ in range(40):
        s = " ".join(rng.choice(words) for _ in range(rng.randint(1, 4)))
        lines.append(f"{s}\t{s.upper()}")
    (tmp_path / "train.tsv").write_text("\n".join(lines) + "\n")
    r = subprocess.run([sys.executable, "-c", _recipe()], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    folder = tmp_path / "models" / "tiny-bart"
    assert (folder / "config.json").is_file() and (folder / "tokenizer.json").is_file()
    assert json.loads((folder / "config.json").read_text())["model_type"] == "bart"

    monkeypatch.chdir(tmp_path)
    cfg = {
        "task": "hf-seq2seq",
        "data": {"dataset": "files", "train": "train.tsv", "valid": "train.tsv", "test": ["train.tsv"]},
        "model": {"arch": "hf-seq2seq", "pretrained": "models/tiny-bart"},
        "optim": {"lr": 1e-3, "max_tokens": 400},
        "train": {"max_steps": 2, "valid_every": 2, "threads": 1},
    }
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))
    runner = CliRunner()
    r = runner.invoke(app, ["train", "cfg.yaml", "-o", "runs/bart", "-q"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["evaluate", "runs/bart", "--limit", "3", "--json", "-q"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout.splitlines()[-1])["n"] == 3
