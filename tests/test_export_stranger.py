"""`export` and `average` with a stranger's run and a failing machine (issue 43, sections 1 and 4): no name
read from a checkpoint becomes a path, a full disk or `ulimit -f` is one line with nothing half-written left
behind, and a killed earlier attempt never blocks a retry."""

from __future__ import annotations

import os
import resource
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

from structseq.run.checkpoint import load_checkpoint, save_checkpoint
from tests.fixtures.cli_run import one_line_error, run_main


@contextmanager
def _file_size_limit(nbytes: int):
    """`ulimit -f`: writes past `nbytes` fail with EFBIG (Python ignores SIGXFSZ), as a full disk would."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """A tiny trained seq2seq run, with two kept step checkpoints (for `average`)."""
    from structseq.train.loop import Trainer
    from tests.fixtures.toy import toy_config, toy_tsv

    root = tmp_path_factory.mktemp("toy")
    cfg = toy_config(toy_tsv(root), max_steps=4, save_every=2, keep_last=2)
    Trainer(cfg, root / "run", show_progress=False).run()
    return root / "run"


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    return to


# ------------------------------------------------------------------ names from a checkpoint
@pytest.mark.parametrize("kind", ["relative", "absolute"])
def test_a_checkpoints_vocabulary_name_never_becomes_a_path(kind, toy_run, tmp_path, monkeypatch, capsys):
    """A checkpoint with a valid checksum whose vocabulary is named `../../victim` (or an absolute path): on
    d15a89c `export` wrote victim.txt outside OUT; now a one-line refusal naming the name, nothing written."""
    run = _copy(toy_run, tmp_path / "run")
    victim = tmp_path / "victim" if kind == "absolute" else tmp_path / "out" / "vocab" / ".." / ".." / "victim"
    name = str(tmp_path / "victim") if kind == "absolute" else "../../victim"
    for path in (run / "checkpoints").glob("*.pt"):
        ckpt = load_checkpoint(path)
        ckpt["vocab"] = {name if k == "tgt" else k: v for k, v in ckpt["vocab"].items()}
        save_checkpoint(ckpt, path)
    code, err = run_main(monkeypatch, capsys, "export", run, "-o", tmp_path / "out")
    one_line_error(code, err, "vocabulary name", repr(name))
    assert not Path(f"{victim}.txt").exists() and not (tmp_path / "victim.txt").exists()
    assert not (tmp_path / "out").exists()


def test_plain_names_pass_and_others_are_refused():
    from structseq.outputs import OutputError, plain_name

    for ok in ("src", "tgt", "words", "cat", "sym", "chars", "a.b", "x-1_y+2"):
        assert plain_name(ok, "name") == ok
    for bad in ("", ".", "..", "../x", "a/b", "/abs", ".hidden", "a..b", "a.", "a\\b", "a\nb", 3, None, "x" * 101):
        with pytest.raises(OutputError):
            plain_name(bad, "name")


# ------------------------------------------------------------------ a full disk, a killed attempt
def test_export_on_a_full_disk_is_one_line_leaves_nothing_and_a_retry_works(toy_run, tmp_path, monkeypatch, capsys):
    """`ulimit -f` during a structseq-folder export: on d15a89c torch's raw RuntimeError (inline_container.cc)
    and a half-written OUT that blocked a retry; now one line naming OUT, no OUT, no temporary left."""
    out = tmp_path / "out"
    with _file_size_limit(4096):
        code, err = run_main(monkeypatch, capsys, "export", toy_run, "-o", out)
    one_line_error(code, err, str(out), "disk full")
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    # what a killed export of d15a89c left inside OUT does not block the retry either
    out.mkdir()
    (out / ".last.pt.x1y2.tmp").write_bytes(b"partial")
    (tmp_path / f".{out.name}.k1ll3d.tmp").mkdir()  # a killed export's own folder beside OUT: left alone
    code, err = run_main(monkeypatch, capsys, "export", toy_run, "-o", out)
    assert code == 0, err
    assert sorted(p.name for p in out.rglob("*") if p.is_file()) == [
        "README.md",  # a Transformer's folder holds its transformers model too (tests/test_export_marian.py)
        "best.pt",
        "config.json",
        "config.yaml",
        "generation_config.json",
        "model.safetensors",
        "src.txt",
        "structseq-export.json",
        "tgt.txt",
        "vocab-src.json",
        "vocab-tgt.json",
    ]
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~mask  # as mkdir makes a folder, not mkdtemp's private one


def test_average_on_a_full_disk_is_one_line_leaves_nothing(toy_run, tmp_path, monkeypatch, capsys):
    run = _copy(toy_run, tmp_path / "run")
    before = sorted(p.name for p in (run / "checkpoints").iterdir())
    with _file_size_limit(30000):
        code, err = run_main(monkeypatch, capsys, "average", run, "--last", "2")
    one_line_error(code, err, "avg-last2.pt", "file size limit")
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == before
    (run / "checkpoints" / ".avg-last2.pt.k1ll3d.tmp").write_bytes(b"partial")  # a killed average's
    code, err = run_main(monkeypatch, capsys, "average", run, "--last", "2")
    assert code == 0, err
    assert load_checkpoint(run / "checkpoints" / "avg-last2.pt")["averaged"]["steps"] == [2, 4]


def test_huggingface_export_on_a_full_disk_is_one_line_leaves_nothing(tmp_path, monkeypatch, capsys):
    """An hf-seq2seq run's export (safetensors): on d15a89c a raw SafetensorError / RuntimeError, config.json
    left without weights and a retry refused as 'not an empty folder'; now one line, no OUT, and a retry works."""
    pytest.importorskip("transformers")
    from structseq import api
    from structseq.config import config_from_dict
    from structseq.testing.hf_tiny import tiny_bart
    from tests.tasks.test_hf_seq2seq import train_config

    base = tiny_bart(tmp_path / "base", d_model=16)
    api.train(config_from_dict(train_config(base, 1)), tmp_path / "run", show_progress=False)
    capsys.readouterr()  # tiny_bart's save_pretrained progress bar
    out = tmp_path / "exports" / "hf"
    with _file_size_limit(20000):
        code, err = run_main(monkeypatch, capsys, "export", tmp_path / "run", "-o", out)
    one_line_error(code, err, str(out), "file size limit")
    assert not out.parent.exists() or sorted(out.parent.iterdir()) == []
    code, err = run_main(monkeypatch, capsys, "export", tmp_path / "run", "-o", out)
    assert code == 0, err
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()
