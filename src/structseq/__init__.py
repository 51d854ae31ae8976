"""structseq: structure-aware sequence transduction."""

__version__ = "0.1.0"
