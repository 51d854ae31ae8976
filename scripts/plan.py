"""`structseq plan` under its old name: the same arguments, the same tables."""

import sys

from structseq.cli import app
from structseq.cli import main as structseq


def main(argv: list[str] | None = None) -> int:
    """`structseq plan ARGV` in this process, its errors raised (for `structseq.errors.run_cli`); its exit status."""
    return app(["plan", *(sys.argv[1:] if argv is None else argv)], standalone_mode=False, prog_name="structseq") or 0


if __name__ == "__main__":
    sys.argv = ["structseq", "plan", *sys.argv[1:]]
    structseq()
