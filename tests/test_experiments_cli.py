"""`structseq sweep` and `structseq plan` are the experiment runner's commands, and scripts/reproduce.py and
scripts/plan.py the same commands under their old names: same arguments, same output, same errors."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)


def test_plan_prints_the_same_table_as_the_script():
    via_cli = _run("-m", "structseq.cli", "plan", "configs/plans/reproduction.yaml", "--cell", "scan-jump-lstm-simple")
    via_script = _run("scripts/plan.py", "configs/plans/reproduction.yaml", "--cell", "scan-jump-lstm-simple")
    assert via_cli.returncode == via_script.returncode == 0, via_cli.stderr + via_script.stderr
    assert via_cli.stdout == via_script.stdout
    assert "| cell | seeds asked |" in via_cli.stdout and "scan-jump-lstm-simple" in via_cli.stdout


def test_sweep_passes_every_argument_and_help_to_its_parser(tmp_path):
    helped = _run("-m", "structseq.cli", "sweep", "--help")
    assert (
        helped.returncode == 0
        and helped.stdout.startswith("usage: structseq sweep")
        and "--curve-every" in helped.stdout
    )
    torn = tmp_path / "r.jsonl"
    torn.write_text('{"config": "c", "seed": 1}\n{"config": \n')
    for args in (("-m", "structseq.cli", "sweep"), ("scripts/reproduce.py",)):
        out = _run(*args, "configs/scan-jump/lstm-256.yaml", "--out", str(torn))
        assert out.returncode == 2 and f"{torn}:2: not a JSON record" in out.stderr and "Traceback" not in out.stderr
