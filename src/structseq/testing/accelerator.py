"""A CPU that takes a GPU's code paths, and a dynamo backend that counts what a compiled step captures.

No GPU is at hand for most sessions, and the CPU tests never reach the branches a CUDA device takes. Within
`gpu_paths()` every `structseq.nn.accelerator.on_accelerator` question is answered yes: attention's cuDNN
handling (`structseq.nn.attention`), dropout's fused draws (`structseq.nn.dropout`), Dangle's accelerator
chunking (`RDangleSeq2Seq.AUTO_CHUNK_STEPS_ACCELERATOR`) and the compiled step's settings
(`structseq.train.compiled`: cuDNN attention off, TF32 flags). What it changes in the process (those flags and
dynamo's recompile settings) is put back after. `GPU_OPTIM` is the batching a GPU run uses
(scripts/device_reproduce.sh): 16 length buckets, static shapes.

`GraphCounter` is a dynamo backend (`torch.compile(model, backend=GraphCounter())`) that counts the graphs
dynamo hands it and, through AOTAutograd, the forward and backward graphs compiled from them, and runs each as
eager code (no code generation: fast enough for the default suite). Graph breaks are counted by dynamo itself
(`graph_breaks()`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from structseq.nn.accelerator import accelerator_paths

GPU_OPTIM = {"num_buckets": 16, "static_shapes": True}


@contextmanager
def gpu_paths() -> Iterator[None]:
    """Within the block the CPU takes every branch a CUDA device takes (see the module docstring)."""
    dynamo = torch._dynamo.config
    saved = (
        torch.backends.cuda.cudnn_sdp_enabled(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        dynamo.recompile_limit,
        dynamo.fail_on_recompile_limit_hit,
    )
    try:
        with accelerator_paths():
            yield
    finally:
        torch.backends.cuda.enable_cudnn_sdp(saved[0])
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[1:3]
        dynamo.recompile_limit, dynamo.fail_on_recompile_limit_hit = saved[3:]


def graph_breaks() -> int:
    """Graph breaks dynamo has counted in this process (`torch._dynamo.utils.counters`)."""
    return sum(torch._dynamo.utils.counters["graph_break"].values())


class GraphCounter:
    """A counting dynamo backend: `dynamo` graphs handed to it, `forward` and `backward` graphs AOTAutograd
    compiled from them (the backward is compiled at its first use)."""

    def __init__(self):
        self.dynamo = self.forward = self.backward = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        from functorch.compile import make_boxed_func
        from torch._dynamo.backends.common import aot_autograd

        self.dynamo += 1

        def forward(graph, _inputs):
            self.forward += 1
            return make_boxed_func(graph.forward)

        def backward(graph, _inputs):
            self.backward += 1
            return make_boxed_func(graph.forward)

        return aot_autograd(fw_compiler=forward, bw_compiler=backward)(gm, example_inputs)

    def __repr__(self) -> str:
        return f"GraphCounter(dynamo={self.dynamo}, forward={self.forward}, backward={self.backward})"
