"""One graph per update on a GPU, proven on the CPU (issue 53): within `structseq.testing.accelerator.gpu_paths()`
the CPU takes the branches a CUDA device takes (cuDNN attention handling, dropout, Dangle's accelerator chunking,
the compiled step's settings); a counting dynamo backend (through AOTAutograd, no code generated) then counts the
forward and backward graphs and the graph breaks of the compiled training step on COGS batches, bucketed as a
GPU run buckets them (16 buckets, static shapes; tiny models, a small token budget)."""

from __future__ import annotations

import pytest
import torch

from structseq.config import config_from_dict
from structseq.errors import ConfigError
from structseq.nn.accelerator import on_accelerator
from structseq.testing.accelerator import GPU_OPTIM, GraphCounter, gpu_paths, graph_breaks
from structseq.train.compiled import compile_model, recompile_limit
from structseq.train.loop import Trainer

SMALL = {"d_model": 16, "n_heads": 2, "ffn_dim": 32, "dropout": 0.1}
MODELS = {
    "transformer-relative": {"arch": "transformer", "encoder_layers": 1, "decoder_layers": 1, "positions": "relative"},
    "dangle": {"arch": "dangle", "fusion_layers": 1, "post_fusion_layers": 1, "decoder_layers": 1},
    "rdangle-sep-o1": {"arch": "rdangle-sep", "interval": 1, "encoder_layers": 1, "fusion_layers": 1,
                       "post_fusion_layers": 1, "decoder_layers": 1},
    "rdangle-sep-o4": {"arch": "rdangle-sep", "interval": 4, "encoder_layers": 1, "fusion_layers": 1,
                       "post_fusion_layers": 1, "decoder_layers": 1},
}  # fmt: skip


def short_lines(tmp_path):
    """COGS-like lines in small: sources of 1-6 words, targets 1-3 times as long (fewer distinct lengths than
    COGS, so fewer shapes to compile: the default suite's version; COGS itself is the slow one)."""
    import random

    r = random.Random(0)
    rows = [[r.choice("abcdefgh") for _ in range(r.randint(1, 6))] for _ in range(200)]
    lines = [" ".join(x) + "\t" + " ".join(x * r.randint(1, 3)).upper() for x in rows]
    path = tmp_path / "short.tsv"
    path.write_text("\n".join(lines) + "\n")
    return {"dataset": "files", "train": str(path), "valid": str(path), "test": [str(path)]}


def cogs_trainer(tmp_path, data_root, model, **optim):
    data = {"dataset": "cogs", "valid": "dev", "test": ["gen"]} if data_root else short_lines(tmp_path)
    cfg = config_from_dict(
        {
            "data": data,
            "model": {**model, **SMALL},
            "optim": {"max_tokens": 320, "lr": 1e-3, "warmup": 2, **GPU_OPTIM, **optim},
            "train": {"max_steps": 30, "valid_every": 0, "seed": 1, "device": "cpu", "compile": "off"},
        }
    )
    return Trainer(cfg, tmp_path / "run", data_root=data_root, show_progress=False)


def compiled(t: Trainer, counter) -> Trainer:
    """The trainer's step compiled as `train.compile` compiles it, with the counting backend."""
    t.ddp_model = compile_model(t.model, t.device, counter, t.cfg.optim.num_buckets)
    t._compiled = True
    return t


def test_the_cpu_takes_the_gpu_branches_only_within_the_block():
    x = torch.zeros(1)
    assert not on_accelerator(x)
    flag = torch.backends.cuda.cudnn_sdp_enabled()
    with gpu_paths():
        assert on_accelerator(x) and on_accelerator(torch.device("cpu"))
        compile_model(torch.nn.Linear(2, 2), torch.device("cpu"), "eager")
        assert not torch.backends.cuda.cudnn_sdp_enabled()  # decided once, outside the model
    assert not on_accelerator(x) and torch.backends.cuda.cudnn_sdp_enabled() == flag


@pytest.mark.parametrize("name", list(MODELS))
def test_one_forward_and_one_backward_graph_per_shape_and_no_graph_break(tmp_path, name):
    """30 compiled updates: no graph break, one dynamo graph per compile, and per compile one forward and one
    backward graph; the compiles number at most the distinct batch shapes met (the Transformer: 2, its second
    shape compiled with symbolic sizes) and stay below the recompile limit the code sets, so no shape ran eager."""
    count_graphs(tmp_path, None, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_on_cogs_one_forward_and_one_backward_graph_per_shape(tmp_path, shared_data, name):
    """The same on COGS's own batches (up to 154 target positions: Dangle compiles a dozen shapes, minutes on
    two shared cores)."""
    count_graphs(tmp_path, shared_data, name)


def count_graphs(tmp_path, shared_data, name):
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    counter, shapes = GraphCounter(), set()
    with gpu_paths():
        t = compiled(cogs_trainer(tmp_path, shared_data, MODELS[name]), counter)
        if name != "transformer-relative":
            assert t.model.chunk_points == 0  # the accelerator's automatic chunking, not a test's own
        loss = t.task.loss

        def recording(model, batch, eps):
            shapes.add(tuple(tuple(v.shape) for v in batch.values()))
            return loss(model, batch, eps)

        t.task.loss = recording
        losses = [float(t.step().loss) for _ in range(30)]
    assert all(map(lambda v: v == v, losses))  # finite
    assert graph_breaks() == 0, dict(torch._dynamo.utils.counters["graph_break"])
    assert counter.dynamo == counter.forward == counter.backward, counter
    assert 1 <= counter.forward <= len(shapes) < recompile_limit(GPU_OPTIM["num_buckets"]), (counter, len(shapes))
    if name == "transformer-relative":
        assert counter.forward <= 2, counter
    torch._dynamo.reset()


def test_a_shape_past_the_recompile_limit_is_an_error_not_eager(tmp_path):
    """Dangle compiles once per batch shape: with more shapes than the limit allows, the step stops with a
    one-line error naming the settings instead of running the new shape eager."""
    torch._dynamo.reset()
    with gpu_paths():
        t = compiled(cogs_trainer(tmp_path, None, MODELS["rdangle-sep-o4"]), GraphCounter())
        torch._dynamo.config.recompile_limit = 2  # as if more buckets than the limit
        with pytest.raises(ConfigError, match=r"'train.compile'.*recompile limit \(2\).*optim.num_buckets"):
            for _ in range(30):
                t.step()
    torch._dynamo.reset()
