"""Search over the decoder-state protocol of `structseq.models.base`."""

from structseq.decode.search import beam_search, decode, greedy, max_lengths

__all__ = ["beam_search", "decode", "greedy", "max_lengths"]
