"""`structseq sweep` and `structseq plan` are the experiment runner's commands, and scripts/reproduce.py and
scripts/plan.py the same commands under their old names: same arguments, same output, same errors."""

import os
import subprocess
import sys
from pathlib import Path

from tests.fixtures.paths import FIXTURES, ROOT

ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)


def test_plan_prints_the_same_table_as_the_script():
    via_cli = _run("-m", "structseq.cli", "plan", "configs/plans/reproduction.yaml", "--cell", "scan-jump-lstm-simple")
    via_script = _run("scripts/plan.py", "configs/plans/reproduction.yaml", "--cell", "scan-jump-lstm-simple")
    assert via_cli.returncode == via_script.returncode == 0, via_cli.stderr + via_script.stderr
    assert via_cli.stdout == via_script.stdout
    assert "| cell | seeds asked |" in via_cli.stdout and "scan-jump-lstm-simple" in via_cli.stdout


def test_sweep_and_plan_have_the_typer_help_of_every_command(tmp_path):
    """Issue 55.5: one CLI style; the help names `structseq sweep`/`plan`, never the scripts or developer notes."""
    for command, option in (("sweep", "--curve-every"), ("plan", "--probe-batches")):
        for args in (
            ("-m", "structseq.cli", command),
            (f"scripts/{'reproduce' if command == 'sweep' else 'plan'}.py",),
        ):
            helped = _run(*args, "--help")
            assert helped.returncode == 0 and f" {command} [OPTIONS]" in helped.stdout, helped.stderr
            assert option in helped.stdout and "scripts/" not in helped.stdout and "450" not in helped.stdout
    torn = tmp_path / "r.jsonl"
    torn.write_text('{"config": "c", "seed": 1}\n{"config": \n')
    for args in (("-m", "structseq.cli", "sweep"), ("scripts/reproduce.py",)):
        out = _run(*args, "configs/scan-jump/lstm-256.yaml", "--out", str(torn))
        assert out.returncode == 2 and f"{torn}:2: not a JSON record" in out.stderr and "Traceback" not in out.stderr


def _records(path: Path, config: str, seeds) -> None:
    path.write_text(
        "".join(f'{{"config": "{config}", "seed": {s}, "overrides": [], "split": "test"}}\n' for s in seeds)
    )


def test_sweep_and_plan_refuse_settings_out_of_range_in_one_line(tmp_path, monkeypatch, capsys):
    """Issue 52: a seed or config given twice (one run recorded and averaged twice), --jobs 0, a negative or
    seedless --curve-every, --probe-batches 0, and the old `--seeds 1 2` style (55.5): one line each, no record."""
    from tests.fixtures.cli_run import one_line_error, run_main

    cfg, out = "configs/scan-jump/lstm-256.yaml", tmp_path / "r.jsonl"
    for args, words in (
        (("--seeds", "1,1"), ("--seeds", "seed 1 given twice")),
        (("--seeds", ","), ("--seeds", "names no seed")),
        (("--seeds", ""), ("--seeds", "names no seed")),
        ((cfg, "--seeds", "1"), ("given twice",)),
        (("--jobs", "0"), ("--jobs 0",)),
        (("--curve-every", "-10", "--curve-seeds", "1"), ("--curve-every -10",)),
        (("--curve-every", "10"), ("--curve-every 10", "--curve-seeds")),
        (("--curve-every", "1000", "--curve-seeds", "2"), ("--curve-seeds 2", "not among --seeds")),
        (("--seeds", "1", "2"), ("2 is not a config file", "--seeds 1,2,3")),
    ):
        code, err = run_main(monkeypatch, capsys, "sweep", cfg, *args, "--out", out, "--runs", tmp_path / "runs")
        one_line_error(code, err, *words)
    assert not out.exists() and not (tmp_path / "runs").exists()
    code, err = run_main(monkeypatch, capsys, "plan", "configs/plans/reproduction.yaml", "--probe-batches", "0")
    one_line_error(code, err, "--probe-batches 0")


def test_a_config_outside_configs_names_its_runs_by_its_stem_and_a_rerun_says_what_it_skipped(tmp_path, monkeypatch):
    """Issues 55.6 and 55.10: `digits.yaml` in the working directory named runs `-digits-s1` (read as an option);
    now `digits-s1`, as from any other folder; configs/DATASET/X.yaml keeps `DATASET-X-s1`. A rerun names each
    recorded run it skips (it printed nothing), and trains none."""
    from structseq.experiments import sweep

    monkeypatch.chdir(tmp_path)
    (tmp_path / "digits.yaml").write_text("{}")
    assert sweep.run_name("digits.yaml", 1) == "digits-s1"
    assert sweep.run_name(str(tmp_path / "digits.yaml"), 2, ["optim.lr=1e-3"]) == "digits-lr1e-3-s2"
    assert sweep.run_name("configs/scan-jump/lstm-256.yaml", 1) == "scan-jump-lstm-256-s1"
    assert sweep.run_name("-x.yaml", 1) == "x-s1"
    _records(tmp_path / "r.jsonl", "digits.yaml", (1, 2))
    monkeypatch.setattr(sweep, "one", None)  # nothing to train
    done = subprocess_free_sweep(tmp_path, "digits.yaml", "--seeds", "1,2", "--out", "r.jsonl")
    assert done == [
        "digits-s1: already recorded in r.jsonl; skipped",
        "digits-s2: already recorded in r.jsonl; skipped",
    ]


def subprocess_free_sweep(tmp_path, *args) -> list[str]:
    import contextlib
    import io

    from structseq.cli import app

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert app(["sweep", *args], standalone_mode=False) in (0, None)
    return buf.getvalue().splitlines()


def test_run_names_and_plain_names_at_their_length_limits():
    """Issue 52's mutants: a run name of exactly MAX_NAME characters is kept (one more ends in a digest, at
    MAX_NAME); plain_name takes 100 characters, not 101, and no name ending in a newline (a `$` anchor)."""
    import pytest

    from structseq.experiments.sweep import MAX_NAME, run_name
    from structseq.outputs import OutputError, plain_name

    fixed = len(run_name("configs/d/c.yaml", 1, ["train.init_from=x"])) - 1  # the name around the value
    exact = run_name("configs/d/c.yaml", 1, [f"train.init_from={'a' * (MAX_NAME - fixed)}"])
    assert len(exact) == MAX_NAME and exact.endswith("a-s1")
    over = run_name("configs/d/c.yaml", 1, [f"train.init_from={'a' * (MAX_NAME - fixed + 1)}"])
    assert len(over) == MAX_NAME and not over.endswith("-s1")
    assert plain_name("x" * 100, "name") == "x" * 100
    for bad in ("x" * 101, "name\n", "src\n", "a\r"):
        with pytest.raises(OutputError):
            plain_name(bad, "name")


def test_report_writes_latex_as_compare_does_and_its_help_is_for_users(monkeypatch, capsys):
    """Issue 55.5: `report KIND ... --format latex` is the Markdown table as booktabs LaTeX, row for row (cells
    escaped, code as \\texttt); an unknown format or `tables --format latex` is one line; `report --help` has no
    developer notes."""
    from tests.fixtures.cli_run import one_line_error, run_main

    monkeypatch.chdir(ROOT)
    done = _run("-m", "structseq.cli", "report", "results", "results/foundation.jsonl")
    md = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert done.returncode == 0 and len(md) > 2
    done = _run("-m", "structseq.cli", "report", "results", "results/foundation.jsonl", "--format", "latex")
    tex = done.stdout.splitlines()
    assert done.returncode == 0 and tex[:2] == [r"\begin{tabular}{" + "l" * (md[0].count("|") - 1) + "}", r"\toprule"]
    rows = [line for line in tex if line.endswith(r" \\")]
    assert len(rows) == len(md) - 1 and tex[-2:] == [r"\bottomrule", r"\end{tabular}"]
    first = [c.strip() for c in md[2].strip("|").split("|")]
    assert rows[1].split(" & ")[0] == r"\texttt{" + first[0].strip("`") + "}" and "A\\&A 2021" in "\n".join(tex)
    for args, words in (
        (("results", "results/foundation.jsonl", "--format", "html"), ("--format 'html'", "markdown, latex")),
        (("tables", "--format", "latex"), ("--format latex renders one table kind",)),
    ):
        code, err = run_main(monkeypatch, capsys, "report", *args)
        one_line_error(code, err, *words)
    helped = _run("-m", "structseq.cli", "report", "--help")
    assert helped.returncode == 0 and "--format latex" in helped.stdout and "450" not in helped.stdout


def test_a_plan_cell_that_names_a_seed_or_config_twice_is_one_line(tmp_path, monkeypatch, capsys):
    """Issue 52's duplicate seed, in a plan: `seeds: [1, 1]` would record (and average) one run twice."""
    from tests.fixtures.cli_run import one_line_error, run_main

    cfg = "configs/scan-jump/lstm-256.yaml"
    for key, value, word in (("seeds", "[1, 2, 1]", "`seeds` gives 1 twice"), ("configs", f"[{cfg}, {cfg}]", cfg)):
        cell = {"seeds": "[1]", "configs": f"[{cfg}]", key: value}
        plan = tmp_path / "plan.yaml"
        plan.write_text(
            f"cells:\n  - id: one\n    title: one\n    configs: {cell['configs']}\n    seeds: {cell['seeds']}\n"
            f"    out: {tmp_path / 'r.jsonl'}\n    runs: {tmp_path / 'runs'}\n"
        )
        code, err = run_main(monkeypatch, capsys, "plan", plan)
        one_line_error(code, err, "cell 1 ('one')", word)


def test_two_configs_of_one_run_name_are_refused_and_a_run_of_another_config_is_not_reused(
    tmp_path, monkeypatch, capsys
):
    """Review of issue 55.6: exp1/model.yaml and exp2/model.yaml both named their runs model-s1, so the second
    config's record was the first config's model. Now the pair is refused in one line naming both; and a
    finished run folder started with another config is an error naming the key, never evaluated as this one."""
    import shutil

    from tests.fixtures.cli_run import one_line_error, run_main

    old_run = FIXTURES / "old_runs" / "lstm"
    for exp, lr in (("exp1", "0.01"), ("exp2", "0.02")):
        (tmp_path / exp).mkdir()
        text = (old_run / "config.yaml").read_text().replace("  lr: 0.01\n", f"  lr: {lr}\n")
        (tmp_path / exp / "model.yaml").write_text(text)
    one, two, out = tmp_path / "exp1" / "model.yaml", tmp_path / "exp2" / "model.yaml", tmp_path / "r.jsonl"
    code, err = run_main(monkeypatch, capsys, "sweep", one, two, "--seeds", "1", "--out", out, "--runs", tmp_path)
    one_line_error(code, err, str(one), str(two), "model-sSEED")
    assert not out.exists()
    run = tmp_path / "runs" / "model-s1"  # exp1's finished run (the fixture: lr 0.01), then exp2 asks for it
    shutil.copytree(old_run, run)
    shutil.copy(run / "checkpoints" / "best.pt", run / "checkpoints" / "last.pt")
    code, err = run_main(monkeypatch, capsys, "sweep", two, "--seeds", "1", "--out", out, "--runs", tmp_path / "runs")
    one_line_error(code, err, str(run), "optim.lr 0.01 -> 0.02", "--runs")
    assert not out.exists()
