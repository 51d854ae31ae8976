"""The training progress bar: updates done, loss, learning rate and throughput on stderr."""

from __future__ import annotations

import sys
import time


class ProgressBar:
    """A rich progress bar with loss, lr and throughput; a line every 10 s when stderr is not a terminal;
    silent when disabled."""

    def __init__(self, total: int, done: int, enabled: bool):
        self.bar = None
        if enabled and sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("train"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                TextColumn("{task.fields[info]}"), transient=False)
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

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
