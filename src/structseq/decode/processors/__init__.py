"""Per-step logits processors in transformers' convention: each search step hands every processor the open rows'
prefixes and next-token scores and searches what comes back (`LogitsProcessor`, `ProcessorList`).

    processor(input_ids, scores) -> scores
    input_ids: LongTensor (rows, t + 1): the decoder's start token, then the t tokens of each row so far
    scores:    FloatTensor (rows, V): the next token's log-probabilities (as transformers' beam search sees them;
               a processor may return any scores: -inf bans a token)

A processor that sets `reads_remaining` is also given `remaining` (rows,): the output tokens each row may still
emit before it must end (the length limit), this step's included; `ProcessorList` passes it on.

A row is one open hypothesis (a beam entry, a sample), whatever the strategy; a processor keeps no order of rows
between steps (beams reorder and finished rows leave), so one that caches work per prefix keys it by the prefix
(`grammar.GrammarConstraint`).

From a config, `decode.processors` maps registered names to their settings, e.g. `{no_repeat_ngram: {size: 3},
repetition_penalty: {penalty: 1.2}}` (`--set decode.processors.top_k.k=5`; `structseq config decode` lists each
one's keys), and `decode.grammar` names a grammar (`grammar.py`). `build_processors` turns them into one
`ProcessorList`, ordered by each processor's registered rank: transformers' `generate` order (repetition
penalty, no-repeat n-gram, banned tokens, min length, prefix constraints and grammars, forced BOS/EOS, then
temperature, top-k, top-p), so the same settings search the same outputs; a mapping's key order is not
kept by `--set` overrides, so it cannot be the order. In Python, any list of processors applies in its own
order.

A new processor is one file here (or a plugin module):

    @dataclass
    class MyOptions:
        strength: float = option(1.0, "how strongly", gt=0)

    @register_processor("mine", options=MyOptions, rank=45)
    def build_mine(options, space):
        return MyProcessor(options.strength, space.eos)
"""

from __future__ import annotations

from collections.abc import Iterable

from structseq.decode.processors.base import LogitsProcessor, OutputSpace, ProcessorList
from structseq.decode.processors.grammar import GRAMMAR_RANK, grammar_constraint
from structseq.errors import ConfigError
from structseq.registry import PROCESSORS

__all__ = ["LogitsProcessor", "OutputSpace", "ProcessorList", "build_processors"]


def _options(name: str, options):
    """A processor's settings as its schema: a config's already are; a hand-built mapping is validated."""
    if isinstance(options, dict) or options is None:
        from structseq.config import schemas
        from structseq.fields import build_section

        return build_section(PROCESSORS.get(name).options, options, f"decode.processors.{name}.", schemas)
    return options


def build_processors(decode_cfg, space: OutputSpace, extra: Iterable[LogitsProcessor] = ()) -> ProcessorList:
    """The processors `decode_cfg.processors` and `decode_cfg.grammar` configure, in registered rank order, then
    `extra` (a Python caller's own, in their order)."""
    if not isinstance(decode_cfg.processors or {}, dict):
        raise ConfigError(f"'decode.processors' must be a mapping, got {decode_cfg.processors!r}")
    chosen = [(PROCESSORS.get(name), _options(name, o)) for name, o in (decode_cfg.processors or {}).items()]
    grammar = getattr(decode_cfg, "grammar", None)
    if grammar is not None:
        chosen.append((None, grammar))
    out = ProcessorList()
    for entry, options in sorted(chosen, key=lambda e: e[0].rank if e[0] is not None else GRAMMAR_RANK):
        built = entry.build(options, space) if entry is not None else grammar_constraint(options, space)
        if built is not None:
            out.append(built)
    out.extend(extra)
    return out
