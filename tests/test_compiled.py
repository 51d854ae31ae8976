"""The compiled training step (`train.compile`) equals the plain one, and the TF32 / compile switches do what
their help says (structseq.train.compiled)."""

import pytest
import torch

from structseq.config import config_from_dict
from structseq.train.compiled import compile_wanted, set_tf32
from structseq.train.loop import Trainer
from test_buckets import MODELS
from test_train import toy_tsv


def trainer(tmp_path, name, model, **train):
    width = {} if model["arch"] == "lstm" else {"d_model": 16, "n_heads": 2, "ffn_dim": 32}
    path = toy_tsv(tmp_path)
    cfg = config_from_dict(
        {
            "data": {"dataset": "files", "train": str(path), "valid": str(path), "test": [str(path)]},
            "model": {**model, **width, "dropout": 0.0},
            "optim": {"max_tokens": 48, "lr": 3e-3, "warmup": 2, "num_buckets": 3, "static_shapes": True},
            "train": {"max_steps": 6, "valid_every": 0, "seed": 2, "device": "cpu", **train},
        }
    )
    return Trainer(cfg, tmp_path / name, show_progress=False)


def losses(t, n):
    return torch.stack([torch.as_tensor(t.step().loss) for _ in range(n)])


def compare(tmp_path, arch, backend, rtol):
    plain = trainer(tmp_path, "plain", MODELS[arch], compile="off")
    fast = trainer(tmp_path, "fast", MODELS[arch], compile="on", compile_backend=backend)
    assert fast._compiled and not plain._compiled
    a, b = losses(plain, 5), losses(fast, 5)
    assert a[0] != a[-1]  # the parameters moved: five different updates were compared
    torch.testing.assert_close(b, a, rtol=rtol, atol=0)
    for (n, p), q in zip(plain.model.named_parameters(), fast.model.parameters()):
        torch.testing.assert_close(q, p, rtol=rtol, atol=rtol * 1e-2, msg=n)


@pytest.mark.parametrize("arch", ["transformer", "dangle"])
def test_captured_step_equals_the_plain_step(tmp_path, arch):
    """Dynamo capture and AOTAutograd's forward + backward graphs (backend aot_eager: no code generated, so
    the arithmetic is eager's): the losses of 5 updates and the parameters after them match to 1e-5."""
    compare(tmp_path, arch, "aot_eager", 1e-5)


@pytest.mark.slow
def test_inductor_step_equals_the_plain_step(tmp_path):
    """Inductor's generated C++ kernels (fused elementwise work, reordered float32 sums): 5 updates' losses and
    parameters within 1e-4 relative (float32 reassociation is ~1e-7 per operation; Adam's normalised steps
    carry differences forward, hence the margin). Slow: the first compile takes about a minute on 2 cores."""
    compare(tmp_path, "transformer", "inductor", 1e-4)


def test_compile_switch():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert not compile_wanted("auto", cpu, True) and not compile_wanted("auto", cuda, False)
    assert compile_wanted("auto", cuda, True) and compile_wanted("on", cpu, False)
    assert not compile_wanted("off", cuda, True)


def test_tf32_switch_sets_the_cuda_flags_only_for_cuda():
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        set_tf32(torch.device("cpu"), True)
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        set_tf32(torch.device("cuda"), True)
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
        set_tf32(torch.device("cuda"), False)
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
