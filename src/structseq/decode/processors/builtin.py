"""The built-in processors, each equal to its transformers namesake (`transformers.generation.logits_process`) on
the same inputs (tests/decode/test_processors.py), and registered with its settings under `decode.processors.NAME`.

Ranks follow transformers' `generate` (`_get_logits_processor`): repetition penalty 10, no-repeat n-gram 20,
banned tokens 30, min length 40, prefix constraints and grammars 50, forced BOS 60, forced EOS 70, then the
sampling warpers temperature 80, top-k 90, top-p 100. Unlike `generate`, the warpers apply under every strategy
they are configured for (top-k inside beam search narrows each step's candidates).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from structseq.decode.processors.base import LogitsProcessor, ProcessorList
from structseq.fields import option
from structseq.registry import register_processor

NEG = float("-inf")


class Temperature(LogitsProcessor):
    """scores / temperature (transformers' `TemperatureLogitsWarper`)."""

    def __init__(self, temperature: float):
        self.temperature = temperature

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        return scores / self.temperature


class TopK(LogitsProcessor):
    """Bans every token scored below the k-th best (ties with it kept; `TopKLogitsWarper`)."""

    def __init__(self, k: int, min_keep: int = 1):
        self.k = max(k, min_keep)

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        kth = scores.topk(min(self.k, scores.shape[-1]), dim=-1).values[:, -1:]
        return scores.masked_fill(scores < kth, NEG)


class TopP(LogitsProcessor):
    """Keeps the most probable tokens until their probability reaches p (nucleus sampling, `TopPLogitsWarper`):
    a token is banned when the probability of the tokens before it, most probable first, already reaches p; the
    `min_keep` best always stay."""

    def __init__(self, p: float, min_keep: int = 1):
        self.p, self.min_keep = p, min_keep

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        if self.p >= 1:
            return scores
        sorted_scores, order = scores.sort(-1, descending=True)
        probs = sorted_scores.softmax(-1)
        drop = probs.cumsum(-1) - probs >= self.p
        drop[:, : self.min_keep] = False
        return scores.scatter(-1, order, sorted_scores.masked_fill(drop, NEG))


def sampling_warpers(temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0) -> ProcessorList:
    """Temperature, then top-k (0: none), then top-p (1: none): the warpers of ancestral sampling, in
    transformers' order (a temperature of 1 still divides, so outputs stay bit-identical to dividing always)."""
    out = ProcessorList([Temperature(temperature)])
    if top_k:
        out.append(TopK(top_k))
    if top_p < 1:
        out.append(TopP(top_p))
    return out


class MinLength(LogitsProcessor):
    """Bans </s> until a row has `tokens` output tokens (`MinLengthLogitsProcessor` with min_length = tokens + 1:
    its length counts the decoder's start token)."""

    def __init__(self, tokens: int, eos: int):
        self.tokens, self.eos = tokens, eos

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        if input_ids.shape[-1] - 1 >= self.tokens:
            return scores
        banned = torch.arange(scores.shape[-1], device=scores.device) == self.eos
        return scores.masked_fill(banned, NEG)


def _ban(scores: Tensor, index: Tensor, hit: Tensor) -> Tensor:
    """`scores` with -inf at each (row, index[row, j]) where hit[row, j] (duplicates fine)."""
    V = scores.shape[-1]
    index = torch.where(hit, index, V)  # misses go to a spare column
    mask = torch.zeros(scores.shape[0], V + 1, dtype=torch.bool, device=scores.device)
    mask.scatter_(1, index, True)
    return scores.masked_fill(mask[:, :V], NEG)


class NoRepeatNGram(LogitsProcessor):
    """Bans each token that would repeat an n-gram of `size` tokens already in the row, the start token included
    (`NoRepeatNGramLogitsProcessor`); all rows and windows at once."""

    def __init__(self, size: int):
        self.size = size

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        n, length = self.size, input_ids.shape[-1]
        if length + 1 < n or length < n:
            return scores
        if n == 1:
            return _ban(scores, input_ids, torch.ones_like(input_ids, dtype=torch.bool))
        windows = input_ids.unfold(1, n, 1)  # (rows, length - n + 1, n)
        last = input_ids[:, length - n + 1 :]  # the n - 1 tokens an n-gram would continue
        hit = (windows[..., :-1] == last[:, None, :]).all(-1)
        return _ban(scores, windows[..., -1], hit)


class RepetitionPenalty(LogitsProcessor):
    """Each token already in the row (the start token included): its score divided by `penalty` when positive,
    multiplied when negative (Keskar et al. 2019; `RepetitionPenaltyLogitsProcessor`). Scores here are
    log-probabilities, as transformers' beam search sees them; its greedy search and sampling penalise logits."""

    def __init__(self, penalty: float):
        self.penalty = penalty

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        score = scores.gather(1, input_ids)
        score = torch.where(score < 0, score * self.penalty, score / self.penalty)
        return scores.scatter(1, input_ids, score)


class Forced(LogitsProcessor):
    """Forces `token` as the output token at position `at` (0: the first): every other token banned there
    (`ForcedBOSTokenLogitsProcessor` at 0; `ForcedEOSTokenLogitsProcessor(max_length, eos)` at max_length - 2)."""

    def __init__(self, token: int, at: int):
        self.token, self.at = token, at

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        if input_ids.shape[-1] - 1 != self.at:
            return scores
        other = torch.arange(scores.shape[-1], device=scores.device) != self.token
        return scores.masked_fill(other, NEG).masked_fill(~other, 0.0)


class BannedTokens(LogitsProcessor):
    """Never these token ids (`NoBadWordsLogitsProcessor` with one-token bad words)."""

    def __init__(self, ids: Sequence[int]):
        self.ids = list(ids)

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        banned = torch.zeros(scores.shape[-1], dtype=torch.bool, device=scores.device)
        banned[self.ids] = True
        return scores.masked_fill(banned, NEG)


class PrefixAllowedTokens(LogitsProcessor):
    """Only the tokens `allowed(batch_id, prefix)` lists for each row (`PrefixConstrainedLogitsProcessor`):
    `prefix` the row's input_ids (1-D), `batch_id` its row index // `num_beams`; one call per row, the mask set
    in one indexing."""

    def __init__(self, allowed: Callable[[int, Tensor], Sequence[int]], num_beams: int = 1):
        self.allowed, self.num_beams = allowed, num_beams

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        lists = [list(self.allowed(r // self.num_beams, row)) for r, row in enumerate(input_ids)]
        return allow_only(scores, lists)


def allow_only(scores: Tensor, lists: Sequence[Sequence[int]]) -> Tensor:
    """`scores` with every token but each row's listed ones at -inf."""
    rows = torch.repeat_interleave(torch.arange(len(lists)), torch.tensor([len(a) for a in lists], dtype=torch.long))
    cols = torch.tensor([i for a in lists for i in a], dtype=torch.long)
    mask = torch.full_like(scores, NEG)
    mask[rows.to(scores.device), cols.to(scores.device)] = 0.0
    return scores + mask


# ---------------------------------------------------------------- settings and registrations


@dataclass
class TemperatureOptions:
    value: float = option(1.0, "divide each score by this (below 1: sharper, above: flatter)", gt=0)


@dataclass
class TopKOptions:
    k: int = option(50, "keep the k best tokens of each step", ge=1)
    min_keep: int = option(1, "keep at least this many", ge=1)


@dataclass
class TopPOptions:
    p: float = option(0.9, "keep the most probable tokens until their probability reaches p", gt=0, le=1)
    min_keep: int = option(1, "keep at least this many", ge=1)


@dataclass
class MinLengthOptions:
    tokens: int = option(1, "</s> is banned until an output has this many tokens", ge=0)


@dataclass
class NoRepeatNGramOptions:
    size: int = option(3, "no n-gram of this many tokens occurs twice in an output", ge=1)


@dataclass
class RepetitionPenaltyOptions:
    penalty: float = option(1.2, "scores of tokens already output: / penalty when positive, * when negative", gt=0)


@dataclass
class ForcedBOSOptions:
    token: str = option("<s>", "the output token every output starts with")


@dataclass
class ForcedEOSOptions:
    after: int = option(10, "</s> is forced after this many output tokens", ge=0)


@dataclass
class BannedTokensOptions:
    tokens: list[str] = option([], "output tokens never produced")


@register_processor("repetition_penalty", options=RepetitionPenaltyOptions, rank=10)
def build_repetition_penalty(o, space):
    """Penalise tokens already output (Keskar et al. 2019)."""
    return RepetitionPenalty(o.penalty)


@register_processor("no_repeat_ngram", options=NoRepeatNGramOptions, rank=20)
def build_no_repeat_ngram(o, space):
    """No n-gram occurs twice in an output."""
    return NoRepeatNGram(o.size)


@register_processor("banned_tokens", options=BannedTokensOptions, rank=30)
def build_banned_tokens(o, space):
    """Tokens never produced."""
    return BannedTokens(
        [space.id_of(t, f"decode.processors.banned_tokens.tokens[{i}]") for i, t in enumerate(o.tokens)]
    )


@register_processor("min_length", options=MinLengthOptions, rank=40)
def build_min_length(o, space):
    """No </s> before a minimum number of output tokens."""
    return MinLength(o.tokens, space.eos)


@register_processor("forced_bos", options=ForcedBOSOptions, rank=60)
def build_forced_bos(o, space):
    """The first output token is fixed."""
    return Forced(space.id_of(o.token, "decode.processors.forced_bos.token"), 0)


@register_processor("forced_eos", options=ForcedEOSOptions, rank=70)
def build_forced_eos(o, space):
    """</s> after a fixed number of output tokens."""
    return Forced(space.eos, o.after)


@register_processor("temperature", options=TemperatureOptions, rank=80)
def build_temperature(o, space):
    """Scores divided by a temperature."""
    return Temperature(o.value)


@register_processor("top_k", options=TopKOptions, rank=90)
def build_top_k(o, space):
    """Only the k best tokens of each step."""
    return TopK(o.k, o.min_keep)


@register_processor("top_p", options=TopPOptions, rank=100)
def build_top_p(o, space):
    """Only the most probable tokens up to probability p (nucleus)."""
    return TopP(o.p, o.min_keep)
