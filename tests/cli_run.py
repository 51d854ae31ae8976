"""`structseq ARGS` run in the test's process through the CLI's error boundary, and the check that an error is
one line `error: ...` (exit 2) naming what it should. Shared by the reliability tests."""

from __future__ import annotations

import io
import sys

import pytest


def run_main(monkeypatch, capsys, *args: object, stdin: str | None = None) -> tuple[int, str]:
    """`structseq ARGS` (standard input `stdin` when given): (exit status, stderr)."""
    from structseq.cli import main

    monkeypatch.setattr(sys, "argv", ["structseq", *map(str, args)])
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    with pytest.raises(SystemExit) as done:
        main()
    code = done.value.code
    return (0 if code is None else code), capsys.readouterr().err


def one_line_error(code: int, err: str, *words: str) -> None:
    """Exit 2 and one line `error: ...` holding each of `words`, no traceback (transformers' own `[transformers]`
    log lines aside)."""
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("[transformers]")]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], (w, err)
