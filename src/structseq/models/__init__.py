"""Model families (one file each), output heads, builders and the architecture registry."""

from structseq.models.base import Autoregressive, map_state

__all__ = ["Autoregressive", "map_state"]
