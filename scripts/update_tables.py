"""`structseq report tables` (structseq.report.tables) under its old name, run from the repository root:
`python scripts/update_tables.py [--check] [DOCUMENT ...]`."""

import sys
from pathlib import Path

from structseq.errors import run_cli
from structseq.report import main

if __name__ == "__main__":
    sys.exit(run_cli(main, ["tables", "--root", str(Path(__file__).resolve().parent.parent), *sys.argv[1:]]))
