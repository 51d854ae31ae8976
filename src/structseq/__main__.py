"""`python -m structseq` (and `torchrun ... -m structseq train ...`): the command-line interface."""

from structseq.cli import main

main()
