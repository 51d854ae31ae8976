"""Beam search against an exhaustive-search oracle on a tiny model and vocabulary: a beam at least as wide as
the number of outputs is exact search (its n-best list is the oracle's whole ranking, under every length penalty
and stopping rule), and a finished output is never evicted by open prefixes that end lower (issue 44 item 1)."""

from __future__ import annotations

import itertools

import pytest
import torch

from structseq.config import config_from_dict
from structseq.decode import decode
from structseq.decode.search import beam_search, normalized
from structseq.errors import ConfigError

PAD, BOS, EOS = 0, 1, 2
V = 5  # <pad> <s> </s> and two words (3, 4)
WORDS = (3, 4)


def prefix_log_probs(src: tuple, prefix: tuple) -> torch.Tensor:
    """The toy model's next-token log-probabilities: a fixed random function of the source and the whole prefix
    (so no two prefixes share a distribution), flat enough that beams reorder."""
    g = torch.Generator().manual_seed(hash((src, prefix)) % 2**31)
    return (torch.randn(V, generator=g) * 1.5).log_softmax(-1)


class Toy:
    """An autoregressive model over `prefix_log_probs` (encode / init_state / step), its state the prefix so far."""

    def __init__(self, fn=prefix_log_probs):
        self.fn = fn

    def encode(self, inputs):
        return inputs["src"]

    def init_state(self, src):
        return {"src": src, "prefix": src.new_empty(src.shape[0], 0)}

    def step(self, prev, state):
        prefix = torch.cat([state["prefix"], prev[:, None]], 1)
        lp = torch.stack([self.fn(tuple(s.tolist()), tuple(p.tolist())) for s, p in zip(state["src"], prefix)])
        return lp, {"src": state["src"], "prefix": prefix}


def oracle(src: tuple, limit: int, len_penalty: float, fn=prefix_log_probs) -> list[tuple[list[int], float]]:
    """Every output of at most `limit` words with its log-probability (</s> included, the search's rules: <pad>
    and <s> banned without renormalising), best first by `normalized`."""
    out = []
    for n in range(limit + 1):
        for words in itertools.product(WORDS, repeat=n):
            seq = (BOS, *words)
            score = sum(float(fn(src, seq[: i + 1])[tok]) for i, tok in enumerate((*words, EOS)))
            out.append((list(words), score))
    return sorted(out, key=lambda e: -normalized(e[1], len(e[0]), len_penalty))


SRC = torch.tensor([[5, 6, 2], [7, 2, 0], [8, 9, 2], [6, 6, 2]])
LIMITS = torch.tensor([4, 2, 3, 4])  # at most 31 outputs a sentence


@pytest.mark.parametrize("len_penalty", [0.0, 0.6, 1.0])
@pytest.mark.parametrize("early_stopping", [True, False, "never"])
def test_a_beam_as_wide_as_the_outputs_is_exact_search(len_penalty, early_stopping):
    hyp = beam_search(Toy(), {"src": SRC}, 31, LIMITS, len_penalty, nbest=True, early_stopping=early_stopping)
    best = beam_search(Toy(), {"src": SRC}, 31, LIMITS, len_penalty, early_stopping=early_stopping)
    for b, entries in enumerate(hyp.nbest):
        want = oracle(tuple(SRC[b].tolist()), int(LIMITS[b]), len_penalty)
        assert [t for t, _ in entries] == [t for t, _ in want]
        assert [s for _, s in entries] == pytest.approx([s for _, s in want], abs=1e-4)
        assert best.tokens[b] == want[0][0]


@pytest.mark.parametrize("len_penalty", [0.0, 1.0])
def test_nbest_lists_are_the_top_of_the_oracle_ranking(len_penalty):
    hyp = decode(Toy(), {"src": SRC}, LIMITS, beam=31, nbest=4, len_penalty=len_penalty, early_stopping="never")
    for b, entries in enumerate(hyp.nbest):
        want = oracle(tuple(SRC[b].tolist()), int(LIMITS[b]), len_penalty)[:4]
        assert [t for t, _ in entries] == [t for t, _ in want]


def trap(src: tuple, prefix: tuple) -> torch.Tensor:
    """The traced failure in miniature: `3 </s>` (-1.0) ends at step 2 among the best two, then the two
    continuations of `4 3` score higher (-0.7, -0.8) although every completion of them ends below -6."""
    table = {
        (BOS,): {3: -0.5, 4: -0.55},
        (BOS, 3): {EOS: -0.5},
        (BOS, 4): {3: -0.05, 4: -0.95},
        (BOS, 4, 3): {3: -0.1, 4: -0.2},
    }
    lp = torch.full((V,), -6.0)
    for tok, value in table.get(prefix, {}).items():
        lp[tok] = value
    return lp


@pytest.mark.parametrize("early_stopping", [True, False, "never"])
def test_a_finished_output_is_never_evicted_by_prefixes_that_end_lower(early_stopping):
    """The search before issue 44 kept `3 </s>` in a beam slot, let `4 3 3` and `4 3 4` evict it and returned a
    longer output below -6 (under every stopping rule)."""
    src, limit = torch.tensor([[5, 2]]), torch.tensor([4])
    hyp = beam_search(Toy(trap), {"src": src}, 2, limit, 0.0, early_stopping=early_stopping)
    assert hyp.tokens == [[3]] and hyp.scores[0] == pytest.approx(-1.0)
    assert oracle((5, 2), 4, 0.0, trap)[0] == ([3], pytest.approx(-1.0))


def test_early_stopping_is_a_checked_decode_option():
    for value in (True, False, "never"):
        assert config_from_dict({"decode": {"early_stopping": value}}).decode.early_stopping == value
    assert config_from_dict({}).decode.early_stopping is False  # transformers' default
    with pytest.raises(ConfigError, match="early_stopping"):
        config_from_dict({"decode": {"early_stopping": "sometimes"}})
