"""A command run under a time budget, as the device scripts' plan and the mutation runs need it: started in a
session of its own, it gets SIGINT at the budget (so pytest, mutmut and our trainers stop cleanly and write what
they hold), then SIGKILL, to the whole group, if it has not ended after `grace` seconds."""

from __future__ import annotations

import os
import signal
import subprocess


def run_with_budget(cmd: list[str], budget_s: float, *, grace_s: float = 30.0, **popen) -> int | None:
    """The command's exit status, or None when the budget stopped it (`popen`: cwd, env, ... for Popen)."""
    # SIGINT back to its default in the child: a command started from a background job (`nohup ... &`, a CI
    # runner) inherits SIGINT ignored, and a shell cannot trap a signal ignored on entry, so it would only die
    # at the SIGKILL, having written nothing
    proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=_default_sigint, **popen)
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


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
