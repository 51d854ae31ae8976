"""Search over the decoder-state protocol of `structseq.models.base`: `run` is the one batched decoding loop
(strategies in `structseq.decode.strategies`), `decode` / `beam_search` / `greedy` the per-batch functions."""

from structseq.decode.batched import run
from structseq.decode.search import beam_search, greedy, max_lengths
from structseq.decode.strategies import decode

__all__ = ["beam_search", "decode", "greedy", "max_lengths", "run"]
