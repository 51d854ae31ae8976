"""What `train.loggers` promises: every logger is closed even when one fails to close (the first error is
raised after), a logger that fails to open closes the ones already open, metrics.jsonl lines start with the
step and are on disk before close, curves get only finite numbers (not bools) under their tags, and a resumed
run tells TensorBoard to purge the events after its checkpoint's step."""

import json
import math
import sys
import types

import pytest

from structseq.run.layout import tensorboard_dir
from structseq.train import loggers as lg


class Fake:
    def __init__(self, fail=None):
        self.fail, self.closed, self.logged = fail, False, []

    def log(self, step, scalars):
        self.logged.append((step, dict(scalars)))

    def close(self):
        self.closed = True
        if self.fail:
            raise self.fail


def test_close_closes_every_logger_and_raises_the_first_failure():
    a, b, c = Fake(RuntimeError("a broke")), Fake(), Fake(ValueError("c broke"))
    group = lg.Loggers([a, b, c])
    group.log(3, {"loss": 1.0})
    assert [x.logged for x in (a, b, c)] == [[(3, {"loss": 1.0})]] * 3
    with pytest.raises(RuntimeError, match="a broke"):
        group.close()
    assert a.closed and b.closed and c.closed


def test_a_logger_that_fails_to_open_closes_the_open_ones(tmp_path, monkeypatch):
    opened = []
    real = lg.JsonlLogger

    class Recording(real):
        def __init__(self, path):
            super().__init__(path)
            opened.append(self)

    def broken(*a, **k):
        raise OSError("read-only tensorboard folder")

    monkeypatch.setattr(lg, "JsonlLogger", Recording)
    monkeypatch.setattr(lg, "TensorBoardLogger", broken)
    with pytest.raises(OSError, match="read-only"):
        lg.open_loggers(tmp_path, {"train": {"tensorboard": True}})
    assert len(opened) == 1 and opened[0].file.closed


def test_jsonl_records_start_with_the_step_and_are_flushed(tmp_path):
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 3.0}\n')
    group = lg.open_loggers(tmp_path, {"train": {}})
    group.log(2, {"loss": 2.5, "lr": 0.1})
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()  # before close: already on disk
    assert [json.loads(x) for x in lines] == [{"step": 1, "loss": 3.0}, {"step": 2, "loss": 2.5, "lr": 0.1}]
    assert lines[1].startswith('{"step": 2')
    group.close()


def test_curves_get_finite_numbers_under_their_tags():
    record = {"loss": 2, "lr": 0.5, "valid_bleu": 3.5, "best": 4.0, "skip": True, "nan": math.nan, "s": "x"}
    assert lg.numbers(record) == {"train/loss": 2.0, "train/lr": 0.5, "valid/bleu": 3.5, "valid/best": 4.0}
    assert lg.numbers({"inf": math.inf}) == {}
    assert lg.tag("valid_loss") == "valid/loss" and lg.tag("grad_norm") == "train/grad_norm"


def test_a_resumed_run_purges_tensorboard_events_after_its_checkpoint(tmp_path, monkeypatch):
    seen = {}

    class Writer:
        def __init__(self, log_dir, purge_step):
            seen.update(log_dir=log_dir, purge_step=purge_step)
            self.scalars = seen.setdefault("scalars", [])

        def add_scalar(self, name, value, global_step):
            self.scalars.append((name, value, global_step))

        def flush(self):
            pass

        def close(self):
            seen["closed"] = True

    fake = types.ModuleType("torch.utils.tensorboard")
    fake.SummaryWriter = Writer
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", fake)
    group = lg.open_loggers(tmp_path, {"train": {"tensorboard": True}}, start_step=40)
    group.log(41, {"loss": 1.5, "flag": False})
    group.close()
    assert seen["purge_step"] == 41 and seen["log_dir"] == str(tensorboard_dir(tmp_path))
    assert seen["scalars"] == [("train/loss", 1.5, 41)] and seen["closed"]


def test_a_logger_whose_package_is_missing_is_a_config_error(monkeypatch):
    from structseq.errors import ConfigError

    monkeypatch.setattr(lg, "_installed", lambda module: False)
    cfg = types.SimpleNamespace(tensorboard=False, wandb=True)
    with pytest.raises(ConfigError, match="'train.wandb'"):
        lg.check_loggers(cfg)
    lg.check_loggers(types.SimpleNamespace(tensorboard=False, wandb=False))
