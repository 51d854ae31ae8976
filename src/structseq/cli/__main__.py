"""`python -m structseq.cli ...` runs the command line."""

from structseq.cli import main

main()
