"""Bit-identity of decoding across refactorings: greedy, beam (n-best lists, three stopping rules, length
penalties, with and without a forced </s> at the limit) and seeded sampling on a small stateful toy model,
compared with outputs saved from the code before the search became one loop with step rules (da0ad07):
`tests/fixtures/decode_identity.json`. Scores are compared exactly (JSON keeps a float's every bit)."""

import functools
import json

import pytest
import torch

from structseq.decode.sampling import Sampling, sample
from structseq.decode.search import beam_search, greedy
from tests.fixtures.paths import FIXTURES

FIXTURE = FIXTURES / "decode_identity.json"
V = 9


class Toy:
    """A second-order model whose state must be reordered with the beam: log p(next | the two previous
    tokens, the sentence's first source token, the step), from fixed random tables."""

    def __init__(self, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.a = torch.randn(V, V, V, generator=g) * 1.5
        self.b = torch.randn(V, V, generator=g)
        self.c = torch.randn(16, V, generator=g) * 0.5

    def encode(self, inputs):
        return {"which": inputs["src"][:, 0]}

    def init_state(self, enc):
        n = enc["which"].shape[0]
        return {"which": enc["which"], "prev2": torch.full((n,), 1), "t": torch.zeros(n, dtype=torch.long)}

    def step(self, prev, state):
        logits = self.a[state["prev2"], prev] + self.b[state["which"]] + self.c[state["t"].clamp(max=15)]
        new = {"which": state["which"], "prev2": prev, "t": state["t"] + 1}
        return logits.log_softmax(-1), new


SRC = torch.tensor([[3, 4, 2, 0], [5, 2, 0, 0], [7, 6, 5, 2], [4, 2, 0, 0], [8, 3, 2, 0]])
LIMITS = torch.tensor([6, 3, 8, 5, 7])


def _hyp(h):
    return {"tokens": h.tokens, "scores": h.scores, "nbest": h.nbest}


def outputs() -> dict:
    """Every case's Hypotheses as JSON-ready lists."""
    out, model, inputs = {}, Toy(), {"src": SRC}
    for eal in (True, False):
        out[f"greedy-eal{eal}"] = _hyp(greedy(model, inputs, LIMITS, eos_at_limit=eal))
        for beam in (2, 5):
            for lp in (0.0, 0.6, 1.0, 2.0):
                for es in (False, True, "never"):
                    for nbest in (False, True):
                        h = beam_search(model, inputs, beam, LIMITS, lp, nbest, eos_at_limit=eal, early_stopping=es)
                        out[f"beam{beam}-lp{lp}-es{es}-nbest{nbest}-eal{eal}"] = _hyp(h)
    for i, s in enumerate([Sampling(), Sampling(temperature=2.5, top_k=3), Sampling(top_p=0.6), Sampling(0.7, 4, 0.9)]):
        for n in (1, 4):
            g = torch.Generator().manual_seed(11 + i)
            out[f"sample{i}-n{n}"] = _hyp(sample(model, inputs, LIMITS, s, n=n, len_penalty=1.0, generator=g))
    return out


@functools.cache
def _current() -> dict:
    return json.loads(json.dumps(outputs()))


@pytest.mark.parametrize("case", sorted(json.loads(FIXTURE.read_text())))
def test_outputs_equal_the_saved_outputs_of_da0ad07(case):
    assert _current()[case] == json.loads(FIXTURE.read_text())[case]


if __name__ == "__main__":  # how the fixture was made (on da0ad07)
    FIXTURE.write_text(json.dumps(outputs(), sort_keys=True, indent=0))
