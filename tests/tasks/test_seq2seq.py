"""Seq2SeqTask's validation seam: valid_loss is computed by the task's own `loss`, so a subclass or plugin that
overrides `loss` is validated (early stopping, best checkpoint) by the loss it trains with."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from structseq.cli import app
from tests.fixtures.toy import toy_config, toy_tsv


def test_validate_goes_through_the_tasks_own_loss(tmp_path):
    """A doubled `loss` doubles valid_loss (6eedc77 computed validation's NLL beside `loss`: a plugin's loss was
    ignored there; it holds at c780042 and after the fix)."""
    from structseq.api import load_run
    from structseq.data.readers import read_file

    data = toy_tsv(tmp_path, n=20)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(toy_config(data, max_steps=2, valid_every=2).to_dict()))
    r = CliRunner().invoke(app, ["train", str(cfg), "-o", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    run = load_run(tmp_path / "run")
    task, examples = run.task, read_file(str(data))[:6]
    plain = task.validate(run.model, examples, run.vocabs)["valid_loss"]
    original = task.loss

    def doubled(model, batch, label_smoothing):
        loss, nll, n = original(model, batch, label_smoothing)
        return loss * 2, nll * 2, n

    task.loss = doubled
    assert plain > 0
    assert abs(task.validate(run.model, examples, run.vocabs)["valid_loss"] - 2 * plain) < 1e-4
