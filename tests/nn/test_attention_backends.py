"""`sdpa_without_cudnn` leaves cuDNN's attention out on CUDA and puts the process flag back as it found it
(the H200 run: cuDNN rebuilt its graph for every batch shape). A recorder stands in for SDPA, so this runs on
a CPU; the GPU test (tests/train/test_gpu.py) checks the numbers on the device."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from structseq.nn import attention
from structseq.nn.attention import sdpa_without_cudnn, without_cudnn_attention


@pytest.fixture
def cudnn_flag():
    before = torch.backends.cuda.cudnn_sdp_enabled()
    yield
    torch.backends.cuda.enable_cudnn_sdp(before)


@pytest.mark.parametrize("on_cuda", [True, False])
@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("raises", [False, True])
def test_the_flag_is_off_during_a_cuda_call_and_restored_after(on_cuda, flag, raises, monkeypatch, cudnn_flag):
    seen = []

    def recorder(q, k, v, **kwargs):
        seen.append((torch.backends.cuda.cudnn_sdp_enabled(), kwargs))
        if raises:
            raise RuntimeError("kernel failed")
        return "out"

    monkeypatch.setattr(F, "scaled_dot_product_attention", recorder)
    torch.backends.cuda.enable_cudnn_sdp(flag)
    q = SimpleNamespace(device=torch.device("cuda" if on_cuda else "cpu"))
    if raises:
        with pytest.raises(RuntimeError, match="kernel failed"):
            sdpa_without_cudnn(q, "k", "v", dropout_p=0.5)
    else:
        assert sdpa_without_cudnn(q, "k", "v", dropout_p=0.5) == "out"
    during = flag and not on_cuda  # on CUDA never on; elsewhere left as it was
    assert seen == [(during, {"dropout_p": 0.5})]
    assert torch.backends.cuda.cudnn_sdp_enabled() == flag


class _Module(torch.nn.Module):
    """A module whose method calls SDPA the way a Hugging Face backbone does (directly, not through ours)."""

    @without_cudnn_attention
    def attend(self, fail: bool = False):
        if fail:
            raise RuntimeError("backbone failed")
        return self.inner()

    @without_cudnn_attention
    def inner(self):
        return torch.backends.cuda.cudnn_sdp_enabled()


@pytest.mark.parametrize("on_cuda", [True, False])
@pytest.mark.parametrize("flag", [True, False])
def test_a_wrapped_method_runs_without_cudnn_on_cuda_nested_or_raising(on_cuda, flag, monkeypatch, cudnn_flag):
    monkeypatch.setattr(attention, "module_on_cuda", lambda module: on_cuda)
    torch.backends.cuda.enable_cudnn_sdp(flag)
    assert _Module().attend() == (flag and not on_cuda)  # the inner call does not turn it back on
    assert torch.backends.cuda.cudnn_sdp_enabled() == flag
    with pytest.raises(RuntimeError, match="backbone failed"):
        _Module().attend(fail=True)
    assert torch.backends.cuda.cudnn_sdp_enabled() == flag


def test_module_on_cuda_reads_the_first_parameter():
    assert attention.module_on_cuda(torch.nn.Linear(2, 2)) is False
    assert attention.module_on_cuda(torch.nn.ReLU()) is False  # no parameters: nothing on CUDA


def _sdpa_flags(monkeypatch) -> list[bool]:
    """Pretend every module is on CUDA and record the cuDNN flag at each real SDPA call."""
    seen, real = [], F.scaled_dot_product_attention

    def recorder(*args, **kwargs):
        seen.append(torch.backends.cuda.cudnn_sdp_enabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(attention, "module_on_cuda", lambda module: True)
    monkeypatch.setattr(F, "scaled_dot_product_attention", recorder)
    torch.backends.cuda.enable_cudnn_sdp(True)
    return seen


@pytest.mark.parametrize("arch", ["hf-seq2seq", "rdangle-pretrained"])
def test_the_pretrained_seq2seq_backbones_attend_without_cudnn(arch, tmp_path, monkeypatch, cudnn_flag):
    pytest.importorskip("transformers")
    from structseq.config import config_from_dict
    from structseq.data.example import Example
    from structseq.models import build_model
    from structseq.tasks import get_task
    from structseq.testing.hf_tiny import tiny_bart

    model = {"arch": arch, "pretrained": str(tiny_bart(tmp_path / "bart", attn_implementation="sdpa"))}
    if arch == "rdangle-pretrained":
        model.update(fusion_layers=1, post_fusion_layers=1, interval=2)
    cfg = config_from_dict({"task": "hf-seq2seq", "model": model})
    task = get_task(cfg)
    examples = [Example.from_text("dax lug", "RED BLUE"), Example.from_text("zup", "YELLOW YELLOW RED")]
    vocabs = task.build_vocabs(examples)
    m = build_model(cfg.model, vocabs).eval()
    batch = task.batch(examples, vocabs)
    seen = _sdpa_flags(monkeypatch)
    with torch.no_grad():
        m(batch)
        state = m.init_state(m.encode(batch))
        prev = batch["tgt_in"][:, 0]
        for _ in range(3):
            _, state = m.step(prev, state)
    assert len(seen) >= 3 and not any(seen)  # the backbone's own SDPA calls, none with cuDNN on
    assert torch.backends.cuda.cudnn_sdp_enabled()
    if arch == "rdangle-pretrained":  # recomputed chunks run the backbone again inside loss.backward()
        m.recompute_chunks = True
        m.train()
        seen.clear()
        m(batch).sum().backward()
        assert len(seen) >= 4 and not any(seen)
        assert torch.backends.cuda.cudnn_sdp_enabled()


def test_the_supertaggers_pretrained_encoder_attends_without_cudnn(tmp_path, monkeypatch, cudnn_flag):
    pytest.importorskip("transformers")
    from structseq.models.supertag_encoders import PretrainedEncoder, SupertagEncoderConfig
    from structseq.testing.hf_tiny import tiny_bert

    folder = tiny_bert(tmp_path / "bert")
    encoder = PretrainedEncoder(SupertagEncoderConfig(pretrained=str(folder)), d_model=8, dropout=0.0).eval()
    batch = {
        "pieces": torch.tensor([[0, 5, 6, 7, 2]]),
        "piece_word": torch.tensor([[-1, 0, 0, 1, -1]]),
        "piece_mask": torch.ones(1, 5, dtype=torch.bool),
        "word_mask": torch.ones(1, 2, dtype=torch.bool),
    }
    seen = _sdpa_flags(monkeypatch)
    with torch.no_grad():
        h, mask = encoder(batch)
    assert h.shape == (1, 2, 8) and mask.all()
    assert seen and not any(seen)
    assert torch.backends.cuda.cudnn_sdp_enabled()
