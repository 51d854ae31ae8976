"""What `decode.ensemble` promises: per step the log of the members' mean probability (not the mean of their
log-probabilities), independent of the members' order, the same in teacher-forced scoring; each member keeps
its own state; members must be autoregressive, named once, of one task and with the same vocabularies in id
order or the same tokens at other ids (mapped back: the member then scores as if trained with the first's);
errors name both runs and the first difference."""

import math

import pytest
import torch
from torch import nn

from structseq.data.vocab import SPECIALS, Vocab
from structseq.decode.ensemble import (
    AVERAGE,
    Ensemble,
    Remapped,
    average_log_probs,
    check_members,
    check_same_vocabs,
)
from structseq.errors import ConfigError
from structseq.models.base import Autoregressive

V = 6


class Member(Autoregressive):
    """log p(next | prev) from a fixed table; its state counts its own steps."""

    width = 8

    def __init__(self, seed):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.table = nn.Parameter((torch.randn(V, V, generator=g) * 2).log_softmax(-1), requires_grad=False)

    def encode(self, inputs):
        return {"n": inputs["src"].shape[0]}

    def init_state(self, enc):
        return {"steps": torch.zeros(enc["n"], dtype=torch.long)}

    def step(self, prev, state):
        return self.table[prev], {"steps": state["steps"] + 1}

    def forward(self, batch):
        return self.table[batch["tgt_in"]]


def _reference(tables, rows):
    """log((1/M) sum_m p_m), in float64."""
    probs = torch.stack([t[rows].double().exp() for t in tables])
    return probs.mean(0).log()


def test_the_ensemble_averages_probabilities_not_log_probabilities():
    members = [Member(s) for s in (1, 2, 3)]
    ens = Ensemble(members)
    prev = torch.tensor([1, 4, 5])
    lp, state = ens.step(prev, ens.init_state(ens.encode({"src": torch.zeros(3, 2, dtype=torch.long)})))
    expected = _reference([m.table for m in members], prev)
    assert torch.allclose(lp.double(), expected, atol=1e-6)
    assert not torch.allclose(lp, torch.stack([m.table[prev] for m in members]).mean(0), atol=1e-3)
    assert torch.allclose(lp.exp().sum(-1), torch.ones(3), atol=1e-5)  # still a distribution
    assert AVERAGE == "log-mean-prob"
    assert [s["steps"].tolist() for s in state] == [[1, 1, 1]] * 3  # each member's own state


def test_member_order_does_not_matter_and_teacher_forcing_agrees_with_steps():
    members = [Member(s) for s in (4, 5)]
    batch = {"src": torch.zeros(2, 1, dtype=torch.long), "tgt_in": torch.tensor([[1, 3, 4], [1, 2, 5]])}
    ab, ba = Ensemble(members)(batch), Ensemble(members[::-1])(batch)
    assert torch.allclose(ab, ba, atol=1e-6)
    ens = Ensemble(members)
    state = ens.init_state(ens.encode(batch))
    for t in range(3):
        lp, state = ens.step(batch["tgt_in"][:, t], state)
        assert torch.allclose(lp, ab[:, t], atol=1e-6)


def test_one_member_and_identical_members_are_the_member_itself():
    m = Member(7)
    lp = torch.log_softmax(torch.randn(2, V), -1)
    assert average_log_probs([lp]) is lp
    assert torch.allclose(average_log_probs([lp, lp, lp]), lp, atol=1e-6)
    half = average_log_probs([torch.log(torch.tensor([1.0, 0.0])), torch.log(torch.tensor([0.0, 1.0]))])
    assert torch.allclose(half, torch.full((2,), math.log(0.5)))  # a token one member rules out stays possible
    assert Ensemble([m]).width == m.width


def test_members_must_be_autoregressive_and_there_must_be_one():
    with pytest.raises(ConfigError, match="at least one"):
        Ensemble([])

    class Flat(nn.Module):
        autoregressive = False
        width = 8

    with pytest.raises(ConfigError, match="b is not an autoregressive model"):
        Ensemble([Member(1), Flat()], ["a", "b"])


def _vocabs(tgt):
    return {"src": Vocab([*SPECIALS, "x", "y"]), "tgt": Vocab([*SPECIALS, *tgt])}


def test_check_members_names_the_runs_that_do_not_fit():
    check_members(["r1", "r2"], ["seq2seq"] * 2, [_vocabs(["a", "b"]), _vocabs(["a", "b"])])
    with pytest.raises(ConfigError, match="named twice"):
        check_members(["r1", "r1"], ["seq2seq"] * 2, [_vocabs(["a"]), _vocabs(["a"])])
    with pytest.raises(ConfigError, match="one task.*r1: seq2seq, r2: supertag"):
        check_members(["r1", "r2"], ["seq2seq", "supertag"], [_vocabs(["a"]), _vocabs(["a"])])
    with pytest.raises(ConfigError, match=r"r1 and r2 differ in the 'tgt' vocabulary .*first difference at id 5"):
        check_members(["r1", "r2"], ["seq2seq"] * 2, [_vocabs(["a", "b"]), _vocabs(["a", "c"])])  # as many tokens
    same, moved = check_members(["r1", "r2"], ["seq2seq"] * 2, [_vocabs(["a", "b"]), _vocabs(["b", "a"])])
    assert same == {} and moved == {"tgt": [0, 1, 2, 3, 5, 4]}  # the same tokens at other ids: mapped


def test_a_member_with_reordered_vocabularies_scores_as_if_trained_with_the_firsts():
    """A member whose target ids are permuted, wrapped in `Remapped`, gives the original member's numbers."""
    member = Member(3)
    perm = [0, 1, 2, 3, 5, 4]  # its id of each of the first member's tokens
    permuted = Member(3)
    with torch.no_grad():
        permuted.table.copy_(member.table[perm][:, perm])  # same model, ids 4 and 5 swapped
    wrapped = Remapped(permuted, {"tgt": perm, "src": list(range(V))})
    batch = {"src": torch.zeros(2, 1, dtype=torch.long), "tgt_in": torch.tensor([[1, 4, 5], [1, 5, 3]])}
    assert torch.allclose(wrapped(batch), member(batch))
    lp, _ = wrapped.step(torch.tensor([4, 5]), wrapped.init_state(wrapped.encode(batch)))
    assert torch.allclose(lp, member.table[torch.tensor([4, 5])])


def test_check_same_vocabs_counts_types_and_missing_vocabularies():
    with pytest.raises(ConfigError, match=r"6 vs 7 types"):
        check_same_vocabs({"a": _vocabs(["p", "q"]), "b": _vocabs(["p", "q", "r"])})
    with pytest.raises(ConfigError, match=r"'ctx' vocabulary \(only a has one\)"):
        check_same_vocabs({"a": {**_vocabs(["p"]), "ctx": Vocab([*SPECIALS, "c"])}, "b": _vocabs(["p"])})
    with pytest.raises(ConfigError, match=r"a and c differ"):
        check_same_vocabs({"a": _vocabs(["p"]), "b": _vocabs(["p"]), "c": _vocabs(["z"])})
