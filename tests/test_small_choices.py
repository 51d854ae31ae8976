"""Issue 47 items 7-9 through the CLI: piped output is plain and whole, CPU threads, and the small choices that
used to be silent."""

from __future__ import annotations

from typer.testing import CliRunner

from structseq.cli import app

runner = CliRunner()


def test_piped_tables_are_never_cut_or_wrapped():
    """CliRunner's stdout is not a terminal: every row of `config data` is one line holding its whole help."""
    r = runner.invoke(app, ["config", "data"])
    assert r.exit_code == 0, r.output
    row = next(line for line in r.stdout.splitlines() if "data.dataset " in line)
    assert "registered dataset name (see `structseq data list`) or 'files'" in row
    assert not any(line.strip("│ ").startswith("│") for line in r.stdout.splitlines())  # no wrapped continuation
    assert "\x1b[" not in r.stdout  # no colour codes
