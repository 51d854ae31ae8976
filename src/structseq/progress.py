"""Progress display shared by decoding loops: a bar on a terminal, a line a minute elsewhere, on stderr."""

from __future__ import annotations

import os
import sys
import time

#: seconds between progress lines when stderr is not a terminal (a log file, a batch job)
LINE_EVERY = 60.0


def is_main_process() -> bool:
    """False on every process but rank 0 of a torchrun job (`RANK`), which alone prints."""
    return os.environ.get("RANK", "0") in ("", "0")


def progress(items, label: str, enabled: bool):
    """`items`, with progress on stderr when enabled (and on rank 0 only): a transient bar on a terminal;
    otherwise a line every `LINE_EVERY` seconds ("decode: 12/40 (30%), 1m00s"), and a last one at the end
    when any was printed, so a long job never stays silent in a log."""
    if not enabled or not is_main_process():
        yield from items
        return
    items = list(items)
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import track

        yield from track(items, description=label, transient=True, console=Console(stderr=True))
        return
    start = last = time.monotonic()
    printed = False
    for i, item in enumerate(items):
        yield item
        now = time.monotonic()
        if now - last >= LINE_EVERY or (printed and i + 1 == len(items)):
            elapsed = int(now - start)
            print(
                f"{label}: {i + 1}/{len(items)} ({100 * (i + 1) // max(len(items), 1)}%), "
                f"{elapsed // 60}m{elapsed % 60:02d}s",
                file=sys.stderr,
                flush=True,
            )
            last, printed = now, True
