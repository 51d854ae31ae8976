"""What ancestral sampling (`decode.search.sample`, `_draw`) promises: a sample's score is its untempered log-
probability under the model (</s> included), the length limit is exact, <pad> and <s> are never drawn, each
sentence's samples come from its own row, n-best lists are ranked like beam search's, and temperature, top-k
and top-p keep exactly the tokens and probabilities they name. A fixed Markov model (next-token log-probs read
from a table by the previous token and the sentence's first source token) is the reference."""

import math

import pytest
import torch

from structseq.decode.sampling import Sampling, _draw, sample
from structseq.decode.search import normalized
from structseq.errors import ConfigError

PAD, BOS, EOS, V = 0, 1, 2, 7


class Markov:
    """log p(next | prev, sentence) = table[sentence's src[:, 0], prev]: `table` (S, V, V) of log-probs."""

    def __init__(self, table):
        self.table = table

    def encode(self, inputs):
        return {"which": inputs["src"][:, 0]}

    def init_state(self, enc):
        return dict(enc)

    def step(self, prev, state):
        return self.table[state["which"], prev], state


def _table(seed=0, eos_bias=0.0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, V, V, generator=g)
    logits[..., EOS] += eos_bias
    return logits.log_softmax(-1)


def _log_prob(table, which, tokens):
    """The reference score: sum of log p over tokens then </s>, unfiltered and untempered."""
    prev, total = BOS, 0.0
    for t in [*tokens, EOS]:
        total += float(table[which, prev, t])
        prev = t
    return total


@pytest.mark.parametrize("sampling", [Sampling(), Sampling(temperature=2.5, top_k=3), Sampling(top_p=0.6)])
def test_scores_are_the_models_own_log_probabilities(sampling):
    table = _table()
    src = torch.tensor([[0, 5], [1, 5], [2, 5]])
    g = torch.Generator().manual_seed(3)
    hyp = sample(Markov(table), {"src": src}, torch.tensor([6, 6, 6]), sampling, n=4, generator=g)
    for which, entries in enumerate(hyp.nbest):
        assert len(entries) == 4
        for tokens, score in entries:
            assert score == pytest.approx(_log_prob(table, which, tokens), abs=1e-5)
            assert PAD not in tokens and BOS not in tokens and EOS not in tokens
    assert hyp.tokens == [e[0][0] for e in hyp.nbest] and hyp.scores == [e[0][1] for e in hyp.nbest]


def test_the_length_limit_is_exact_and_per_sentence():
    """A model that nearly never ends: every sample stops at exactly its sentence's limit."""
    table = _table(eos_bias=-30.0)
    src = torch.tensor([[0], [1], [2]])
    hyp = sample(Markov(table), {"src": src}, torch.tensor([1, 3, 5]), n=3, generator=torch.Generator().manual_seed(0))
    assert [sorted({len(t) for t, _ in e}) for e in hyp.nbest] == [[1], [3], [5]]


def test_each_sentence_samples_from_its_own_row():
    """Sentence s can only emit token 3 + s (then </s>), so a sample on another sentence's row shows."""
    table = torch.full((3, V, V), -1e9)
    for s in range(3):
        table[s, BOS, 3 + s] = 0.0
        table[s, 3 + s, EOS] = 0.0
    table = table.log_softmax(-1)
    src = torch.tensor([[2], [0], [1]])
    hyp = sample(Markov(table), {"src": src}, torch.tensor([4, 4, 4]), n=3)
    assert [{tuple(t) for t, _ in e} for e in hyp.nbest] == [{(5,)}, {(3,)}, {(4,)}]


@pytest.mark.parametrize("len_penalty", [0.0, 1.0])
def test_nbest_is_ranked_as_beam_search_ranks(len_penalty):
    table = _table(seed=4)
    hyp = sample(
        Markov(table),
        {"src": torch.tensor([[0]])},
        torch.tensor([6]),
        n=12,
        len_penalty=len_penalty,
        generator=torch.Generator().manual_seed(1),
    )
    keys = [normalized(s, len(t), len_penalty) for t, s in hyp.nbest[0]]
    assert keys == sorted(keys, reverse=True) and len({len(t) for t, _ in hyp.nbest[0]}) > 1


def test_the_same_generator_seed_draws_the_same_samples():
    table, src = _table(), torch.tensor([[0], [1]])

    def run(seed):
        g = torch.Generator().manual_seed(seed)
        return sample(Markov(table), {"src": src}, torch.tensor([5, 5]), n=5, generator=g).nbest

    assert run(8) == run(8) and run(8) != run(9)


def test_temperature_divides_the_log_probabilities():
    """4000 draws at temperature 2 follow softmax(lp / 2) (sd of a frequency under 0.008), not softmax(lp)."""
    lp = torch.log_softmax(torch.tensor([[2.0, 0.0, -1.0]]), -1)
    draws = _draw(lp.repeat(4000, 1), Sampling(temperature=2.0), torch.Generator().manual_seed(0))
    freq = torch.bincount(draws, minlength=3).float() / 4000
    assert torch.allclose(freq, (lp[0] / 2).softmax(-1), atol=0.03)
    assert not torch.allclose(freq, lp[0].exp(), atol=0.05)


def test_top_k_and_top_p_at_their_boundaries():
    lp = torch.log(torch.tensor([[0.5, 0.25, 0.125, 0.0625, 0.0625]])).repeat(3000, 1)
    g = torch.Generator().manual_seed(0)
    assert set(_draw(lp, Sampling(top_k=1), g).tolist()) == {0}  # top-1 is greedy
    assert set(_draw(lp, Sampling(top_k=99), g).tolist()) == {0, 1, 2, 3, 4}  # more than V: all
    assert set(_draw(lp, Sampling(top_p=0.74), g).tolist()) == {0, 1}  # 0.5 + 0.25 reaches 0.74
    assert set(_draw(lp, Sampling(top_p=0.76), g).tolist()) == {0, 1, 2}  # it does not reach 0.76
    assert set(_draw(lp, Sampling(top_p=0.01), g).tolist()) == {0}  # the most probable token always stays
    kept = _draw(lp, Sampling(top_k=2), g)
    assert abs(float((kept == 0).float().mean()) - 2 / 3) < 0.04  # renormalised over the kept tokens


@pytest.mark.parametrize(
    "bad", [{"temperature": 0}, {"temperature": -1}, {"temperature": math.nan}, {"top_k": -1}, {"top_p": 0}]
)
def test_sampling_settings_are_checked(bad):
    with pytest.raises(ConfigError):
        Sampling(**bad)
    assert Sampling(top_p=1.0).top_p == 1.0
