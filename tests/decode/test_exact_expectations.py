"""Issue 12, "tests that cannot fail": exact expectations where the suite asserted too little.

The search tests use a stub model with fixed step distributions, so the winner and its score are known
in closed form (the length penalty over `len - 1` instead of `len` survived the old test).
"""

from __future__ import annotations

import math

import pytest
import torch

from structseq.compose.degree import NgramDictionary
from structseq.decode.search import beam_search
from structseq.metrics import exact_match

PAD, BOS, EOS, A, B, C = range(6)
LOW = -20.0


class StubModel:
    """Log-probabilities depend only on (step, previous token): `table[(t, prev)] = {token: logp}`;
    unlisted tokens get LOW (NaN where `nan_from` says so)."""

    def __init__(self, table: dict, nan_from: int | None = None):
        self.table, self.nan_from = table, nan_from

    def encode(self, inputs):
        return inputs

    def init_state(self, encoded):
        src = encoded["src"] if isinstance(encoded, dict) else encoded
        return {"t": torch.zeros(src.shape[0], dtype=torch.long)}

    def step(self, prev, state):
        t = state["t"]
        out = torch.full((len(prev), 6), LOW)
        for i, (step, p) in enumerate(zip(t.tolist(), prev.tolist())):
            if self.nan_from is not None and step >= self.nan_from:
                out[i] = float("nan")
                continue
            for tok, lp in self.table.get((step, p), {}).items():
                out[i, tok] = lp
        return out, {"t": t + 1}


def _stub(first_a, a_end, first_b, b_more, b_end):
    """Two competitors: `a </s>` and `b b b </s>`."""
    return StubModel(
        {
            (0, BOS): {A: first_a, B: first_b},
            (1, A): {EOS: a_end},
            (1, B): {B: b_more, EOS: -5.0},
            (2, B): {B: b_more, EOS: -5.0},
            (3, B): {EOS: b_end, B: -5.0},
        }
    )


def _search(model, len_penalty, beam=4):
    src = torch.tensor([[3, 2]])
    return beam_search(model, src, beam, torch.tensor([6]), len_penalty=len_penalty, nbest=True)


def test_length_penalty_counts_the_end_of_sentence():
    # a </s>: -1.0 over 2 tokens = -0.5;  b b b </s>: -2.4 over 4 = -0.6  -> the short one wins.
    # Normalising over len - 1 (without </s>) would give -1.0 vs -0.8 and pick the long one.
    model = _stub(first_a=-0.5, a_end=-0.5, first_b=-0.3, b_more=-0.7, b_end=-0.7)
    hyp = _search(model, 1.0)
    assert hyp.tokens == [[A]] and hyp.scores[0] == pytest.approx(-1.0, abs=1e-6)
    assert [t for t, _ in hyp.nbest[0][:2]] == [[A], [B, B, B]]
    assert hyp.nbest[0][1][1] == pytest.approx(-2.4, abs=1e-6)


def test_length_penalty_changes_the_winner():
    # a </s>: -1.2 (norm -0.6); b b b </s>: -2.0 (norm -0.5): raw scores pick a, normalised ones b b b
    model = _stub(first_a=-0.6, a_end=-0.6, first_b=-0.2, b_more=-0.6, b_end=-0.6)
    raw = _search(model, 0.0)
    assert raw.tokens == [[A]] and raw.scores[0] == pytest.approx(-1.2, abs=1e-6)
    norm = _search(model, 1.0)
    assert norm.tokens == [[B, B, B]] and norm.scores[0] == pytest.approx(-2.0, abs=1e-6)
    half = _search(model, 0.5)  # -1.2 / sqrt(2) = -0.849 vs -2.0 / 2 = -1.0: a again
    assert half.tokens == [[A]]


@pytest.mark.parametrize("beam", [2, 3])
def test_nan_continuations_are_never_chosen(beam):
    # NaN for every token after `b`, finite `a </s>`: the NaN path cannot win although `b` starts better
    model = StubModel({(0, BOS): {A: -1.0, B: -0.1}, (1, A): {EOS: -0.5}, (1, B): {B: float("nan"), EOS: float("nan")}})
    hyp = _search(model, 1.0, beam)
    assert hyp.tokens == [[A]] and hyp.scores[0] == pytest.approx(-1.5, abs=1e-6)


@pytest.mark.parametrize("beam", [1, 3])
def test_fully_diverged_model_returns_its_raw_history(beam):
    model = StubModel({(0, BOS): {A: -1.0}}, nan_from=1)
    hyp = _search(model, 1.0, beam)
    assert len(hyp.tokens) == 1 and hyp.scores[0] == -math.inf
    assert 1 <= len(hyp.tokens[0]) <= 7 and not {PAD, BOS, EOS} & set(hyp.tokens[0])  # never special ids


def test_exact_match_is_not_fooled_by_prefixes():
    s = exact_match(["a b", "a", "a b c", ""], ["a", "a b", "a b", "a b"])
    assert s.score == 0.0 and s.details["correct"] == 0
    assert exact_match(["a b"], ["a b"]).score == 1.0


def test_atom_threshold_boundary_is_strictly_greater():
    # with atom_threshold 3, an n-gram seen exactly 3 times is no atom; 4 times is one (its words are
    # frequent enough to be extended: 5 times each)
    train = ["x y"] * 3 + ["x", "y"] * 2 + ["p q"] * 4 + ["p", "q"]
    d = NgramDictionary.from_corpus(train, min_count=1, atom_threshold=3)
    assert ("p", "q") in d and ("x", "y") not in d
    d2 = NgramDictionary.from_corpus(train, min_count=1, atom_threshold=2)
    assert ("x", "y") in d2
