"""The restructured LSTM decoder loop (models/lstm.py) against the per-step formulation it replaced
(models/lstm_reference.py): same parameters, same dropout masks, same numbers up to floating-point rounding."""

import copy

import pytest
import torch

from structseq.config import config_from_dict
from structseq.data.vocab import Vocab
from structseq.models import build_model
from structseq.nn.loss import label_smoothed_nll
from structseq.testing.oracles.lstm_reference import LSTMSeq2SeqReference

VOCAB = Vocab.build([list("abcdefgh")])
TVOCAB = Vocab.build([list("abxyz")])
LSTM = dict(arch="lstm", embed_dim=16, hidden_dim=24, layers=2, dropout=0.3)
VARIANTS = {
    "softmax": LSTM,
    "copy-combine-feed": {**LSTM, "combine_feed": True, "head": {"type": "copy", "dropout": 0.2}},
    "one-layer": {**LSTM, "layers": 1},
    "three-layers-head-dropout": {**LSTM, "layers": 3, "head": {"type": "softmax", "dropout": 0.5}},
    "reference-feed-dropout": {
        **LSTM,
        "combine_feed": True,
        "feed_dropout": True,
        "head": {"type": "copy", "dropout": 0.5},
    },
    "reference-attention-bias": {
        **LSTM,
        "combine_feed": True,
        "feed_dropout": True,
        "attention_bias": True,
        "head": {"type": "copy", "dropout": 0.5},
    },
    "tanh-combine-feed": {
        **LSTM,
        "combine_feed": True,
        "feed_dropout": True,
        "combine_activation": "tanh",
        "head": {"type": "copy", "dropout": 0.5},
    },
}


def pair(model_cfg):
    torch.manual_seed(0)
    fast = build_model(config_from_dict({"model": model_cfg}).model, {"src": VOCAB, "tgt": TVOCAB})
    ref = copy.deepcopy(fast)
    ref.__class__ = LSTMSeq2SeqReference
    return fast, ref


def batch():
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, len(VOCAB), (6, 9), generator=g)
    src[:, -1] = VOCAB.eos
    src[1, 5], src[1, 6:] = VOCAB.eos, VOCAB.pad
    src[4, 2], src[4, 3:] = VOCAB.eos, VOCAB.pad
    tgt = torch.randint(4, len(TVOCAB), (6, 12), generator=g)
    tgt[:, 0] = TVOCAB.bos
    tgt[0, 5:], tgt[2, 9:], tgt[3, 1:], tgt[5, 7:] = TVOCAB.pad, TVOCAB.pad, TVOCAB.pad, TVOCAB.pad
    tgt_out = torch.cat([tgt[:, 1:], torch.full((6, 1), TVOCAB.pad)], 1)
    tgt_out[torch.arange(6), tgt.ne(TVOCAB.pad).sum(1) - 1] = TVOCAB.eos
    return {"src": src, "tgt_in": tgt}, tgt_out


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("train", [False, True])
def test_teacher_forced_log_probs_equal_the_reference(name, train):
    fast, ref = pair(VARIANTS[name])
    b, _ = batch()
    fast.train(train), ref.train(train)
    torch.manual_seed(7)
    got = fast(b)
    torch.manual_seed(7)  # training: the same dropout masks, drawn in the same order
    want = ref(b)
    real = b["tgt_in"].ne(TVOCAB.pad)[:, :, None]  # padding positions: zeros in, no loss reads them
    assert torch.allclose(got * real, want * real, atol=1e-5), ((got - want) * real).abs().max()
    assert torch.isfinite(got).all()
    assert torch.rand(()) == (torch.manual_seed(7), ref(b), torch.rand(()))[2]  # same random numbers consumed


@pytest.mark.parametrize("name", ["copy-combine-feed", "reference-feed-dropout"])
def test_with_f_dropouts_masks_too(name):
    """Under `torch_masks()` (F.dropout's draws, for replays of older runs) the two formulations still agree."""
    from structseq.nn.dropout import torch_masks

    fast, ref = pair(VARIANTS[name])
    b, _ = batch()
    fast.train(), ref.train()
    with torch_masks():
        torch.manual_seed(7)
        got = fast(b)
        torch.manual_seed(7)
        want = ref(b)
    real = b["tgt_in"].ne(TVOCAB.pad)[:, :, None]
    assert torch.allclose(got * real, want * real, atol=1e-5), ((got - want) * real).abs().max()


@pytest.mark.parametrize("name", VARIANTS)
def test_seeded_updates_give_equal_parameters(name):
    """In float64, so that the comparison is exact up to rounding: in float32, Adam (lr 1e-2) amplifies the two
    formulations' different rounding to ~3e-5 in 4 updates for some masks."""
    models = [m.double() for m in pair(VARIANTS[name])]
    b, tgt_out = batch()
    for model in models:
        model.train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        torch.manual_seed(11)
        for _ in range(4):
            loss, _ = label_smoothed_nll(model(b), tgt_out, 0.1)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            opt.step()
    fast, ref = (dict(m.named_parameters()) for m in models)
    for k in fast:
        assert torch.allclose(fast[k], ref[k], atol=1e-10, rtol=0), (k, (fast[k] - ref[k]).abs().max())


@pytest.mark.parametrize("name", VARIANTS)
def test_incremental_decoding_equals_the_reference(name):
    from structseq.decode.search import beam_search

    fast, ref = (m.eval() for m in pair(VARIANTS[name]))
    b, _ = batch()
    with torch.no_grad():
        assert torch.allclose(fast.incremental_log_probs(b), ref.incremental_log_probs(b), atol=1e-5)
        real = b["tgt_in"].ne(TVOCAB.pad)[:, :, None]
        assert torch.allclose(fast.incremental_log_probs(b) * real, fast(b) * real, atol=1e-5)
        for beam in (1, 3):
            got = beam_search(fast, {"src": b["src"]}, beam, torch.full((6,), 15))
            want = beam_search(ref, {"src": b["src"]}, beam, torch.full((6,), 15))
            assert got.tokens == want.tokens


def test_inference_weights_follow_parameter_updates():
    fast, ref = (m.eval() for m in pair(LSTM))
    b, _ = batch()
    with torch.no_grad():
        fast.incremental_log_probs(b)  # fills the cache
        for m in (fast, ref):
            m.decoder.weight_hh_l1.add_(0.1)
            m.combine.weight.mul_(1.5)
            m.tgt_embed.weight.add_(0.2)
        assert torch.allclose(fast.incremental_log_probs(b), ref.incremental_log_probs(b), atol=1e-5)


def test_state_dict_layout_is_the_plain_lstm_one():
    fast, ref = pair(LSTM)
    shapes = {k: tuple(v.shape) for k, v in fast.state_dict().items()}
    assert shapes["decoder.weight_ih_l0"] == (4 * 24, 16 + 24) and shapes["decoder.weight_hh_l1"] == (4 * 24, 24)
    assert shapes["attn_proj.weight"] == (24, 24) and shapes["combine.weight"] == (24, 16 + 2 * 24)
    ref.load_state_dict(fast.state_dict())  # and loads both ways
    fast.load_state_dict(ref.state_dict())
    assert not [k for k in shapes if "_inference" in k]


def test_reference_feed_dropout_moves_the_head_dropout_onto_the_fed_back_vector():
    fast, _ = pair(VARIANTS["reference-feed-dropout"])
    assert (fast.feed_dropout, fast.high_dropout) == (0.3, 0.5)
    assert all(m.dropout == 0.0 for m in fast.head.modules() if hasattr(m, "dropout"))  # not applied twice
    b, _ = batch()
    fast.train()
    state = fast.init_state(fast.encode(b))
    for t in range(4):
        _, state = fast.step(b["tgt_in"][:, t], state)
    # a unit survives the three masks (combined 0.3, shared 0.5, feed 0.3) with probability 0.7 * 0.5 * 0.7
    zeros = state["feed"].eq(0).float().mean().item()
    assert 0.6 < zeros < 0.9
    plain, _ = pair(VARIANTS["copy-combine-feed"])
    plain.train()
    state = plain.init_state(plain.encode(b))
    for t in range(4):
        _, state = plain.step(b["tgt_in"][:, t], state)
    assert state["feed"].eq(0).float().mean().item() < 0.45


@pytest.mark.parametrize("name", ["copy-combine-feed", "three-layers-head-dropout"])
def test_training_steps_do_not_keep_graphs(name, monkeypatch):
    """Each forward's tapes (and with them the step graphs) are freed after backward: a reference cycle through
    the autograd nodes once kept every update's graph alive (~25 MB per update at 256 units)."""
    import gc
    import weakref

    from structseq.nn import step_kernels

    tapes, init = [], step_kernels.Tape.__init__

    def recording_init(self, grads):
        init(self, grads)
        tapes.append(weakref.ref(self))

    monkeypatch.setattr(step_kernels.Tape, "__init__", recording_init)
    fast, _ = pair(VARIANTS[name])
    fast.train()
    b, _ = batch()
    for _ in range(2):
        fast(b).sum().backward()
    gc.collect()
    assert len(tapes) >= 4 and all(r() is None for r in tapes)


@pytest.mark.parametrize("activation", ["none", "tanh"])
def test_tanh_bounds_the_fed_back_vector(activation):
    """With combine_feed the feed columns of `combine` make a recurrence: made expansive (spectral radius 8), the
    linear feed grows geometrically over the steps while tanh keeps every entry in [-1, 1]."""
    model, _ = pair({**LSTM, "combine_feed": True, "combine_activation": activation})
    H, E = LSTM["hidden_dim"], LSTM["embed_dim"]
    with torch.no_grad():
        model.combine.weight[:, E : E + H] = 8 * torch.eye(H)
    model.eval()
    b, _ = batch()
    state = model.init_state(model.encode(b))
    norms = []
    for t in range(b["tgt_in"].shape[1]):
        _, state = model.step(b["tgt_in"][:, t], state)
        norms.append(state["feed"].abs().max().item())
    if activation == "tanh":
        assert max(norms) <= 1.0
    else:
        assert norms[-1] > 1e6 * norms[1]
