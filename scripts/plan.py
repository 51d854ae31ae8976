"""`structseq plan` (structseq.experiments.plan) under its old name: the same arguments, the same tables."""

import sys

from structseq.errors import run_cli
from structseq.experiments.plan import main

if __name__ == "__main__":
    sys.exit(run_cli(main))
