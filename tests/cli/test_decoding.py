"""Issue 56 item 4: one set of decoding options for `evaluate`, `predict` and `score` (`structseq.cli.decoding`):
declared once, listed alike in each command's --help (one Decoding panel), given to each command whole."""

from __future__ import annotations

import re

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from structseq.cli import app
from structseq.cli.decoding import PANEL, RUN_OPTIONS, SEARCH_OPTIONS
from tests.fixtures.cli_run import one_line_error, run_main

runner = CliRunner()


def decoding_params(command: str) -> dict[str, tuple]:
    """The command's options in the Decoding panel: name -> (flags, help, default)."""
    cmd = get_command(app).commands[command]
    return {
        p.name: (tuple(p.opts), p.help, p.default)
        for p in cmd.params
        if getattr(p, "rich_help_panel", None) == PANEL or p.name == "checkpoint"
    }


def test_the_three_commands_take_one_set_of_decoding_options():
    run = {name for name, _, _ in RUN_OPTIONS}
    search = {name for name, _, _ in SEARCH_OPTIONS}
    evaluate, predict, score = (decoding_params(c) for c in ("evaluate", "predict", "score"))
    assert set(evaluate) == set(predict) == run | search
    assert set(score) == run
    assert evaluate == predict and {k: evaluate[k] for k in score} == score


def _panel(command: str) -> list[str]:
    """The lines of the Decoding panel of `structseq COMMAND --help`."""
    out = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200", "TERMINAL_WIDTH": "200"}).output
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if re.search(rf"─ {PANEL} ─", line))
    end = next(i for i in range(start + 1, len(lines)) if lines[i].lstrip().startswith("╰"))
    return lines[start + 1 : end]


def test_each_help_lists_the_decoding_options_alike():
    evaluate, predict, score = (_panel(c) for c in ("evaluate", "predict", "score"))
    assert evaluate == predict

    def flags(lines: list[str]) -> list[str]:
        return [m.group(0) for m in (re.search(r"--[\w-]+", line) for line in lines) if m]

    assert "--max-len-a" in flags(evaluate) and "--max-len-a" not in flags(score)
    assert (
        flags(score)
        == flags(evaluate)[: len(flags(score))]
        == ["--batch-size", "--threads", "--device", "--set", "--quiet"]
    )


@pytest.mark.parametrize("command", ["evaluate", "predict", "score"])
def test_every_command_checks_the_device_before_loading(command, tmp_path, monkeypatch, capsys):
    """`--device` was predict's alone: evaluate and score take it too, checked by one rule before the run loads."""
    extra = ["--pairs", "x.tsv"] if command == "score" else []
    code, err = run_main(monkeypatch, capsys, command, tmp_path / "no-run", *extra, "--device", "tpu", stdin="")
    one_line_error(code, err, "'--device': invalid value 'tpu'; choices: auto, cpu, cuda, cuda:N")


def test_a_run_samples_by_one_route():
    """Issue 56 item 4: `Run` decoded by five methods, three of which also took `sampling=` (a second route to
    what `Run.sampled` does); now a run samples only as `run.sampled(Sampling(...))`, whose methods draw."""
    import inspect

    from structseq.api import Run

    for method in (Run.decode_examples, Run.search, Run.predict, Run.translate):
        assert "sampling" not in inspect.signature(method).parameters, method.__name__
    assert "sampling" in inspect.signature(Run.sampled).parameters
