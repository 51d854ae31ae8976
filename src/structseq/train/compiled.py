"""The fast path of a training update on a GPU (issue 45): TF32 matmuls and a compiled, captured step.

On the one GPU measured so far every update was bound by kernel launches, not arithmetic (docs/gpu.md): tens of
milliseconds of small kernels. Two levers, each a switch:

- `train.tf32` (default on): float32 matmuls and convolutions on CUDA use TF32 tensor cores (10-bit mantissa
  products, float32 sums: relative error near 3e-4 per product, see docs/gpu.md for the tolerance it gives the
  losses). No effect on a CPU.
- `train.compile` (`auto`: on for CUDA when `optim.static_shapes` gives the few fixed batch shapes it needs, the
  architecture declares the `compiles` capability and `optim.accumulate` is 1, off otherwise; `on`, `off`): the model (forward and, through AOTAutograd, its backward) compiled by
  `torch.compile`, on CUDA in mode `reduce-overhead` (inductor's fused kernels, replayed as CUDA graphs: one
  graph per batch shape, so without static shapes every new shape recompiles). The optimiser step stays the
  fused Adam (`fused=True`: a few launches for all parameters). `train.compile_backend` picks the backend:
  `inductor` (default, code generation), `aot_eager` / `eager` (capture without code generation: the CPU tests
  and debugging). On a CPU, `on` runs inductor's C++ kernels (slower than eager here, benchmarks/bench_compile.py).

Every question "is this a GPU?" goes through `structseq.nn.accelerator.on_accelerator`, so a CPU test can take
the GPU's branches (`structseq.testing.accelerator`). Shapes compile once: the recompile limit is set above the
number of batch shapes the run can see (`recompile_limit`), and a shape past it stops the run with an error
naming the settings (`shapes_within_limit`) instead of running eager without a word, as torch would.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from structseq.errors import ConfigError
from structseq.nn.accelerator import on_accelerator
from structseq.registry import ARCHS, COMPILES

# batch shapes beyond `optim.num_buckets` that a run may compile: the first shape's static graph before torch's
# automatic dynamic shapes recompile it symbolically (the Transformer), and one spare
SPARE_COMPILES = 2


def set_tf32(device: torch.device, enabled: bool) -> None:
    """TF32 for float32 matmuls (cuBLAS) and convolutions (cuDNN) on a CUDA device; nothing on others."""
    if on_accelerator(device):
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


def compile_wanted(
    setting: str, device: torch.device, static_shapes: bool, *, arch_compiles: bool = True, accumulate: int = 1
) -> bool:
    """Whether `train.compile` (on | off | auto) compiles here. auto compiles only where it pays: on CUDA, with
    `optim.static_shapes` (a few batch shapes), for an architecture declaring `COMPILES` (`arch_compiles`), and
    with `optim.accumulate` 1 (CUDA graphs replayed for several batches before one backward fail: pytorch#169545).
    on / off: as said."""
    if setting == "auto":
        return device.type == "cuda" and static_shapes and arch_compiles and accumulate == 1
    return setting == "on"


def declares_compiles(arch: str) -> bool:
    """Whether the registered architecture `arch` declares `COMPILES` at its registration."""
    return COMPILES in ARCHS.get(arch).capabilities


def recompile_limit(num_buckets: int) -> int:
    """The compiles per code object a run allows: every length bucket's shape (with `optim.static_shapes`, a
    model whose Python reads a size, as Dangle's points, compiles once per bucket) plus `SPARE_COMPILES`;
    torch's default (8) without buckets."""
    return num_buckets + SPARE_COMPILES if num_buckets else 8


def compile_model(model: nn.Module, device: torch.device, backend="inductor", num_buckets: int = 0) -> nn.Module:
    """The model compiled for training steps: CUDA graphs over inductor's kernels on CUDA (`reduce-overhead`: a
    graph recorded per batch shape), inductor's default mode elsewhere (`backend` may also be a dynamo backend
    function: the tests' counting one). Shapes: torch's automatic dynamic shapes (a second shape recompiles once
    with symbolic sizes instead of once per shape); a model whose Python reads a size (Dangle's points) is
    specialised per shape, at most `optim.num_buckets` of them, below `recompile_limit`, and past it the step
    raises instead of running eager. On an accelerator cuDNN's attention is turned off here, once for the
    process, before anything is traced (`structseq.nn.attention.sdpa_without_cudnn` no longer asks inside the
    model, which broke the graph at every attention call)."""
    accelerator = on_accelerator(device)
    if accelerator:
        torch.backends.cuda.enable_cudnn_sdp(False)
    limit = recompile_limit(num_buckets)
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, limit)
    torch._dynamo.config.fail_on_recompile_limit_hit = True
    mode = "reduce-overhead" if accelerator and backend == "inductor" else None
    return torch.compile(model, backend=backend, mode=mode)


@contextmanager
def shapes_within_limit(batch: dict) -> Iterator[None]:
    """Around a compiled model's call on `batch`: a batch shape past the recompile limit is a one-line error
    naming the settings (torch would run it eager with one warning, and every later such batch silently)."""
    try:
        yield
    except torch._dynamo.exc.FailOnRecompileLimitHit as e:
        limit = torch._dynamo.config.recompile_limit
        shape = ", ".join(f"{k} {tuple(v.shape)}" for k, v in batch.items() if isinstance(v, torch.Tensor))
        raise ConfigError(
            f"'train.compile': the batch of shape {shape} would compile past the recompile limit ({limit}) and run "
            "eager; set 'optim.static_shapes: true' with 'optim.num_buckets' (one shape per bucket) or "
            "'train.compile: off'"
        ) from e


def new_step() -> None:
    """Before each batch of a compiled model: CUDA-graph trees may reuse the last replay's output memory (the
    previous batch's loss and activations are consumed by then)."""
    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)
    if mark is not None:
        mark()
