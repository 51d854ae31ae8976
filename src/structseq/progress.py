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
    otherwise a line every `LINE_EVERY` seconds ("decode: 1,536/3,920 sentences (39%), 1m00s": items that are
    batches, lists of sentences, count their sentences), and a last one at the end when any was printed, so a
    long job never stays silent in a log."""
    if not enabled or not is_main_process():
        yield from items
        return
    items = list(items)
    if sys.stderr.isatty():
        from rich.console import Console
        from rich.progress import track

        yield from track(items, description=label, transient=True, console=Console(stderr=True))
        return
    sizes = [len(x) if isinstance(x, (list, tuple)) else 1 for x in items]  # a batch counts its sentences
    unit = " sentences" if any(isinstance(x, (list, tuple)) for x in items) else ""
    total, done = sum(sizes), 0
    start = last = time.monotonic()
    printed = False
    for i, item in enumerate(items):
        yield item
        done += sizes[i]
        now = time.monotonic()
        if now - last >= LINE_EVERY or (printed and i + 1 == len(items)):
            elapsed = int(now - start)
            print(
                f"{label}: {done:,}/{total:,}{unit} ({100 * done // max(total, 1)}%), "
                f"{elapsed // 60}m{elapsed % 60:02d}s",
                file=sys.stderr,
                flush=True,
            )
            last, printed = now, True
