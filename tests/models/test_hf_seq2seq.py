"""What the `hf-seq2seq` model promises: step-by-step decoding with the backbone's cache gives the teacher-forced
log-probabilities, the first step reads the decoder start whatever `prev` holds, padding never changes a
sentence's scores (in forward and in steps), every backbone weight gets model.lr_scale, and the width is the
backbone's d_model. A tiny random BART built offline (structseq.testing.hf_tiny)."""

import pytest
import torch

pytest.importorskip("transformers")

from structseq.models.hf_checkpoint import load_seq2seq, special_ids  # noqa: E402
from structseq.models.hf_seq2seq import HFSeq2Seq, model_width  # noqa: E402
from structseq.testing.hf_tiny import tiny_bart  # noqa: E402


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    folder = tiny_bart(tmp_path_factory.mktemp("bart") / "bart", d_model=32)
    return HFSeq2Seq(load_seq2seq(str(folder)), special_ids(str(folder)), lr_scale=0.1).eval()


def _steps(model, src, tgt_in, first=None):
    state = model.init_state(model.encode({"src": src}))
    out = []
    for t in range(tgt_in.shape[1]):
        prev = tgt_in[:, t] if t or first is None else first
        lp, state = model.step(prev, state)
        out.append(lp)
    return torch.stack(out, 1)


def test_steps_give_the_teacher_forced_log_probabilities(model):
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 1]])
    tgt_in = torch.tensor([[2, 10, 11, 12], [2, 13, 14, 15]])  # the decoder start (</s> for BART) first
    with torch.no_grad():
        forced = model({"src": src, "tgt_in": tgt_in})
        stepped = _steps(model, src, tgt_in)
        ignored = _steps(model, src, tgt_in, first=torch.tensor([7, 9]))  # step 0 reads the start, not prev
    assert torch.allclose(forced, stepped, atol=1e-5)
    assert torch.allclose(ignored, stepped, atol=1e-6)


def test_padding_never_changes_a_sentences_scores(model):
    alone = torch.tensor([[8, 9, 2]])
    padded = torch.tensor([[5, 6, 7, 11, 2], [8, 9, 2, 1, 1]])
    tgt_in = torch.tensor([[2, 13, 14]])
    with torch.no_grad():
        a = model({"src": alone, "tgt_in": tgt_in})
        b = model({"src": padded, "tgt_in": tgt_in.repeat(2, 1)})[1:]
        c = _steps(model, padded, tgt_in.repeat(2, 1))[1:]
    assert torch.allclose(a, b, atol=1e-5) and torch.allclose(a, c, atol=1e-5)


def test_every_backbone_weight_gets_the_lr_scale(model):
    (group,) = model.param_groups()
    assert group["lr_scale"] == 0.1
    assert {id(p) for p in group["params"]} == {id(p) for p in model.hf.parameters()}
    assert model_width(model.hf.config) == 32 and (model.pad, model.eos, model.start) == (1, 2, 2)
