"""`sdpa_without_cudnn` leaves cuDNN's attention out on CUDA and puts the process flag back as it found it
(the H200 run: cuDNN rebuilt its graph for every batch shape). A recorder stands in for SDPA, so this runs on
a CPU; the GPU test (tests/test_gpu.py) checks the numbers on the device."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from structseq.nn.attention import sdpa_without_cudnn


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
    q = SimpleNamespace(is_cuda=on_cuda)
    if raises:
        with pytest.raises(RuntimeError, match="kernel failed"):
            sdpa_without_cudnn(q, "k", "v", dropout_p=0.5)
    else:
        assert sdpa_without_cudnn(q, "k", "v", dropout_p=0.5) == "out"
    during = flag and not on_cuda  # on CUDA never on; elsewhere left as it was
    assert seen == [(during, {"dropout_p": 0.5})]
    assert torch.backends.cuda.cudnn_sdp_enabled() == flag
