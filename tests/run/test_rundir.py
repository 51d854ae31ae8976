"""What `run.directory` promises: one run at a time (a second lock names the owner; a released lock is free
again), a new run refuses a folder holding a checkpoint or files no run created (naming them) but replaces the
leftovers of its own kind of folder, only checkpoint temporaries are cleaned, metrics.jsonl is cut back to
exactly the checkpoint's step (torn lines dropped), and resuming on changed or other data files is refused
naming the file and both hashes."""

import json
import os

import pytest

from structseq.outputs import file_digest
from structseq.run.directory import (
    MARKER,
    RunDirError,
    RunLock,
    check_data_files,
    clean_temporaries,
    prepare_new,
    truncate_metrics,
    write_data_files,
)
from structseq.run.saved_config import read_run_config


def test_one_run_at_a_time_and_a_released_lock_is_free(tmp_path):
    run = tmp_path / "run"
    with RunLock(run) as lock:
        assert lock.held
        with pytest.raises(RunDirError, match=rf"in use by another run \(pid {os.getpid()} on "):
            RunLock(run).acquire()
    assert not (run / ".lock").exists()
    again = RunLock(run).acquire()
    again.release()
    again.release()  # twice: harmless
    with pytest.raises(RunDirError, match="existing file"):
        (tmp_path / "file").write_text("x")
        RunLock(tmp_path / "file").acquire()


def test_a_new_run_refuses_checkpoints_and_foreign_files(tmp_path):
    (tmp_path / "a" / "checkpoints").mkdir(parents=True)
    (tmp_path / "a" / "checkpoints" / "last.pt").write_bytes(b"x")
    with pytest.raises(RunDirError, match="already holds a run; use --resume"):
        prepare_new(tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "config.yaml").write_text("mine: 1\n")
    (tmp_path / "b" / "metrics.jsonl").write_text("{}\n")
    with pytest.raises(RunDirError, match="holds config.yaml, metrics.jsonl, which no run created"):
        prepare_new(tmp_path / "b")
    assert (tmp_path / "b" / "config.yaml").read_text() == "mine: 1\n"
    (tmp_path / "b" / "notes.txt").write_text("x")
    (tmp_path / "b" / "config.yaml").unlink()
    (tmp_path / "b" / "metrics.jsonl").unlink()
    prepare_new(tmp_path / "b")  # other files are the user's business
    assert (tmp_path / "b" / MARKER).exists() and (tmp_path / "b" / "notes.txt").exists()


def test_an_existing_run_is_refused_before_any_data_is_read(tmp_path, monkeypatch, capsys):
    """`structseq train -o RUN` (and `api.train`) on a folder holding a run, or files no run created, is refused
    naming the folder before the config's data is read (`run.start.open_run_dir`): the data path here does not
    exist, so reading it first would make that the error (it did: the refusal came after the training data and
    vocabularies were loaded)."""
    from structseq import api
    from structseq.run.layout import checkpoint_file
    from tests.fixtures.cli_run import one_line_error, run_main

    missing = tmp_path / "nowhere" / "train.tsv"
    data = {"dataset": "files", "train": str(missing), "valid": str(missing), "test": [str(missing)]}
    model = {"arch": "transformer", "d_model": 16, "n_heads": 2, "ffn_dim": 32, "encoder_layers": 1}
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({"data": data, "model": {**model, "decoder_layers": 1}}))
    run = tmp_path / "run"
    checkpoint_file(run, "last").parent.mkdir(parents=True)
    checkpoint_file(run, "last").write_bytes(b"a run's checkpoint")
    code, err = run_main(monkeypatch, capsys, "train", config, "-o", run)
    one_line_error(code, err, str(run), "already holds a run")
    assert "nowhere" not in err
    with pytest.raises(RunDirError, match="already holds a run"):
        api.train(config, run, show_progress=False)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.yaml").write_text("mine: 1\n")
    code, err = run_main(monkeypatch, capsys, "train", config, "-o", mine)
    one_line_error(code, err, str(mine), "holds config.yaml, which no run created")
    assert "nowhere" not in err and (mine / "config.yaml").read_text() == "mine: 1\n"


def test_a_run_that_died_before_its_first_checkpoint_is_replaced(tmp_path):
    run = tmp_path / "run"
    prepare_new(run)
    for name in ("metrics.jsonl", "config-history.jsonl", "config.yaml"):
        (run / name).write_text("{}\n")
    (run / "checkpoints").mkdir()
    for name in (".last.pt.abc.tmp", ".best.pt.x1.tmp", "keep.tmp", "step3.pt"):
        (run / "checkpoints" / name).write_bytes(b"x")
    prepare_new(run)
    assert not (run / "metrics.jsonl").exists() and not (run / "config-history.jsonl").exists()
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["keep.tmp", "step3.pt"]
    assert clean_temporaries(run) == []


def test_metrics_are_cut_back_to_exactly_the_checkpoint_step(tmp_path):
    rows = [{"step": s, "loss": 1.0 / s} for s in (1, 2, 3, 4)] + [{"note": "no step"}]
    text = "".join(json.dumps(r) + "\n" for r in rows) + '{"step": 5, "loss"'  # a torn last line
    (tmp_path / "metrics.jsonl").write_text(text)
    assert truncate_metrics(tmp_path, 3) == 2
    kept = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r.get("step") for r in kept] == [1, 2, 3, None]
    assert truncate_metrics(tmp_path, 3) == 0 and truncate_metrics(tmp_path / "none", 1) == 0
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}')  # a whole record without its line end: torn
    assert truncate_metrics(tmp_path, 5) == 1


def test_resuming_on_changed_or_other_data_is_refused(tmp_path):
    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    a.write_text("x\ty\n")
    b.write_text("p\tq\n")
    write_data_files(tmp_path, [a, b])
    check_data_files(tmp_path, [a, b])
    old = file_digest(b)
    b.write_text("p\tQ\n")
    with pytest.raises(RunDirError, match=rf"b.tsv: the data changed since the run started: sha256 {old} at"):
        check_data_files(tmp_path, [a, b])
    with pytest.raises(RunDirError, match=r"read 2 data file\(s\) when it started .* but reads 1 now"):
        check_data_files(tmp_path, [a])
    with pytest.raises(RunDirError, match="reads 3 now"):
        check_data_files(tmp_path, [a, b, b])
    check_data_files(tmp_path / "older-run", [a])  # no record: not checked


def test_read_run_config_names_the_file(tmp_path):
    with pytest.raises(RunDirError, match="config.yaml: missing"):
        read_run_config(tmp_path)
    (tmp_path / "config.yaml").write_text("- a\n- b\n")
    with pytest.raises(RunDirError, match="expected a mapping of sections, found list"):
        read_run_config(tmp_path)
    (tmp_path / "config.yaml").write_text("a: 1\na: 2\n")
    with pytest.raises(RunDirError, match="config.yaml"):
        read_run_config(tmp_path)
