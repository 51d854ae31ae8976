"""structseq.testing.process.run_with_budget: the exit status of a command that ends, None for one the budget
stops, SIGINT first (a command that handles it ends cleanly) and SIGKILL to the whole group after the grace."""

import signal
import time

from structseq.testing.process import run_with_budget


def test_an_ended_command_gives_its_status():
    assert run_with_budget(["bash", "-c", "exit 3"], 10) == 3
    assert run_with_budget(["true"], 10) == 0


def test_the_budget_sends_sigint_first(tmp_path):
    mark = tmp_path / "interrupted"
    script = f"trap 'echo yes > {mark}; exit 0' INT; sleep 20 & wait"
    t = time.monotonic()
    assert run_with_budget(["bash", "-c", script], 0.5, grace_s=10) is None
    assert mark.read_text().strip() == "yes" and time.monotonic() - t < 8


def test_the_budget_interrupts_a_command_started_with_sigint_ignored(tmp_path):
    """A caller started from a background job (`nohup ... &`, a CI runner) has SIGINT ignored, which a child
    inherits, and a shell cannot trap a signal ignored on entry: the command got no SIGINT it could act on and
    ran until the SIGKILL. The child starts with SIGINT at its default."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        test_the_budget_sends_sigint_first(tmp_path)
    finally:
        signal.signal(signal.SIGINT, before)


def test_a_command_ignoring_sigint_is_killed_with_its_children_after_the_grace(tmp_path):
    pid_file = tmp_path / "child"
    script = f"trap '' INT; sleep 30 & echo $! > {pid_file}; wait"
    t = time.monotonic()
    assert run_with_budget(["bash", "-c", script], 0.5, grace_s=0.5) is None
    assert time.monotonic() - t < 8
    child = int(pid_file.read_text())
    time.sleep(0.2)
    try:
        with open(f"/proc/{child}/stat") as f:
            state = f.read().split(") ")[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z")  # killed with its group (a zombie until its parent, also killed, is reaped)
