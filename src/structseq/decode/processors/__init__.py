"""Per-step logits processors in transformers' convention: each search step hands every processor the open rows'
prefixes and next-token scores and searches what comes back (`LogitsProcessor`, `ProcessorList`).

    processor(input_ids, scores) -> scores
    input_ids: LongTensor (rows, t + 1): the decoder's start token, then the t tokens of each row so far
    scores:    FloatTensor (rows, V): the next token's log-probabilities (as transformers' beam search sees them;
               a processor may return any scores: -inf bans a token)

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

import abc
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from torch import Tensor

from structseq.data.vocab import Vocab
from structseq.errors import ConfigError
from structseq.registry import PROCESSORS


class LogitsProcessor(abc.ABC):
    """One per-step rule: `__call__(input_ids (rows, t + 1), scores (rows, V)) -> scores (rows, V)` (the
    module's docstring). transformers' own processors are called the same way and may be listed beside these."""

    @abc.abstractmethod
    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor: ...


class ProcessorList(list):
    """Processors applied in order; empty (falsy): the search skips them."""

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        for processor in self:
            scores = processor(input_ids, scores)
        return scores


@dataclass(frozen=True)
class OutputSpace:
    """What a processor may know of the model's outputs: each id's token as the model emits it (`tokens`), the
    special ids, and `detokenize` (ids without specials -> the output's words) where outputs are subwords (a
    pretrained tokenizer's pieces, a task's subword segmentation); None: each token is a word."""

    tokens: Sequence[str]
    eos: int = Vocab.eos
    bos: int = Vocab.bos
    pad: int = Vocab.pad
    detokenize: Callable[[Sequence[int]], list[str]] | None = None

    def id_of(self, token: str, key: str) -> int:
        """The id of output token `token`, or a ConfigError naming `key` (the setting that gave it)."""
        index = getattr(self, "_index", None)
        if index is None:
            index = {t: i for i, t in enumerate(self.tokens)}
            object.__setattr__(self, "_index", index)
        if token not in index:
            raise ConfigError(f"'{key}': {token!r} is not an output token of the model")
        return index[token]


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
    out = ProcessorList()
    for entry, options in sorted(chosen, key=lambda e: e[0].rank):
        built = entry.build(options, space)
        if built is not None:
            out.append(built)
    out.extend(extra)
    return out
