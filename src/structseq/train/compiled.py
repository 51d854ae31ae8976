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
"""

from __future__ import annotations

import torch
from torch import nn

from structseq.registry import ARCHS, COMPILES


def set_tf32(device: torch.device, enabled: bool) -> None:
    """TF32 for float32 matmuls (cuBLAS) and convolutions (cuDNN) on a CUDA device; nothing on others."""
    if device.type == "cuda":
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


def compile_model(model: nn.Module, device: torch.device, backend: str = "inductor") -> nn.Module:
    """The model compiled for training steps: CUDA graphs over inductor's kernels on CUDA (`reduce-overhead`: a
    graph recorded per batch shape), inductor's default mode elsewhere. Shapes: torch's automatic dynamic
    shapes (a second shape recompiles once with symbolic sizes instead of once per shape); a model whose Python
    reads a size (Dangle's points) is still specialised per shape, at most `optim.num_buckets` of them."""
    mode = "reduce-overhead" if device.type == "cuda" and backend == "inductor" else None
    return torch.compile(model, backend=backend, mode=mode)


def new_step() -> None:
    """Before each batch of a compiled model: CUDA-graph trees may reuse the last replay's output memory (the
    previous batch's loss and activations are consumed by then)."""
    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)
    if mark is not None:
        mark()
