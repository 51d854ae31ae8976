"""Progress display shared by decoding loops."""

from __future__ import annotations


def progress(items, label: str, enabled: bool):
    """`items`, with a transient progress bar when enabled."""
    if not enabled:
        yield from items
        return
    from rich.progress import track

    yield from track(items, description=label, transient=True)
