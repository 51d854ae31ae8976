"""Model families (one file each), output heads, and the builder that wires them from a config."""

from structseq.models.base import Seq2Seq, map_state

__all__ = ["Seq2Seq", "map_state"]
