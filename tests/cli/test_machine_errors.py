"""A user's mistake or the machine's state is one line `error: ...` and exit 2, never a traceback (issue 43,
section 4): an infinite sampling temperature, a plugin module that raises, an unwritable TensorBoard folder."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import structseq
from structseq.decode.sampling import Sampling
from structseq.errors import ConfigError
from tests.fixtures.cli_run import one_line_error, run_main


@pytest.mark.parametrize("t", [float("inf"), float("nan"), 0.0, -1.0])
def test_a_temperature_that_is_not_a_positive_finite_number_is_refused(t):
    """--temperature inf divided every log-probability into 0 or NaN (d15a89c: a traceback in the draw)."""
    with pytest.raises(ConfigError, match=r"'--temperature' must be > 0 and finite"):
        Sampling(temperature=t)
    assert Sampling(temperature=1e6).temperature == 1e6  # large but finite: nearly uniform, allowed


def test_a_plugin_module_that_raises_is_one_line_like_a_plugin_file(tmp_path):
    """STRUCTSEQ_PLUGINS naming a module whose import raises RuntimeError: d15a89c printed the plugin's
    traceback (a .py path gave one line); now both are one line naming the plugin."""
    (tmp_path / "raising_plugin.py").write_text("raise RuntimeError('the plugin needs a GPU')\n")
    env = {
        **os.environ,
        "STRUCTSEQ_PLUGINS": "raising_plugin",
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(structseq.__file__).parents[1])]),
    }
    out = subprocess.run(
        [sys.executable, "-m", "structseq.cli", "config", "lstm"], capture_output=True, text=True, env=env, timeout=120
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    lines = [x for x in out.stderr.splitlines() if x.strip()]
    assert lines == [
        "error: $STRUCTSEQ_PLUGINS: plugin raising_plugin failed to load: RuntimeError: the plugin needs a GPU"
    ]


def test_an_unwritable_tensorboard_folder_is_one_line_not_a_thread_traceback(tmp_path, monkeypatch, capsys):
    """A read-only RUN/tensorboard: d15a89c printed "Exception in thread ..." from the SummaryWriter's own
    thread. Now the folder is tried before the writer starts: one line naming it and the key. (Root may write
    anywhere, so the refusal of the write is simulated there.)"""
    from tests.fixtures.toy import toy_tsv

    pytest.importorskip("tensorboard")
    if os.geteuid() == 0:

        def refuse(*args, dir=None, **kwargs):
            raise PermissionError(13, "Permission denied", str(dir))

        monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    else:
        (tmp_path / "run" / "tensorboard").mkdir(parents=True)
        (tmp_path / "run" / "tensorboard").chmod(0o555)
    data = toy_tsv(tmp_path)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        f"data: {{dataset: files, train: {data}, valid: {data}, test: [{data}]}}\n"
        "model: {arch: lstm, embed_dim: 8, hidden_dim: 8, layers: 1}\n"
        "train: {max_steps: 1, threads: 1, tensorboard: true}\n"
    )
    code, err = run_main(monkeypatch, capsys, "train", cfg, "-o", tmp_path / "run", "-q")
    one_line_error(code, err, "'train.tensorboard': cannot write event files in", "tensorboard", "Permission denied")
    assert "Exception in thread" not in err
