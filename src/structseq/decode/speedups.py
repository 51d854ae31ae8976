"""The search loop's speed-ups (`structseq.decode.search.search`), each a switch.

Every speed-up here changes how the search computes, never what it returns: with any of them off, greedy, beam
(n-best lists included) and sampling give the same tokens and the same scores, bit for bit
(tests/decode/test_speedups.py). They are on by default; the config key `decode.speedups: false` (or `--set
decode.speedups=false`) turns all of them off for a decoding call, `switched(name=False)` one for a block,
`off()` all of them (a baseline to time against: benchmarks/profile_decode.py --plain):

- `identity_reorder`: with one hypothesis per sentence (greedy, sampling) and no sentence leaving the batch, the
  state is not reordered (every row keeps its place: the reorder is the identity).
- `stable_slots`: in beam search a hypothesis keeps its parent's row of the decoder state where it can (the best
  child of each parent stays in the parent's row; the others take the rows of parents that have none), so a
  self-attention cache (`structseq.nn.attention.KVCache`) copies only the rows whose parent is another row, in
  place, instead of gathering every row into a new buffer. The search's own bookkeeping (scores, candidates,
  finished hypotheses) stays in rank order, so its arithmetic and its ties are those of the plain loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace

from structseq.nn import attention


@dataclass(frozen=True)
class Speedups:
    identity_reorder: bool = True
    stable_slots: bool = True


_CURRENT = [Speedups()]


def current() -> Speedups:
    """The switches in force."""
    return _CURRENT[0]


@contextmanager
def switched(**flags: bool) -> Iterator[Speedups]:
    """A block with the named speed-ups switched (e.g. `switched(stable_slots=False)`), as they were after."""
    before = _CURRENT[0]
    _set(replace(before, **flags))
    try:
        yield _CURRENT[0]
    finally:
        _set(before)


def _set(speed: Speedups) -> None:
    _CURRENT[0] = speed
    attention.IN_PLACE_REORDER[0] = speed.stable_slots  # the caches' half of stable slots


def off() -> contextmanager:
    """A block with every speed-up switched off: the plain search loop."""
    return switched(**{f.name: False for f in fields(Speedups)})
