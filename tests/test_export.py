"""What `export` promises for a structseq run: the exported checkpoint keeps exactly what loading needs (no
optimiser or RNG state: it cannot be resumed), each vocabulary is one token a line, the checkpoint is the run's
`train.eval_checkpoint` unless named, the folder and its files get the permissions mkdir and open would give,
only an absent or empty folder is written (a killed export's temporaries do not count), a vocabulary name from
the checkpoint never becomes a path, and a failed write leaves nothing. A fake run (config and checkpoints, no
training) is enough: a non-pretrained export never builds the model."""

import os
import stat

import pytest
import torch
import yaml

from structseq.errors import StructseqError
from structseq.export import export_run
from structseq.run.checkpoint import load_checkpoint, save_checkpoint

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]


def fake_run(folder, eval_checkpoint=None, vocab_name="tgt"):
    # an arch without a transformers layout: its made-up weights are never built into a model
    cfg = {"model": {"arch": "lstm", "embed_dim": 8}, "train": {"max_steps": 5}}
    if eval_checkpoint:
        cfg["train"]["eval_checkpoint"] = eval_checkpoint
    (folder / "checkpoints").mkdir(parents=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg))
    for name, step in (("best", 3), ("last", 5)):
        save_checkpoint(
            {
                "model": {"w": torch.full((2,), float(step))},
                "vocab": {"src": [*SPECIALS, "a"], vocab_name: [*SPECIALS, "B", "c d"]},
                "config": cfg,
                "progress": {"step": step},
                "task": {"kind": "toy"},
                "optimizer": {"state": {}},
                "rng": {"torch": torch.zeros(2, dtype=torch.uint8)},
            },
            folder / "checkpoints" / f"{name}.pt",
        )
    return folder


def test_the_export_keeps_what_loading_needs_and_one_token_a_line(tmp_path):
    record = export_run(fake_run(tmp_path / "run"), tmp_path / "out")
    assert record["checkpoint"] == "best" and record["step"] == 3 and record["format"] == "structseq"
    ckpt = load_checkpoint(tmp_path / "out" / "checkpoints" / "best.pt")  # checksum verified
    assert set(ckpt) == {"format", "model", "vocab", "config", "task", "progress"}  # checksum popped by load
    assert ckpt["model"]["w"].tolist() == [3.0, 3.0]
    assert (tmp_path / "out" / "vocab" / "tgt.txt").read_text() == "<pad>\n<s>\n</s>\n<unk>\nB\nc d\n"
    assert yaml.safe_load((tmp_path / "out" / "config.yaml").read_text())["model"]["embed_dim"] == 8
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "checkpoints",
        "config.yaml",
        "structseq-export.json",
        "vocab",
    ]


def test_the_default_checkpoint_is_the_runs_eval_checkpoint(tmp_path):
    run = fake_run(tmp_path / "run", eval_checkpoint="last")
    assert export_run(run, tmp_path / "a")["checkpoint"] == "last"
    assert export_run(run, tmp_path / "b", "best")["step"] == 3


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_the_folder_and_files_get_the_usual_permissions(tmp_path, umask):
    run = fake_run(tmp_path / "run")
    old = os.umask(umask)
    try:
        export_run(run, tmp_path / "out")
        (tmp_path / "plain").mkdir()
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(os.stat(p).st_mode)  # noqa: E731
    assert mode(tmp_path / "out") == mode(tmp_path / "plain") == 0o777 & ~umask
    assert mode(tmp_path / "out" / "vocab" / "src.txt") == 0o666 & ~umask


def test_only_an_absent_or_empty_folder_is_written(tmp_path):
    run = fake_run(tmp_path / "run")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "mine.txt").write_text("x")
    with pytest.raises(StructseqError, match="full: exists and is not an empty folder"):
        export_run(run, tmp_path / "full")
    assert sorted(p.name for p in (tmp_path / "full").iterdir()) == ["mine.txt"]
    (tmp_path / "file").write_text("x")
    with pytest.raises(StructseqError, match="not an empty folder"):
        export_run(run, tmp_path / "file")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".config.yaml.x1.tmp").write_text("left by a killed export")
    export_run(run, tmp_path / "empty")
    assert not list((tmp_path / "empty").glob(".*.tmp"))


@pytest.mark.parametrize("name", ["../victim", "ABSOLUTE", "a/b", ".hidden"])
def test_a_vocabulary_name_never_becomes_a_path(tmp_path, name):
    name = str(tmp_path / "victim") if name == "ABSOLUTE" else name
    run = fake_run(tmp_path / "run", vocab_name=name)
    with pytest.raises(StructseqError, match="not a plain name"):
        export_run(run, tmp_path / "out" / "x")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob("**/victim.txt"))


def test_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    import structseq.export as export

    run = fake_run(tmp_path / "run")

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "write_config", full)
    (tmp_path / "out").mkdir()
    with pytest.raises(StructseqError, match=r"out/x: the export could not be written \(OSError"):
        export_run(run, tmp_path / "out" / "x")
    assert list((tmp_path / "out").iterdir()) == []
