"""Diverse beam search (Vijayakumar et al. 2018; fairseq's `DiverseBeamSearch`): `groups` of K/G hypotheses, each
keeping its own best; a token loses `diversity` per earlier group's candidate of it (in the score). 1 group: beam."""

from dataclasses import dataclass

import torch

from structseq.decode.search import Step
from structseq.decode.strategies import Strategy
from structseq.errors import ConfigError
from structseq.fields import option
from structseq.registry import register_strategy


@dataclass
class Diverse:
    groups: int = option(1, "diverse-beam: groups the beam splits into (decode.beam a multiple of it)", ge=1)
    diversity: float = option(0.5, "diverse-beam: the penalty on a token per earlier group's candidate of it", ge=0)


@register_strategy("diverse-beam", options=Diverse)
class DiverseBeam(Strategy, Step):  # the strategy is its own step rule
    def check(self):
        o = self.settings.options or Diverse()
        self.G, self.strength = o.groups if self.width > 1 else 1, o.diversity  # one hypothesis: one group
        if self.width % self.G:
            raise ConfigError(f"'decode.groups' {self.G}: the beam ({self.width}) must be a multiple of it")

    def rule(self, ids):
        return self

    def start(self, K, device):
        return Step.start(self, K // self.G, device).repeat(self.G)

    def step(self, lp, scores):
        k, seen, out = lp.shape[1] // self.G, torch.zeros_like(lp[:, :1]), []
        for g in range(0, lp.shape[1], k):
            cand, origin, token = Step.step(self, lp[:, g : g + k] - self.strength * seen, scores[:, g : g + k])
            seen = seen.scatter_add(2, token[:, None], torch.ones_like(token[:, None], dtype=seen.dtype))
            out.append((cand, origin + g, token))
        return tuple(torch.cat(x, 1) for x in zip(*out))

    def may_finish(self, C, K, device):
        return Step.may_finish(self, C // self.G, K // self.G, device).repeat(self.G)

    def select(self, cand, K):
        c, (scores, i) = cand.shape[1] // self.G, cand.view(len(cand), self.G, -1).topk(K // self.G, dim=2)
        return scores.flatten(1), (i + c * torch.arange(self.G, device=i.device)[:, None]).flatten(1)
