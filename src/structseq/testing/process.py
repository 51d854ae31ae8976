"""A command run under a time budget, as the device scripts' plan and the mutation runs need it: started in a
session of its own, it gets SIGINT at the budget (so pytest, mutmut and our trainers stop cleanly and write what
they hold), then SIGKILL, to the whole group, if it has not ended after `grace` seconds."""

from __future__ import annotations

import os
import signal
import subprocess


def run_with_budget(cmd: list[str], budget_s: float, *, grace_s: float = 30.0, **popen) -> int | None:
    """The command's exit status, or None when the budget stopped it (`popen`: cwd, env, ... for Popen)."""
    proc = subprocess.Popen(cmd, start_new_session=True, **popen)
    try:
        return proc.wait(timeout=budget_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return None
