"""Model correctness: teacher forcing == incremental decoding, heads, attention and positions."""

import math

import pytest
import torch

from structseq.config import config_from_dict
from structseq.data.vocab import Vocab
from structseq.models import build_model
from structseq.models.heads import CopyHead, shared_token_map
from structseq.nn.attention import MultiheadAttention, RelativePositionBias

VOCAB = Vocab.build([["a", "b", "c", "d", "e", "f", "g", "h"]])
TVOCAB = Vocab.build([["a", "b", "x", "y", "z"]])

TRANSFORMER = dict(
    arch="transformer", d_model=32, n_heads=4, ffn_dim=64, encoder_layers=2, decoder_layers=2, dropout=0.0
)
LSTM = dict(arch="lstm", embed_dim=16, hidden_dim=32, layers=2, dropout=0.0)
VARIANTS = {
    "transformer-post-sinusoidal": TRANSFORMER,
    "transformer-pre-relative": {**TRANSFORMER, "norm_first": True, "positions": "relative", "max_relative": 3},
    "transformer-post-relative-copy": {**TRANSFORMER, "positions": "relative", "head": {"type": "copy"}},
    "transformer-tied": {**TRANSFORMER, "share_decoder_embeddings": True},
    "lstm": LSTM,
    "lstm-copy": {**LSTM, "head": {"type": "copy"}},
}


def make(model_cfg):
    cfg = config_from_dict({"model": model_cfg})
    model = build_model(cfg.model, {"src": VOCAB, "tgt": TVOCAB})
    with torch.no_grad():  # relative tables start at zero: randomise them so the test sees them
        for name, p in model.named_parameters():
            if name.endswith("table"):
                p.normal_(0, 0.5)
    return model.eval()


def batch():
    src = torch.randint(4, len(VOCAB), (4, 9))
    src[:, -1] = VOCAB.eos
    src[1, 5], src[1, 6:] = VOCAB.eos, VOCAB.pad  # a shorter, padded source
    src[2, 7], src[2, 8:] = VOCAB.eos, VOCAB.pad
    tgt = torch.randint(4, len(TVOCAB), (4, 21))  # longer than the relative clip distance
    tgt[:, 0] = TVOCAB.bos
    return src, tgt


@pytest.mark.parametrize("name", VARIANTS)
def test_teacher_forced_equals_incremental(name):
    model = make(VARIANTS[name])
    src, tgt = batch()
    full = model({"src": src, "tgt_in": tgt})
    steps = model.incremental_log_probs({"src": src, "tgt_in": tgt})
    assert full.shape == (4, 21, len(TVOCAB))
    assert torch.allclose(full, steps, atol=1e-5), (full - steps).abs().max()
    assert torch.allclose(full.exp().sum(-1), torch.ones(4, 21), atol=1e-5)


@pytest.mark.parametrize("name", ["transformer-post-sinusoidal", "lstm"])
def test_padding_does_not_change_outputs(name):
    model = make(VARIANTS[name])
    src, tgt = batch()
    alone = model({"src": src[1:2, :6], "tgt_in": tgt[1:2]})
    padded = model({"src": src, "tgt_in": tgt})[1:2]
    assert torch.allclose(alone, padded, atol=1e-5)


def test_relative_bias_matches_naive_formula():
    torch.manual_seed(1)
    rel = RelativePositionBias(d_head=5, max_distance=3)
    with torch.no_grad():
        rel.table.normal_()
    q, k = torch.randn(2, 3, 4, 5), torch.randn(2, 3, 6, 5)
    q_pos, k_pos = torch.arange(2, 6), torch.arange(6)
    got = rel.bias(q, k, q_pos, k_pos)
    want = torch.empty(2, 3, 4, 6)
    for i in range(4):
        for j in range(6):
            r = rel.table[max(-2, min(2, int(q_pos[i] - k_pos[j]))) + 2]
            want[:, :, i, j] = q[:, :, i] @ r + k[:, :, j] @ r
    assert torch.allclose(got, want, atol=1e-5)


@torch.no_grad()
def test_attention_projects_keys_and_values_from_their_own_inputs():
    attn = MultiheadAttention(8, 2).eval()
    query, key, value = torch.randn(1, 3, 8), torch.randn(1, 5, 8), torch.randn(1, 5, 8)
    out, _, _ = attn(query, key, value)
    heads = lambda x: x.view(1, -1, 2, 4).transpose(1, 2)  # noqa: E731
    q, k, v = heads(attn.q_proj(query)), heads(attn.k_proj(key)), heads(attn.v_proj(value))
    manual = ((q @ k.transpose(-1, -2)) / 2.0).softmax(-1) @ v
    want = attn.out_proj(manual.transpose(1, 2).reshape(1, 3, 8))
    assert torch.allclose(out, want, atol=1e-6)
    out_kk, _, _ = attn(query, key, key)
    assert not torch.allclose(out, out_kk)  # fails if V were projected from the key tensor


@torch.no_grad()
def test_attention_weights_match_manual_softmax():
    attn = MultiheadAttention(8, 2).eval()
    x = torch.randn(2, 4, 8)
    mask = torch.tensor([[False] * 4, [False, False, True, True]])
    out_fast, _, _ = attn(x, key_padding_mask=mask)
    out_slow, w, _ = attn(x, key_padding_mask=mask, need_weights=True)
    assert torch.allclose(out_fast, out_slow, atol=1e-6)
    assert torch.all(w[1, :, :, 2:] == 0)
    assert math.isclose(float(w.sum()), 2 * 2 * 4, rel_tol=1e-5)


@torch.no_grad()
def test_copy_head_with_gate_one_is_the_attention_distribution():
    src_to_tgt = shared_token_map(VOCAB, TVOCAB)
    head = CopyHead(6, len(TVOCAB), src_to_tgt)
    with torch.no_grad():
        head.gate.weight.zero_()
        head.gate.bias.fill_(50.0)  # g = sigmoid(50) ~ 1
    src = torch.tensor([[VOCAB.stoi["a"], VOCAB.stoi["b"], VOCAB.stoi["c"], VOCAB.eos]])
    attn = torch.tensor([[[0.5, 0.25, 0.125, 0.125]]])
    p = head(torch.randn(1, 1, 6), attn, src).exp()[0, 0]
    # "c" has no target counterpart: its attention mass is dropped and the rest renormalised
    assert p[TVOCAB.stoi["a"]] == pytest.approx(0.5 / 0.875, abs=1e-6)
    assert p[TVOCAB.stoi["b"]] == pytest.approx(0.25 / 0.875, abs=1e-6)
    assert p[TVOCAB.unk] == pytest.approx(0.0, abs=1e-6)
    assert p[TVOCAB.eos] == pytest.approx(0.125 / 0.875, abs=1e-6)  # the source end marker copies to </s>
    assert float(p.sum()) == pytest.approx(1.0, abs=1e-6)


def test_copy_head_log_probs_are_finite_when_copy_mass_is_zero():
    head = CopyHead(6, len(TVOCAB), shared_token_map(VOCAB, TVOCAB))
    src = torch.tensor([[VOCAB.stoi["c"], VOCAB.eos]])
    attn = torch.tensor([[[1.0, 0.0]]])
    lp = head(torch.randn(1, 1, 6), attn, src)
    assert torch.isfinite(lp).all()
    lp.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in head.parameters() if p.grad is not None)


def test_tied_embeddings_share_storage():
    model = make(VARIANTS["transformer-tied"])
    assert model.head.proj.weight is model.decoder.embed.embed.weight
