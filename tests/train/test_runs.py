"""Issue 12, wired into training: the run-directory lock, no overwriting, stale temporaries and metrics on
resume, the recorded stop reason, SIGTERM, the `--resume` rules, `data.max_length`, and loading runs."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
import torch
from typer.testing import CliRunner

from structseq import api
from structseq.cli import app
from structseq.config import config_from_dict
from structseq.errors import ConfigError, DataError, StructseqError
from structseq.run.checkpoint import load_checkpoint, save_checkpoint
from structseq.run.directory import RunDirError, RunLock
from structseq.train.loop import Trainer


def toy_tsv(folder, n=40, name="toy.tsv"):
    rng = random.Random(0)
    lines = []
    for _ in range(n):
        toks = [rng.choice("abcdef") for _ in range(rng.randint(1, 5))]
        lines.append(" ".join(toks) + "\t" + " ".join(reversed(toks)).upper())
    path = folder / name
    path.write_text("\n".join(lines) + "\n")
    return path


def toy_dict(path, **train):
    return {
        "data": {"dataset": "files", "train": str(path), "valid": str(path), "test": [str(path)]},
        "model": {"arch": "lstm", "embed_dim": 8, "hidden_dim": 16, "layers": 1, "dropout": 0.0},
        "optim": {"lr": 0.01, "schedule": "constant", "max_tokens": 60},
        "train": {"max_steps": 6, "valid_every": 3, "log_every": 1, "seed": 3, "threads": 1, **train},
    }


def toy_config(path, **train):
    return config_from_dict(toy_dict(path, **train))


def steps(run_dir):
    return [
        json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines() if "loss" in json.loads(x)
    ]


def interrupt_at(step):
    holder = {}

    def on_update(s):
        if s == step:
            holder["trainer"].request_stop()

    return holder, on_update


def interrupted_run(data, run_dir, at, **train):
    holder, on_update = interrupt_at(at)
    trainer = Trainer(toy_config(data, **train), run_dir, show_progress=False, on_update=on_update)
    holder["trainer"] = trainer
    return trainer.run()


# ---------------------------------------------------------------- the lock, and files a run did not create


def test_a_second_run_into_a_locked_directory_is_refused_and_writes_nothing(tmp_path):
    data, run = toy_tsv(tmp_path), tmp_path / "run"
    with RunLock(run):  # another run holds the directory
        with pytest.raises(RunDirError, match=rf"{run} is in use by another run \(pid {os.getpid()}"):
            Trainer(toy_config(data), run, show_progress=False).run()
    assert sorted(p.name for p in run.iterdir()) == []
    summary = Trainer(toy_config(data), run, show_progress=False).run()  # free again: the run goes ahead
    assert summary["stopped"] == "max_steps" and not (run / ".lock").exists()


def test_the_lock_is_held_for_the_life_of_the_run(tmp_path):
    data, run = toy_tsv(tmp_path), tmp_path / "run"
    seen = []

    def on_update(step):
        with pytest.raises(RunDirError, match="in use by another run"):
            RunLock(run).acquire()
        seen.append(step)

    Trainer(toy_config(data, max_steps=2), run, show_progress=False, on_update=on_update).run()
    assert seen == [1, 2]
    RunLock(run).acquire().release()


def test_a_new_run_never_overwrites_a_users_config_yaml(tmp_path):
    data = toy_tsv(tmp_path)
    mine = tmp_path / "config.yaml"
    mine.write_text("# my own notes\n")
    with pytest.raises(RunDirError, match="holds config.yaml, which no run created"):
        Trainer(toy_config(data), tmp_path, show_progress=False).run()
    assert mine.read_text() == "# my own notes\n" and not (tmp_path / "checkpoints").exists()


def test_out_naming_an_existing_file_is_a_clear_error(tmp_path):
    data = toy_tsv(tmp_path)
    with pytest.raises(RunDirError, match="is an existing file, not a run directory"):
        Trainer(toy_config(data), data, show_progress=False)


# ---------------------------------------------------------------- resuming: stale files, stop reasons, finished runs


def test_resume_removes_stale_temporaries_and_cuts_metrics_back_to_the_checkpoint(tmp_path):
    data, run = toy_tsv(tmp_path), tmp_path / "run"
    assert interrupted_run(data, run, 4)["steps"] == 4
    # a kill during a later save, after the log had gone on to update 5
    (run / "checkpoints" / ".last.pt.x1y2.tmp").write_bytes(b"half a checkpoint")
    with open(run / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 5, "loss": 1.0, "lr": 0.01, "tokens_per_s": 1.0, "epoch": 0}) + "\n")
        f.write('{"step": 6, "lo')  # torn by the kill
    Trainer(toy_config(data), run, resume=True, show_progress=False).run()
    assert not list((run / "checkpoints").glob("*.tmp"))
    assert steps(run) == [1, 2, 3, 4, 5, 6]


def test_each_checkpoint_records_why_the_run_stopped(tmp_path):
    data = toy_tsv(tmp_path)
    interrupted_run(data, tmp_path / "a", 2)
    assert load_checkpoint(tmp_path / "a/checkpoints/last.pt")["progress"]["stopped"] == "interrupted"
    Trainer(toy_config(data), tmp_path / "a", resume=True, show_progress=False).run()
    assert load_checkpoint(tmp_path / "a/checkpoints/last.pt")["progress"]["stopped"] == "max_steps"


def test_resuming_a_run_that_stopped_early_changes_nothing(tmp_path):
    data, run = toy_tsv(tmp_path), tmp_path / "run"
    # exact match stays 0 on this tiny budget: the second validation is no better, patience 1 stops the run
    summary = Trainer(
        toy_config(data, max_steps=30, valid_every=2, patience=1, valid_metric="exact_match"), run, show_progress=False
    ).run()
    assert summary["stopped"] == "early_stopping" and summary["steps"] == 4
    assert load_checkpoint(run / "checkpoints/last.pt")["progress"]["stopped"] == "early_stopping"
    before = {p.name: p.read_bytes() for p in [run / "metrics.jsonl", *(run / "checkpoints").iterdir()]}
    for again in (
        api.resume(run, show_progress=False),
        Trainer(
            toy_config(data, max_steps=30, valid_every=2, patience=1, valid_metric="exact_match"),
            run,
            resume=True,
            show_progress=False,
        ).run(),
    ):
        assert again["stopped"] == "already_finished" and again["reason"] == "early_stopping"
    assert before == {p.name: p.read_bytes() for p in [run / "metrics.jsonl", *(run / "checkpoints").iterdir()]}


def test_resume_extends_max_steps_only_and_records_it(tmp_path):
    data, run = toy_tsv(tmp_path), tmp_path / "run"
    Trainer(toy_config(data), run, show_progress=False).run()
    last = (run / "checkpoints/last.pt").read_bytes()
    assert api.resume(run, show_progress=False)["reason"] == "max_steps"  # finished: nothing changed
    assert (run / "checkpoints/last.pt").read_bytes() == last and not (run / "config-history.jsonl").exists()
    for overrides, message in (
        (["optim.lr=1"], "'optim.lr' cannot be changed"),
        (["train.seed=4"], "'train.seed' cannot be changed"),
        (["train.max_steps=4"], "can only extend a run's budget \\(6\\), not cut it to 4"),
        (["train.max_steps=0"], "'train.max_steps' must be >= 1"),
    ):
        with pytest.raises(ConfigError, match=message):
            api.resume(run, overrides=overrides, show_progress=False)
    summary = api.resume(run, overrides=["train.max_steps=8"], show_progress=False)
    assert summary["stopped"] == "max_steps" and summary["steps"] == 8
    (record,) = [json.loads(x) for x in (run / "config-history.jsonl").read_text().splitlines()]
    assert record["step"] == 6 and record["changes"] == {"train.max_steps": [6, 8]}
    assert "max_steps: 8" in (run / "config.yaml").read_text()
    assert load_checkpoint(run / "checkpoints/last.pt")["config"]["train"]["max_steps"] == 8
    assert steps(run) == list(range(1, 9))


@pytest.mark.parametrize(
    "args, message",
    [
        (["CONFIG"], "a CONFIG argument cannot be combined with it"),
        (["--seed", "4"], "--seed cannot be combined with it"),
        (["--set", "optim.lr=1"], "'optim.lr' cannot be changed"),
    ],
)
def test_cli_resume_rejects_a_config_seed_or_other_overrides(tmp_path, args, message):
    data, run = toy_tsv(tmp_path), tmp_path / "run"
    interrupted_run(data, run, 2)
    last = (run / "checkpoints/last.pt").read_bytes()
    args = [str(data) if a == "CONFIG" else a for a in args]
    result = CliRunner().invoke(app, ["train", *args, "--resume", str(run), "-q"])
    assert isinstance(result.exception, StructseqError), result.output
    assert message in str(result.exception)
    assert (run / "checkpoints/last.pt").read_bytes() == last


def test_sigterm_finishes_the_update_and_saves(tmp_path):
    data, run = toy_tsv(tmp_path), tmp_path / "run"
    unhandled = []
    previous = signal.signal(signal.SIGTERM, lambda *a: unhandled.append(1))  # what a run must replace
    try:

        def on_update(step):
            if step == 2:
                os.kill(os.getpid(), signal.SIGTERM)

        summary = Trainer(toy_config(data), run, show_progress=False, on_update=on_update).run()
        handler_after = signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not unhandled and summary["stopped"] == "interrupted" and summary["signal"] == "SIGTERM"
    assert summary["steps"] == 2 and load_checkpoint(run / "checkpoints/last.pt")["progress"]["step"] == 2
    assert handler_after is not None and handler_after not in (signal.SIG_DFL,)  # the test's handler is back


def test_cli_sigterm_saves_and_exits_143(tmp_path):
    data = toy_tsv(tmp_path)
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(toy_dict(data, max_steps=100000, valid_every=0)))
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "structseq.cli", "train", str(cfg), "-o", str(run), "-q"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 120
        while not ((run / "metrics.jsonl").exists() and (run / "metrics.jsonl").read_text().count("\n") >= 2):
            assert proc.poll() is None and time.time() < deadline, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "SIGTERM: finishing this update" in err and f"--resume {run}" in " ".join(out.split())
    progress = load_checkpoint(run / "checkpoints/last.pt")["progress"]
    assert progress["stopped"] == "interrupted" and progress["step"] >= 2 and steps(run)[-1] <= progress["step"]


# ---------------------------------------------------------------- data.max_length


def long_data(tmp_path):
    path = tmp_path / "long.tsv"
    path.write_text("a b\tB A\n" + " ".join(["a"] * 9) + "\tA\nc\tC\n" + "a\t" + " ".join(["A"] * 12) + "\n")
    return path


def test_training_skips_over_long_examples_with_a_counted_warning(tmp_path):
    path = long_data(tmp_path)
    cfg = config_from_dict(
        {**toy_dict(path), "data": {"dataset": "files", "train": str(path), "valid": str(path), "max_length": 5}}
    )
    with pytest.warns(
        UserWarning, match=rf"skipped 4 examples longer than data.max_length 5 tokens \(first: {path}:2\)"
    ):
        trainer = Trainer(cfg, tmp_path / "run", show_progress=False)
    assert [e.source for e in trainer.data.train] == [("a", "b"), ("c",)] and trainer.data.skipped == 4
    cfg.data.too_long = "error"
    with pytest.raises(DataError, match=rf"{path}:2: source has 9 tokens, more than the maximum length 5"):
        Trainer(cfg, tmp_path / "run2", show_progress=False)


def test_evaluation_and_prediction_over_max_length_are_errors_naming_the_line(tmp_path):
    data, run = toy_tsv(tmp_path), tmp_path / "run"
    Trainer(toy_config(data), run, show_progress=False).run()
    loaded = api.load_run(run)
    loaded.config.data.max_length = 5
    with pytest.raises(DataError, match=rf"{long_data(tmp_path)}:2: source has 9 tokens, more than the maximum"):
        loaded.evaluate(str(long_data(tmp_path)))
    with pytest.raises(DataError, match=r"<stdin>:2: source has 6 tokens"):
        loaded.predict(["a b", "a a a a a a"], where="<stdin>")
    with pytest.raises(DataError, match=r"<input>:1: reserved token '</s>' in the source"):
        loaded.predict(["a </s> b"])


# ---------------------------------------------------------------- loading a run, evaluation files


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trained")
    data = toy_tsv(folder)
    Trainer(toy_config(data), folder / "run", show_progress=False).run()
    return folder / "run", data


def copy_run(trained, tmp_path):
    import shutil

    return shutil.copytree(trained[0], tmp_path / "run")


@pytest.mark.parametrize(
    "content, message",
    [
        (None, r"config.yaml: missing; is .* a training run directory"),
        (b"train: [\n", r"config.yaml:2: not valid YAML"),
        (b"\xff\xfe", r"config.yaml:1: not UTF-8"),
        (b"- 1\n", r"config.yaml: not a run's config"),
        (b"train: {eval_checkpoint: [1]}\n", r"config.yaml: 'train.eval_checkpoint' must be best or last"),
    ],
)
def test_a_missing_or_garbage_run_config_names_the_file(trained, tmp_path, content, message):
    run = copy_run(trained, tmp_path)
    if content is None:
        (run / "config.yaml").unlink()
    else:
        (run / "config.yaml").write_bytes(content)
    with pytest.raises(StructseqError, match=message):
        api.load_run(run)
    assert api.load_run(run, "last").checkpoint == "last"  # an explicit checkpoint needs no config.yaml


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: {"format": 2, "a": 1}, r"best.pt: checkpoint lacks 'model'"),
        (
            lambda c: {**c, "model": {k: v[..., :1] for k, v in c["model"].items()}},
            r"best.pt: the parameters do not fit",
        ),
        (lambda c: {**c, "vocab": {"src": c["vocab"]["src"]}}, r"best.pt: the checkpoint's vocabularies do not fit"),
        (
            lambda c: {**c, "config": {**c["config"], "optim": {"lr": -1}}},
            r"best.pt: the checkpoint's config: 'optim.lr'",
        ),
    ],
)
def test_a_checkpoint_of_the_wrong_layout_names_the_file(trained, tmp_path, edit, message):
    run = copy_run(trained, tmp_path)
    path = run / "checkpoints/best.pt"
    save_checkpoint(edit(load_checkpoint(path)), path)
    with pytest.raises(StructseqError, match=message):
        api.load_run(run, "best")


def test_a_corrupt_best_checkpoint_is_never_replaced_by_last(trained, tmp_path):
    run = copy_run(trained, tmp_path)
    raw = bytearray((run / "checkpoints/best.pt").read_bytes())
    raw[len(raw) // 2] ^= 0x01
    (run / "checkpoints/best.pt").write_bytes(bytes(raw))
    with pytest.raises(StructseqError, match="best.pt"):
        api.load_run(run)


def test_empty_evaluation_file_and_missing_file_say_what_is_wrong(trained, tmp_path):
    run = api.load_run(trained[0])
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    with pytest.raises(StructseqError, match=rf"{empty}: no examples to evaluate \(an empty file\?\)"):
        run.evaluate(str(empty))
    with pytest.raises(DataError, match="nosuch/test.tsv: file not found"):
        run.evaluate("nosuch/test.tsv")
    with pytest.raises(ConfigError, match="'--beam' must be >= 1, got 0"):
        run.evaluate(str(trained[1]), beam=0)


def test_evaluate_split_file_on_a_run_of_a_registered_dataset(trained, tmp_path):
    run = api.load_run(trained[0])
    run.config.data.dataset = "colors"  # as if trained on a registered dataset
    out = tmp_path / "mine.tsv"
    out.write_text("a b\tB A\nc\tC\n")
    dataset, name, examples = run.load_split(str(out))
    assert (dataset, name) == ("colors", str(out)) and [e.target for e in examples] == [("B", "A"), ("C",)]
    assert run.evaluate(str(out), write_predictions=False)["n"] == 2
    with pytest.raises(DataError, match="missing.tsv: file not found"):
        run.load_split(str(tmp_path / "missing.tsv"))


def test_predict_reads_stdin_strictly(trained):
    exe = [sys.executable, "-m", "structseq.cli", "predict", str(trained[0])]
    r = subprocess.run(exe, input=b"\xef\xbb\xbfa b\nc\n", capture_output=True)
    assert r.returncode == 0 and len(r.stdout.decode().splitlines()) == 2, r.stderr
    r = subprocess.run(exe, input=b"a b\ncaf\xe9\n", capture_output=True)
    assert r.returncode == 2 and "<stdin>:2: not UTF-8 (byte 0xe9)" in r.stderr.decode()
    assert torch.__version__  # the subprocesses above ran the installed package
