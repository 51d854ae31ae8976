"""Where training stands (`Progress`, saved in every checkpoint), the watch on the loss, and the progress bar
(updates done, loss, learning rate and throughput on stderr)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import torch

from structseq.errors import DivergedError
from structseq.run.layout import checkpoint_file


class ProgressBar:
    """A rich progress bar with loss, lr and throughput; a line every 10 s when stderr is not a terminal;
    silent when disabled."""

    def __init__(self, total: int, done: int, enabled: bool):
        self.bar = None
        if enabled and sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(
                TextColumn("train"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[info]}"),
                transient=False,
            )
            self.task = self.bar.add_task("train", total=total, completed=done, info="")
            self.bar.start()
        elif enabled:
            self.last_print = 0.0

    def update(self, step: int, rec: dict) -> None:
        info = f"loss {rec['loss']:.3f} lr {rec['lr']:.2e} {rec['tokens_per_s']:.0f} tok/s"
        if self.bar is not None:
            self.bar.update(self.task, completed=step, info=info)
        elif hasattr(self, "last_print") and time.perf_counter() - self.last_print > 10:
            print(f"step {step}: {info}", file=sys.stderr, flush=True)
            self.last_print = time.perf_counter()

    def validation(self, line: str) -> None:
        """A validation's line (`validation_line`), printed above the bar, or as it is without one."""
        if self.bar is not None:
            self.bar.console.print(line, highlight=False, markup=False)
        elif hasattr(self, "last_print"):
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def _number(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def validation_line(rec: dict, metric: str) -> str:
    """A validation as one line, as fairseq prints it: `valid | update 4,000 | valid_loss 0.1234 |
    valid_exact_match 0.93 | best_exact_match 0.93`; a valid_loss above `metrics.blowup.BLOWUP_NATS` adds a
    warning line."""
    from structseq.metrics.blowup import loss_warning

    parts = [f"valid | update {rec['step']:,}"]
    parts += [f"{k} {_number(v)}" for k, v in rec.items() if k.startswith("valid_") and isinstance(v, (int, float))]
    line = " | ".join(parts + [f"best_{metric} {_number(rec.get('best'))}"])
    blowup = loss_warning(rec["valid_loss"]) if isinstance(rec.get("valid_loss"), (int, float)) else None
    return line if blowup is None else f"{line}\n{blowup}"


def closing_summary(history: list, metric: str, run_dir) -> str | None:
    """The end of training in one line: `best exact_match 0.93 at update 4,000 → RUN/checkpoints/best.pt;
    last 0.91 at update 5,000 → RUN/checkpoints/last.pt`; None when no validation ran."""
    key = f"valid_{metric}"
    rows = [r for r in history if isinstance(r, dict) and key in r]
    if not rows:
        return None
    best = next((r for r in rows if r[key] == rows[-1].get("best")), rows[-1])
    last = rows[-1]
    return (
        f"best {metric} {_number(best[key])} at update {best['step']:,} → {checkpoint_file(run_dir, 'best')}; "
        f"last {_number(last[key])} at update {last['step']:,} → {checkpoint_file(run_dir, 'last')}"
    )


class LogWindow:
    """The updates since the last log line: their summed loss, tokens, gradient norms and the time they took;
    `record` turns them into the log record (mean loss, tokens per second, mean gradient norm) and starts anew."""

    def __init__(self):
        self.start, self.tokens, self.loss, self.updates, self.norm = time.perf_counter(), 0, 0.0, 0, 0.0

    def add(self, loss, tokens: int, norm) -> None:
        """One update (`loss` and `norm` may be device tensors: read only at `record`)."""
        self.tokens, self.loss, self.updates, self.norm = (
            self.tokens + tokens,
            self.loss + loss,
            self.updates + 1,
            self.norm + norm,
        )

    def record(self, step: int, lr: float, epoch: int, with_norm: bool) -> dict:
        dt = time.perf_counter() - self.start
        rec = {
            "step": step,
            "loss": float(self.loss) / self.updates,
            "lr": lr,
            "tokens_per_s": self.tokens / dt if dt > 0 else 0.0,
            "epoch": epoch,
        }
        if with_norm:
            rec["grad_norm"] = float(self.norm) / self.updates  # mean gradient norm (before clipping)
        self.__init__()
        return rec


def higher_is_better(task, name: str) -> bool:
    """The direction of a validation metric: a registered metric's own (`Metric.higher_is_better`), else the
    task's (`valid_metrics`: the loss, "min")."""
    from structseq.registry import METRICS

    if name in METRICS:
        return METRICS.get(name).higher_is_better
    return task.valid_metrics[name] == "max"


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    best: float | None = None
    bad_validations: int = 0
    history: list = field(default_factory=list)
    #: why the run stopped: max_steps | early_stopping | interrupted (None: running, or killed)
    stopped: str | None = None
    #: wall seconds spent in the training loop (updates and the validations between them), summed over
    #: resumes; the work a kill lost after the last checkpoint is not counted, its redo is
    train_seconds: float = 0.0

    @classmethod
    def saved(cls, fields) -> Progress:
        """The progress a checkpoint saved (keys of older or newer versions this one lacks are left out)."""
        return cls(**{k: v for k, v in fields.items() if k in cls.__dataclass_fields__})


class LossWatch:
    """Notices a non-finite training loss without a host-device sync per update: the first bad update's step
    and loss stay on the device and are read at `check` (before a log line, a validation or a checkpoint), so
    a diverged update still never reaches a checkpoint and the error names the update that diverged."""

    def __init__(self):
        self.step: torch.Tensor | None = None
        self.loss: torch.Tensor | None = None

    def see(self, loss, step: int) -> None:
        loss = torch.as_tensor(loss, dtype=torch.float64)
        if self.step is None:
            self.step = torch.full((), -1, dtype=torch.long, device=loss.device)
            self.loss = torch.zeros((), dtype=torch.float64, device=loss.device)
        first = ~torch.isfinite(loss) & (self.step < 0)
        self.step = torch.where(first, step, self.step)
        self.loss = torch.where(first, loss, self.loss)

    def check(self) -> None:
        if self.step is not None and int(self.step) >= 0:
            raise DivergedError(float(self.loss), int(self.step))
