"""Ancestral sampling as a step of the one search loop (`structseq.decode.search.search`): each of a
sentence's `n` samples is its own search of one hypothesis whose step draws its token (`SampleStep`); the
loop's length limit, bans, finished-output handling and ranking (`normalized`) are beam search's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from structseq.data.vocab import Vocab
from structseq.decode.search import Hypotheses, Step, search
from structseq.errors import ConfigError
from structseq.fields import option

#: the temperatures a float32 division keeps finite: outside, every log-probability becomes 0, -inf or NaN
TEMPERATURES = (1e-6, 1e6)


@dataclass(frozen=True)
class Sampling:
    """Ancestral sampling settings (the `sampling` strategy's `decode` keys): logits / temperature, then the
    `top_k` most probable tokens (0: all), then the smallest set of them whose probability reaches `top_p`
    (1: all); `seed` seeds the draws."""

    temperature: float = option(
        1.0, "sampling: divide log-probabilities by T (near 0: greedy; large: uniform)", ge=TEMPERATURES[0],
        le=TEMPERATURES[1],
    )  # fmt: skip
    top_k: int = option(0, "sampling: only the K most probable tokens (0: all)", ge=0)
    top_p: float = option(1.0, "sampling: the smallest set of tokens with this much probability (1: all)", gt=0, le=1)
    seed: int = option(
        0, "sampling: the random seed of every draw (same seed, same samples)", ge=0, lt=2**63, role="seed"
    )

    def __post_init__(self):
        low, high = TEMPERATURES
        if not low <= self.temperature <= high:  # inf: every log-probability 0 / inf, a NaN draw
            raise ConfigError(
                f"'--temperature' must be > 0 and finite, within [{low:g}, {high:g}] (a float32 division overflows "
                f"outside), got {self.temperature} (near zero: greedy; large: uniform)"
            )
        if self.top_k < 0:
            raise ConfigError(f"'--top-k' must be >= 0 (0: no limit), got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ConfigError(f"'--top-p' must be in (0, 1], got {self.top_p}")

    def overrides(self) -> list[str]:
        """These settings as the `decode` keys of the sampling strategy (`--set` items): the one route of every
        sampled output, recorded, named and seeded as any decode key."""
        keys = (f"decode.{k}={getattr(self, k)!r}" for k in ("temperature", "top_k", "top_p", "seed"))
        return ["decode.strategy=sampling", *keys]


def _draw(lp: Tensor, s: Sampling, generator: torch.Generator | None) -> Tensor:
    """One token per row of log-probabilities (n, V) under the sampling settings: temperature first, then
    top-k, then top-p (transformers' warper order), on the tempered distribution."""
    logits = lp / s.temperature
    if s.top_k:
        kth = logits.topk(min(s.top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if s.top_p < 1:
        sorted_logits, order = logits.sort(-1, descending=True)
        probs = sorted_logits.softmax(-1)
        drop = probs.cumsum(-1) - probs >= s.top_p  # the mass before this token already reaches top_p
        drop[:, 0] = False
        logits = logits.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
    return torch.multinomial(logits.softmax(-1), 1, generator=generator)[:, 0]


class SampleStep(Step):
    """One hypothesis that draws its next token (`_draw`); its score is the token's own log-probability
    (untempered, unfiltered). A row with nothing left (a diverged model) ends with </s> at score 0."""

    def __init__(self, sampling: Sampling, generator: torch.Generator | None, eos: int):
        self.sampling, self.generator, self.eos = sampling, generator, eos

    def start(self, K: int, device) -> Tensor:
        return torch.zeros(K, device=device)

    def step(self, lp: Tensor, scores: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        n, K, V = lp.shape
        lp = lp.view(n * K, V)
        is_eos = torch.arange(V, device=lp.device) == self.eos
        lp = torch.where(~lp.isfinite().any(-1, keepdim=True) & is_eos, 0.0, lp)
        token = _draw(lp, self.sampling, self.generator)
        cand = scores.view(-1) + lp.gather(1, token[:, None])[:, 0]
        return cand.view(n, K), torch.zeros_like(token).view(n, K), token.view(n, K)


@torch.no_grad()
def sample(
    model,
    inputs: Mapping[str, Tensor],
    max_len: Tensor,
    sampling: Sampling = Sampling(),
    *,
    n: int = 1,
    len_penalty: float = 1.0,
    generator: torch.Generator | None = None,
    eos: int = Vocab.eos,
    bos: int = Vocab.bos,
    pad: int = Vocab.pad,
    eos_at_limit: bool = True,
    processors=None,
) -> Hypotheses:
    """`n` samples per sentence (`nbest`: ranked as beam search ranks, by `normalized`; `tokens`/`scores`: the
    first). A score is the sample's log-probability under the model itself (untempered, unfiltered, </s>
    included), so it compares with beam and teacher-forced scores. `generator` (on the model's device) makes
    the draws reproducible; its own default is torch's global generator."""
    return search(
        model, inputs, max_len, SampleStep(sampling, generator, eos), beam=1, copies=n, len_penalty=len_penalty,
        nbest=True, eos=eos, bos=bos, pad=pad, eos_at_limit=eos_at_limit, processors=processors,
    )  # fmt: skip
