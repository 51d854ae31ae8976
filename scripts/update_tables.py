"""Regenerate every generated table of README.md, RESULTS.md and docs/ (performance, reproduction, gpu, papers,
compose-scale).

A generated block names the command that writes it:

    <!-- generated: python scripts/results_table.py results/dangle/scan-jump.jsonl -->
    | config | split | seeds | ...
    <!-- /generated -->

    python scripts/update_tables.py            # rerun every block's command, replace the block's text
    python scripts/update_tables.py --check    # change nothing; exit 1 naming every block its records no longer give

The commands are the repository's table scripts (`scripts/*.py`, `scripts/analysis/*.py`, `benchmarks/report.py`), run with this Python
from the repository root; their `plot: FILE` lines are dropped, and `--check` leaves `--plot` out so it writes
nothing. The test suite runs `--check`, so a table cannot silently drift from the records it claims to come from.
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = (
    "README.md",
    "RESULTS.md",
    "docs/performance.md",
    "docs/reproduction.md",
    "docs/gpu.md",
    "docs/papers/lexicon.md",
    "docs/papers/dangle.md",
    "docs/papers/supertagging.md",
    "docs/papers/context.md",
    "docs/compose-scale.md",
)
BLOCK = re.compile(
    r"^<!-- generated: (?P<command>[^\n]+?) -->\n(?P<text>.*?)^<!-- /generated -->$", re.DOTALL | re.MULTILINE
)


def _argv(command: str, where: str, plots: bool) -> list[str]:
    words = shlex.split(command)
    table_script = len(words) > 1 and re.fullmatch(r"scripts/(analysis/)?\w+\.py|benchmarks/report\.py", words[1])
    if words[:1] != ["python"] or not table_script:
        raise SystemExit(
            f"{where}: a generated block's command must be `python scripts/NAME.py ...` or "
            f"`python benchmarks/report.py ...`, got {command!r}"
        )
    args = words[2:]
    if not plots:
        args = [a for i, a in enumerate(args) if a != "--plot" and (i == 0 or args[i - 1] != "--plot")]
    return [sys.executable, str(ROOT / words[1]), *args]


def render(command: str, where: str, plots: bool = True) -> str:
    """The block text `command` writes now (its stdout without `plot:` lines), ending in one newline."""
    done = subprocess.run(_argv(command, where, plots), cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{where}: `{command}` failed:\n{done.stderr.strip()}")
    lines = [line for line in done.stdout.splitlines() if not line.startswith("plot: ")]
    return "\n".join(lines).strip("\n") + "\n"


def update(path: Path, check: bool) -> list[str]:
    """Regenerate the blocks of one document; returns the stale ones (`file:line command`)."""
    text, stale, out, last = path.read_text(encoding="utf-8"), [], [], 0
    for m in BLOCK.finditer(text):
        where = f"{path.name}:{text.count(chr(10), 0, m.start()) + 1}"
        new = render(m["command"], where, plots=not check)
        if new != m["text"]:
            stale.append(f"{where} {m['command']}")
        out += [text[last : m.start("text")], new]
        last = m.end("text")
    if not check and stale:
        from structseq.outputs import atomic_write

        atomic_write(path, "".join(out) + text[last:])
    return stale


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("documents", nargs="*", default=list(DOCUMENTS), help="Markdown files (default: %(default)s)")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 if a block is stale")
    args = p.parse_args(argv)
    stale = [s for d in args.documents for s in update(ROOT / d, args.check)]
    for s in stale:
        print(("stale: " if args.check else "updated: ") + s)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    from structseq.errors import run_cli

    sys.exit(run_cli(main))
