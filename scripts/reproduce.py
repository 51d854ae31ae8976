"""`structseq sweep` (structseq.experiments.sweep) under its old name: the same arguments, the same records."""

import sys

from structseq.errors import run_cli
from structseq.experiments.sweep import main

if __name__ == "__main__":
    sys.exit(run_cli(main))
