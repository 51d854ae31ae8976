"""Malinin & Gales measures against their definitions, and ensemble scoring with fake runs."""

from __future__ import annotations

import zlib

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from structseq.compose import MEASURES, VocabularyMismatch, score_ensemble, sequence_measures, token_measures
from structseq.errors import ConfigError


def kl(p_log: torch.Tensor, q_log: torch.Tensor) -> torch.Tensor:
    """KL(p || q) over the last axis, straight from the definition."""
    p = p_log.exp()
    return (p * (p_log - q_log)).sum(-1)


def random_log_probs(seed: int, members: int, steps: int, vocab: int, scale: float = 3.0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(members, steps, vocab, generator=generator, dtype=torch.float64) * scale
    return torch.log_softmax(logits, -1)


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    members=st.integers(1, 6),
    steps=st.integers(1, 5),
    vocab=st.integers(2, 9),
    scale=st.floats(0.01, 8.0),
)
def test_measures_match_definitions(seed, members, steps, vocab, scale):
    lp = random_log_probs(seed, members, steps, vocab, scale)
    out = token_measures(lp)
    mean_log = torch.logsumexp(lp, 0) - torch.log(torch.tensor(float(members), dtype=torch.float64))
    rmi = torch.stack([kl(mean_log, lp[m]) for m in range(members)]).mean(0)
    epkl = torch.stack([kl(lp[m], lp[k]) for m in range(members) for k in range(members)]).mean(0)
    total = -(mean_log.exp() * mean_log).sum(-1)
    data = torch.stack([-(lp[m].exp() * lp[m]).sum(-1) for m in range(members)]).mean(0)
    torch.testing.assert_close(out["rmi"], rmi.clamp_min(0), atol=1e-10, rtol=1e-8)
    torch.testing.assert_close(out["epkl"], epkl.clamp_min(0), atol=1e-10, rtol=1e-8)
    torch.testing.assert_close(out["total"], total, atol=1e-10, rtol=1e-8)
    torch.testing.assert_close(out["data"], data, atol=1e-10, rtol=1e-8)
    torch.testing.assert_close(out["mi"], (total - data).clamp_min(0), atol=1e-10, rtol=1e-8)
    for name in ("rmi", "mi", "epkl"):
        assert (out[name] >= 0).all()
    torch.testing.assert_close(out["epkl"], out["mi"] + out["rmi"], atol=1e-9, rtol=1e-7)
    assert all(v.shape == (steps,) for v in out.values())


def test_identical_members_have_no_knowledge_uncertainty():
    single = random_log_probs(3, 1, 4, 11)
    out = token_measures(single.expand(5, -1, -1).clone())
    for name in ("rmi", "mi", "epkl"):
        torch.testing.assert_close(out[name], torch.zeros(4, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(out["total"], out["data"])


def test_zero_probabilities_are_handled():
    lp = torch.log(torch.tensor([[[0.5, 0.5, 0.0]], [[0.25, 0.75, 0.0]]], dtype=torch.float64))
    out = token_measures(lp)
    assert all(torch.isfinite(v).all() for v in out.values())
    direct = 0.5 * (
        kl(torch.log(torch.tensor([0.375, 0.625])), torch.log(torch.tensor([0.5, 0.5])))
        + kl(torch.log(torch.tensor([0.375, 0.625])), torch.log(torch.tensor([0.25, 0.75])))
    )
    assert out["rmi"].item() == pytest.approx(direct.item())


def test_sequence_score_is_token_mean():
    lp = random_log_probs(7, 3, 6, 5)
    tokens = token_measures(lp)
    seq = sequence_measures(lp)
    assert set(seq) == set(MEASURES)
    for name in MEASURES:
        assert seq[name] == pytest.approx(tokens[name].mean().item())
    with pytest.raises(ValueError):
        token_measures(lp[0])


class FakeRun:
    """Deterministic stand-in for structseq.api.Run: distributions depend on (member, source, target, step)."""

    def __init__(self, member: int, vocab: int = 13, tgt_vocab=None):
        self.member, self.vocab = member, vocab
        if tgt_vocab is not None:
            self.tgt_vocab = tgt_vocab
        self.calls: list[int] = []

    def translate(self, sources, *, beam=None):
        self.calls.append(len(sources))
        return [" ".join(reversed(s.split())) + f" m{self.member}" for s in sources]

    def token_log_probs(self, sources, targets):
        out = []
        for source, target in zip(sources, targets):
            seed = zlib.crc32(f"{self.member}|{source}|{target}".encode())
            g = torch.Generator().manual_seed(seed)
            rows = len(target.split()) + 1
            out.append(torch.log_softmax(torch.randn(rows, self.vocab, generator=g), -1))
        return out


SOURCES = ["a b c", "d e", "f", "g h i j", "k l"]


def test_score_ensemble_with_fakes():
    runs = [FakeRun(m) for m in range(4)]
    seen = []
    result = score_ensemble(runs, SOURCES, batch_size=2, progress=seen.append)
    assert seen == [2, 2, 1] and runs[0].calls == [2, 2, 1] and runs[1].calls == []
    assert result.hypotheses[0] == "c b a m0"
    assert result.n_rows.tolist() == [5, 4, 3, 6, 4]
    again = score_ensemble(runs, SOURCES, batch_size=5)
    for name in MEASURES:
        assert result.measures[name] == pytest.approx(again.measures[name])
        assert result.measures[name].shape == (5,)
    assert (result.measures["rmi"] > 0).all()
    lp = torch.stack([r.token_log_probs([SOURCES[1]], [result.hypotheses[1]])[0] for r in runs])
    assert result.measures["rmi"][1] == pytest.approx(sequence_measures(lp)["rmi"])
    assert score_ensemble(runs, SOURCES, decoder=2).hypotheses[0] == "c b a m2"


def test_vocabulary_mismatch_is_reported():
    with pytest.raises(VocabularyMismatch, match="target vocabulary"):
        score_ensemble([FakeRun(0), FakeRun(1, vocab=14)], SOURCES)
    with pytest.raises(VocabularyMismatch, match="member 1"):
        score_ensemble([FakeRun(0, tgt_vocab=["a", "b"]), FakeRun(1, tgt_vocab=["a", "c"])], SOURCES)
    score_ensemble([FakeRun(0, tgt_vocab=["a", "b"]), FakeRun(1, tgt_vocab=("a", "b"))], SOURCES[:1])


def test_bad_ensemble_settings():
    with pytest.raises(ConfigError):
        score_ensemble([], SOURCES)
    with pytest.raises(ConfigError):
        score_ensemble([FakeRun(0)], SOURCES, decoder=1)
    with pytest.raises(ConfigError):
        score_ensemble([FakeRun(0)], SOURCES, batch_size=0)
