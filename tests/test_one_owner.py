"""One owner per concept: which checkpoint of a run is read (`load_run`, `--checkpoint` and `train.init_from`
share `resolve_checkpoint`), strict YAML for a run's config.yaml, NAME:SPLIT parsing, and each shared CLI
option declared once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import structseq.cli
from structseq import api
from structseq.compose import corpus
from structseq.data import registry
from structseq.errors import ConfigError, StructseqError
from structseq.run import checkpoint
from structseq.run.checkpoint import init_checkpoint, resolve_checkpoint
from structseq.run.layout import RunDirError
from structseq.run.saved_config import read_run_config
from structseq.train import loop
from test_train import toy_config, toy_tsv

CLI_DIR = Path(structseq.cli.__file__).parent


def test_load_run_and_init_from_resolve_checkpoints_by_one_rule(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    # no checkpoint at all: the same words from both readers
    with pytest.raises(StructseqError) as by_load_run:
        api.load_run(run, "best")
    with pytest.raises(ConfigError) as by_init_from:
        init_checkpoint(run)
    assert "no checkpoint in" in str(by_load_run.value)
    assert str(by_init_from.value) == f"'train.init_from': {by_load_run.value}"

    # no validation ran (no best.pt): best falls back to last for both
    last = run / "checkpoints" / "last.pt"
    last.write_bytes(b"not a checkpoint")
    assert resolve_checkpoint(run, "best") == ("last", last)
    assert init_checkpoint(run) == last
    with pytest.raises(StructseqError, match=r"last\.pt: cannot load checkpoint safely"):
        api.load_run(run, "best")

    # a corrupt best.pt is never silently replaced by last.pt
    best = run / "checkpoints" / "best.pt"
    best.write_bytes(b"corrupt")
    assert resolve_checkpoint(run, "best") == ("best", best)
    assert init_checkpoint(run) == best
    with pytest.raises(StructseqError, match=r"best\.pt: cannot load checkpoint safely"):
        api.load_run(run, "best")
    with pytest.raises(StructseqError, match=r"best\.pt: cannot load checkpoint safely"):
        loop.Trainer(toy_config(toy_tsv(tmp_path), init_from=str(run)), tmp_path / "phase2", show_progress=False)


def test_checkpoint_names_are_checked_in_one_place(tmp_path):
    for bad in ("../x", ".hidden", "", None):
        with pytest.raises(StructseqError, match="is not a checkpoint name"):
            resolve_checkpoint(tmp_path, bad)
    assert api.resolve_checkpoint is checkpoint.resolve_checkpoint


def test_run_config_refuses_a_duplicate_key_naming_the_file(tmp_path):
    (tmp_path / "config.yaml").write_text("train:\n  seed: 1\n  seed: 2\n")
    with pytest.raises(RunDirError, match=re.escape(f"{tmp_path / 'config.yaml'}:3: duplicate key 'seed'")):
        read_run_config(tmp_path)


def test_compose_reads_name_split_with_the_data_registry_parser():
    assert corpus.dataset_split is registry.dataset_split
    assert not hasattr(corpus, "_dataset_split")


@pytest.mark.parametrize("flag", ["--data-root", "--checkpoint"])
def test_each_shared_cli_option_is_declared_once(flag):
    declared = {
        path.name: len(re.findall(rf"""["']{flag}["']""", path.read_text())) for path in sorted(CLI_DIR.glob("*.py"))
    }
    assert {name: n for name, n in declared.items() if n} == {"options.py": 1}
    # and no parameter named after the flag declares it implicitly (typer.Option without a name)
    param = flag.lstrip("-").replace("-", "_")
    implicit = [
        path.name
        for path in CLI_DIR.glob("*.py")
        if re.search(rf"\b{param}\s*:[^=\n]*=\s*typer\.Option\(", path.read_text())
    ]
    assert implicit == []


def test_the_cli_is_one_package_mounting_its_sub_apps():
    from typer.main import get_command

    group = get_command(structseq.cli.app)
    assert {"data", "lexicon", "compose", "context", "train", "evaluate", "predict"} <= set(group.commands)
    for old in ("context_cli.py", "lexicon/cli.py", "compose/cli.py", "cli.py"):
        assert not (CLI_DIR.parent / old).exists(), old
