"""Regenerate every generated block of the documents, or check that each still equals what its records give.

A generated block names the command that writes it:

    <!-- generated: structseq report results results/dangle/scan-jump.jsonl -->
    | config | split | seeds | ...
    <!-- /generated -->

    structseq report tables            # rerun every block's command, replace the block's text (atomic, UTF-8)
    structseq report tables --check    # change nothing; exit 1 naming every block its records no longer give

A command is `structseq report KIND ...` (rendered in this process, see `structseq.report.KINDS`) or, for the
tables that live with their experiment, `python scripts/NAME.py ...` / `python scripts/analysis/NAME.py ...`
(run with this Python; its `plot: FILE` lines dropped). Paths in commands are relative to the repository root
(`--root`, default: the current folder). What a document says never chooses where a file goes outside the root:
a kind's outputs (`kinds.OUTPUTS`: `--plot`, `--out`, however abbreviated) must name a file under it, and a
script runs with all its writes confined (`confine`: under the root and a temporary folder removed after the
block, whatever option names the file; no process started), refused naming the block's line otherwise.
`--check` writes nothing at all: it leaves `--plot` (and `--out`) out, and a script's writes are confined to its
temporary folder, so a block that would write anything else is an error. The test suite runs `--check`, so a
table cannot silently drift from the records it claims to come from.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

import typer

from structseq.errors import StructseqError

from .confine import REFUSED

HELP = "rerun every generated block of the documents (--check: only say which are stale)"
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
    "docs/reliability.md",
    "docs/decoding.md",
)
BLOCK = re.compile(
    r"^<!-- generated: (?P<command>[^\n]+?) -->\n(?P<text>.*?)^<!-- /generated -->$", re.DOTALL | re.MULTILINE
)
SCRIPT = re.compile(r"scripts/(analysis/)?\w+\.py")


@contextmanager
def _cwd(folder: Path):
    """Commands name records relative to the repository root."""
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def _without_plot(args: list[str]) -> list[str]:
    return [
        a
        for i, a in enumerate(args)
        if a != "--plot" and not a.startswith("--plot=") and (i == 0 or args[i - 1] != "--plot")
    ]


def _under_root(option: str, value: object, root: Path) -> None:
    """A document's command writes only under the repository root: a file it names (`--plot`) elsewhere is
    refused (a user's own `structseq report ... --plot` goes anywhere: what a document says does not)."""
    root = root.resolve()
    if not (root / str(value)).resolve().is_relative_to(root):
        raise StructseqError(f"a generated block writes only under the repository root {root}, not `{option} {value}`")


def _report(words: list[str], root: Path, plots: bool) -> str:
    """`structseq report KIND ...` rendered here, its outputs (`kinds.OUTPUTS`: --plot, --out, however
    abbreviated) kept under `root`, and left out when `plots` is False."""
    from .kinds import OUTPUTS, parse, run

    args = parse(words)
    for dest in OUTPUTS:
        if getattr(args, dest, None) is not None:
            _under_root(f"--{dest}", getattr(args, dest), root)
            if not plots:
                setattr(args, dest, None)
    return run(args, words)


def _confined(script: Path, args: list[str], root: Path, check: bool) -> subprocess.CompletedProcess:
    """Run a block's script with this Python, its writes confined (`confine`: whatever its arguments name) to the
    root and a temporary folder, or under --check to the temporary folder alone; the folder is removed after."""
    with tempfile.TemporaryDirectory(prefix="structseq-block-") as tmp:
        where = "its temporary folder under --check" if check else f"under the repository root {root}"
        confined = json.dumps({"folders": [tmp] if check else [str(root), tmp], "where": where})
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "TMPDIR": tmp, "MPLCONFIGDIR": tmp}
        command = [sys.executable, "-m", "structseq.report.confine", confined, str(script), *args]
        return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)


def render(command: str, where: str, root: Path, plots: bool = True) -> str:
    """The block text `command` writes now, ending in one newline."""
    words = shlex.split(command)
    if words[:2] == ["structseq", "report"] and words[2:3] != ["tables"]:
        with _cwd(root):
            try:
                text = _report(words[2:], root, plots)
            except StructseqError as e:
                raise StructseqError(f"{where}: `{command}` failed: {e}") from None
        return text.strip("\n") + "\n"
    if words[:1] != ["python"] or len(words) < 2 or not SCRIPT.fullmatch(words[1]):
        raise StructseqError(
            f"{where}: a generated block's command must be `structseq report KIND ...` or "
            f"`python scripts/NAME.py ...`, got {command!r}"
        )
    for i, word in enumerate(words):
        option, sep, value = word.partition("=")
        if option == "--plot" and (sep or i + 1 < len(words)):
            try:
                _under_root(option, value if sep else words[i + 1], root)
            except StructseqError as e:
                raise StructseqError(f"{where}: `{command}` failed: {e}") from None
    args = words[2:] if plots else _without_plot(words[2:])
    done = _confined(root / words[1], args, root, check=not plots)
    if done.returncode == REFUSED:
        raise StructseqError(f"{where}: `{command}` refused: {done.stderr.strip().splitlines()[-1]}")
    if done.returncode:
        raise StructseqError(f"{where}: `{command}` failed:\n{done.stderr.strip()}")
    lines = [line for line in done.stdout.splitlines() if not line.startswith("plot: ")]
    return "\n".join(lines).strip("\n") + "\n"


def update(path: Path, check: bool, root: Path | None = None) -> list[str]:
    """Regenerate the blocks of one document (root: where its commands run, default the current folder);
    returns the stale ones (`file:line command`)."""
    from structseq.outputs import atomic_write
    from structseq.textio import read_text

    root = Path.cwd() if root is None else Path(root).resolve()
    text, stale, out, last = read_text(path), [], [], 0
    for m in BLOCK.finditer(text):
        where = f"{Path(path).name}:{text.count(chr(10), 0, m.start()) + 1}"
        new = render(m["command"], where, root, plots=not check)
        if new != m["text"]:
            stale.append(f"{where} {m['command']}")
        out += [text[last : m.start("text")], new]
        last = m.end("text")
    if not check and stale:
        atomic_write(path, "".join(out) + text[last:])
    return stale


USER_HELP = """Rerun the command of every generated block of the documents and replace the block's text with what
it prints now (atomic, UTF-8); with --check change nothing and exit 1 naming every block its records no longer
give (the test suite runs it).

A block names its command: <!-- generated: structseq report KIND ... --> or <!-- generated: python scripts/NAME.py
... -->. Paths in commands are relative to --root. A block writes only under --root (its --plot, --out); under
--check nothing is written at all."""


def _markdown_only(value: str) -> str:
    if value != "markdown":
        raise StructseqError(f"--format {value} renders one table kind (structseq report KIND ... --format {value})")
    return value


def command(
    documents: Optional[list[str]] = typer.Argument(
        None, metavar="DOCUMENTS", help=f"Markdown files (default: {', '.join(DOCUMENTS)})", show_default=False
    ),
    check: bool = typer.Option(False, "--check", help="change nothing; exit 1 if a block is stale"),
    root: Path = typer.Option(Path("."), "--root", help="the repository root: the documents' and commands' paths"),
    format: str = typer.Option("markdown", "--format", hidden=True, callback=_markdown_only),
) -> int:
    return run(argparse.Namespace(documents=documents or list(DOCUMENTS), check=check, root=root))


def run(args: argparse.Namespace) -> int:
    root = args.root.resolve()
    stale = [s for d in args.documents for s in update(root / d, args.check, root)]
    for s in stale:
        print(("stale: " if args.check else "updated: ") + s)
    return 1 if args.check and stale else 0
