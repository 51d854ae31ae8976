"""Where a run's training and validation records go: metrics.jsonl always, TensorBoard and Weights & Biases
when the config asks (`train.tensorboard`, `train.wandb`).

Every logger has the same two methods, `log(step, scalars)` and `close()`; `open_loggers` builds the ones a
run's config names, behind one `Loggers` that the training loop writes to. A record is what metrics.jsonl
holds on one line, less its `step`: a training record (`loss`, `lr`, `tokens_per_s`, `epoch`, and
`grad_norm` when `optim.clip_norm` clips) or a validation record (`valid_<metric>` for every metric the task
validates, and `best`). TensorBoard and W&B get its numbers under the tags of `tag`: `train/loss`,
`train/lr`, ..., `valid/loss`, `valid/bleu`, `valid/best`.

The optional packages are imported only when asked for; a run that asks for one that is not installed is a
ConfigError before training starts (`check_loggers`). Nothing of this changes a run that asks for neither.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from structseq.errors import ConfigError
from structseq.run.layout import metrics_file, tensorboard_dir


class Logger(Protocol):
    def log(self, step: int, scalars: Mapping[str, Any]) -> None: ...

    def close(self) -> None: ...


def tag(key: str) -> str:
    """The TensorBoard / W&B tag of a record key: `valid_bleu` -> `valid/bleu`, `best` -> `valid/best`,
    anything else (`loss`, `lr`, `tokens_per_s`, `grad_norm`, `epoch`) -> `train/<key>`."""
    if key.startswith("valid_"):
        return "valid/" + key[len("valid_") :]
    if key == "best":
        return "valid/best"
    return "train/" + key


def numbers(scalars: Mapping[str, Any]) -> dict[str, float]:
    """The entries of a record that a curve can show: finite ints and floats (not bools), by their tags."""
    return {
        tag(k): float(v)
        for k, v in scalars.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    }


class JsonlLogger:
    """metrics.jsonl: one JSON line per record, `step` first, flushed at once (what `structseq plot` reads)."""

    def __init__(self, path: str | Path):
        self.file = open(path, "a", encoding="utf-8")

    def log(self, step: int, scalars: Mapping[str, Any]) -> None:
        self.file.write(json.dumps({"step": step, **scalars}) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


class TensorBoardLogger:
    """TensorBoard event files in `log_dir` through `torch.utils.tensorboard.SummaryWriter`.

    `start_step`: the step the run starts from (a resumed run's checkpoint). TensorBoard is told to purge the
    events of earlier files past it (`purge_step`), as metrics.jsonl is cut back to the checkpoint's step: the
    updates a killed run logged after its last checkpoint are redone, and shown once."""

    def __init__(self, log_dir: str | Path, start_step: int = 0):
        from torch.utils.tensorboard import SummaryWriter

        log_dir = Path(log_dir)
        try:  # here, not in the writer's own thread (a traceback there, and a run that logs nothing)
            log_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=log_dir):
                pass
        except OSError as e:
            raise ConfigError(
                f"'train.tensorboard': cannot write event files in {log_dir} ({e.strerror or e}); make it "
                "writable, or set train.tensorboard: false"
            ) from None
        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=start_step + 1)

    def log(self, step: int, scalars: Mapping[str, Any]) -> None:
        for name, value in numbers(scalars).items():
            self.writer.add_scalar(name, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class WandbLogger:
    """A Weights & Biases run in the run directory (`RUN/wandb`), named after it, holding the run's config.
    The mode, project and entity are wandb's own environment variables (WANDB_MODE=offline: no network);
    the project defaults to `structseq`."""

    def __init__(self, run_dir: str | Path, config: Mapping[str, Any]):
        import wandb

        run_dir = Path(run_dir)
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", "structseq"),
            dir=str(run_dir),
            name=run_dir.resolve().name,
            config=dict(config),
        )

    def log(self, step: int, scalars: Mapping[str, Any]) -> None:
        self.run.log(numbers(scalars), step=step)

    def close(self) -> None:
        self.run.finish()


class Loggers:
    """Several loggers written as one; `close` closes each even when one fails."""

    def __init__(self, loggers: list[Logger]):
        self.loggers = loggers

    def log(self, step: int, scalars: Mapping[str, Any]) -> None:
        for logger in self.loggers:
            logger.log(step, scalars)

    def close(self) -> None:
        errors = []
        for logger in self.loggers:
            try:
                logger.close()
            except Exception as e:  # noqa: BLE001 - close the others, then raise the first
                errors.append(e)
        if errors:
            raise errors[0]


def _installed(module: str) -> bool:
    if sys.modules.get(module) is not None:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def check_loggers(train_cfg) -> None:
    """A ConfigError naming the key when the config asks for a logger whose package is not installed."""
    if train_cfg.tensorboard and not _installed("tensorboard"):
        raise ConfigError(
            "'train.tensorboard': the `tensorboard` package is not installed (torch's "
            "SummaryWriter needs it): pip install tensorboard, or pip install 'structseq[logging]'"
        )
    if train_cfg.wandb and not _installed("wandb"):
        raise ConfigError(
            "'train.wandb': the `wandb` package is not installed: pip install wandb (set "
            "WANDB_MODE=offline to log without network), or set train.wandb to false"
        )


def open_loggers(run_dir: str | Path, config: Mapping[str, Any], start_step: int = 0) -> Loggers:
    """The loggers a run's config (`config`, as a dict) names: metrics.jsonl always (appended to), then
    TensorBoard and W&B when asked for. A logger that fails to open closes the ones already open."""
    run_dir = Path(run_dir)
    train = config.get("train", {})
    opened: list[Logger] = [JsonlLogger(metrics_file(run_dir))]
    try:
        if train.get("tensorboard"):
            opened.append(TensorBoardLogger(tensorboard_dir(run_dir), start_step))
        if train.get("wandb"):
            opened.append(WandbLogger(run_dir, config))
    except BaseException:
        Loggers(opened).close()
        raise
    return Loggers(opened)


def close_quietly_on_error(log) -> None:
    """Close the loggers; while an error is on its way out (a diverged loss, Ctrl-C), a logger that fails to
    close (e.g. `wandb.finish`) only warns, so that it cannot hide that error."""
    import sys
    import warnings

    if sys.exc_info()[1] is None:
        log.close()
        return
    try:
        log.close()
    except Exception as e:  # noqa: BLE001 - reported, the error in flight wins
        warnings.warn(f"closing the training loggers failed: {type(e).__name__}: {e}", stacklevel=2)


def install_stop_handlers(stopping, stop) -> dict:
    """First Ctrl-C or SIGTERM: `stop(signum)`, so the loop finishes this update, saves and returns (said on
    stderr); a second, while `stopping()`, aborts at once. Returns the previous handlers (none off the main
    thread, where signals cannot be handled)."""
    import signal
    import sys
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}

    def handler(signum, frame):
        if stopping():
            raise KeyboardInterrupt
        name = signal.Signals(signum).name
        print(
            f"\n{name}: finishing this update and saving checkpoints/last.pt "
            f"({'Ctrl-C' if signum == signal.SIGINT else name} again aborts)",
            file=sys.stderr,
            flush=True,
        )
        stop(signum)

    return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
