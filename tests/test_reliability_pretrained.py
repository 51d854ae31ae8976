"""The pretrained archs with a user's mistakes and a changing machine (issue 43, sections 3-5): a relative base
folder is stored absolute, a moved one is pointed at with `--set model.pretrained=NEWDIR` (its content hash
still checked), and the checkpoint's own limits are clear errors or warnings, never an IndexError."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from cli_run import one_line_error, run_main  # noqa: E402
from hf_tiny import tiny_bart  # noqa: E402
from structseq import api  # noqa: E402
from structseq.config import absolute_paths, config_from_dict  # noqa: E402
from structseq.fields import path_keys  # noqa: E402
from structseq.train.checkpoint import load_checkpoint  # noqa: E402
from test_hf_seq2seq import train_config  # noqa: E402


def test_a_relative_base_folder_is_stored_absolute_and_a_moved_one_can_be_pointed_at(tmp_path, monkeypatch, capsys):
    """`model.pretrained: mybart` (relative) trained from one directory: on d15a89c stored as written, so
    `evaluate RUN` from elsewhere failed. Now the run holds the absolute path; after the folder moves,
    `--set model.pretrained=NEWDIR` finds it, and a folder of other content is still refused by its hash."""
    work = tmp_path / "work"
    tiny_bart(work / "mybart")
    monkeypatch.chdir(work)
    api.train(config_from_dict(train_config("mybart", 1)), "run", show_progress=False)
    capsys.readouterr()
    saved = load_checkpoint(work / "run" / "checkpoints" / "last.pt")["config"]["model"]["pretrained"]
    assert saved == str(work / "mybart")
    assert f"pretrained: {work / 'mybart'}" in (work / "run" / "config.yaml").read_text()
    monkeypatch.chdir(tmp_path)
    run = work / "run"
    code, err = run_main(monkeypatch, capsys, "evaluate", run, "--split", "train", "--limit", 2)
    assert code == 0, err
    (work / "mybart").rename(tmp_path / "moved")
    code, err = run_main(monkeypatch, capsys, "evaluate", run, "--split", "train", "--limit", 2)
    one_line_error(code, err, "model.pretrained", "does not exist")
    code, err = run_main(
        monkeypatch, capsys, "evaluate", run, "--split", "train", "--limit", 2, "--set", "model.pretrained=moved"
    )
    assert code == 0, err
    tiny_bart(tmp_path / "other", seed=5)  # another base: the hash refuses it
    code, err = run_main(
        monkeypatch, capsys, "evaluate", run, "--split", "train", "--limit", 2, "--set", "model.pretrained=other"
    )
    one_line_error(code, err, "changed since this run was trained")
    code, err = run_main(monkeypatch, capsys, "evaluate", run, "--split", "train", "--set", "data.min_freq=3")
    one_line_error(code, err, "--set data.min_freq=3", "model.pretrained")


def test_every_folder_a_run_keeps_reading_is_a_path_key():
    """The keys made absolute at training: the pretrained archs' base and the supertagger's encoder."""
    hf = config_from_dict({"task": "hf-seq2seq", "model": {"arch": "rdangle-pretrained", "pretrained": "b"}})
    assert path_keys(hf) == {"model.pretrained": "b"}
    tagger = config_from_dict({"task": "supertag", "model": {"arch": "supertag-tree", "encoder": {"pretrained": "e"}}})
    assert path_keys(tagger) == {"model.encoder.pretrained": "e"}
    absolute = absolute_paths(tagger)
    assert absolute.model.encoder.pretrained.startswith("/") and absolute.model.encoder.pretrained.endswith("/e")
    assert absolute_paths(absolute) is absolute  # already absolute: unchanged
