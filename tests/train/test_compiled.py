"""The compiled training step (`train.compile`) equals the plain one, and the TF32 / compile switches do what
their help says (structseq.train.compiled)."""

import pytest
import torch

from structseq.config import config_from_dict
from structseq.train.compiled import compile_wanted, set_tf32
from structseq.train.loop import Trainer
from tests.data.test_buckets import MODELS
from tests.fixtures.toy import toy_tsv


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


def test_auto_compiles_only_architectures_that_declare_it_and_never_with_accumulation():
    """`train.compile: auto` on CUDA with static shapes: only the architectures registered with the `compiles`
    capability (the LSTM breaks its graph: slower than eager) and only with `optim.accumulate` 1 (CUDA graphs
    replayed across accumulated batches fail, pytorch#169545); `on` compiles any of them."""
    from structseq.registry import ARCHS
    from structseq.train.compiled import declares_compiles

    cuda = torch.device("cuda")
    auto = {name for name in ARCHS.names() if compile_wanted("auto", cuda, True, arch_compiles=declares_compiles(name))}
    assert auto == {"transformer", "dangle", "rdangle-shr", "rdangle-sep"}
    assert not compile_wanted("auto", cuda, True, arch_compiles=True, accumulate=2)
    assert compile_wanted("on", cuda, True, arch_compiles=False, accumulate=2)


@pytest.mark.parametrize("arch, accumulate", [("lstm", 1), ("transformer", 2), ("transformer", 1)])
def test_the_trainer_asks_the_architecture_and_the_accumulation(tmp_path, monkeypatch, arch, accumulate):
    """The Trainer hands compile_wanted its architecture's declared capability and optim.accumulate (a device
    of CUDA's kind is faked at the decision only: the model stays on the CPU)."""
    from structseq.train import loop

    seen = {}

    def wanted(setting, device, static_shapes, **kw):
        seen.update(kw)
        return compile_wanted(setting, torch.device("cuda"), static_shapes, **kw)

    monkeypatch.setattr(loop, "compile_wanted", wanted)
    monkeypatch.setattr(loop, "compile_model", lambda model, device, backend, *shapes: model)
    t = trainer(tmp_path, "t", MODELS[arch], compile="auto")
    t.cfg.optim.accumulate = accumulate  # read again below, as the Trainer read it
    t = loop.Trainer(t.cfg, tmp_path / "again", show_progress=False)
    assert seen == {"arch_compiles": arch != "lstm", "accumulate": accumulate}
    assert t._compiled == (arch != "lstm" and accumulate == 1)


def test_compile_takes_true_false_on_off_auto_from_yaml_and_set(tmp_path):
    """YAML reads on / off / true / false as booleans: each is the setting it names, from a file and from
    `--set` (`--set train.compile=off` was a ConfigError); anything else names the key and the choices."""
    from typer.testing import CliRunner

    from structseq.cli import app
    from structseq.config import load_config
    from structseq.errors import ConfigError
    from tests.fixtures.toy import toy_config

    path = toy_tsv(tmp_path)
    base = toy_config(path, max_steps=1, valid_every=0).to_dict()
    for text, setting in (("on", "on"), ("off", "off"), ("true", "on"), ("false", "off"), ("auto", "auto")):
        for quoted in (text, f"'{text}'"):
            cfg_file = tmp_path / "cfg.yaml"
            cfg_file.write_text(yaml_dump(base).replace("compile: auto", f"compile: {quoted}"))
            assert load_config(cfg_file).train.compile == setting, quoted
            assert load_config(tmp_path / "cfg.yaml", [f"train.compile={quoted}"]).train.compile == setting
    with pytest.raises(ConfigError, match=r"'train.compile': invalid value 'maybe'; choices: auto, on, off"):
        load_config(cfg_file, ["train.compile=maybe"])
    cfg_file.write_text(yaml_dump(base))
    r = CliRunner().invoke(
        app, ["train", str(cfg_file), "-o", str(tmp_path / "run"), "-q", "--set", "train.compile=off"]
    )
    assert r.exit_code == 0, r.output
    saved = yaml_load((tmp_path / "run" / "config.yaml").read_text())
    assert saved["train"]["compile"] == "off"


def yaml_dump(d):
    import yaml

    return yaml.safe_dump(d, sort_keys=False)


def yaml_load(text):
    import yaml

    return yaml.safe_load(text)
