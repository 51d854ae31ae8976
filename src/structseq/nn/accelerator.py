"""The one place where model code asks whether a tensor lives on an accelerator (a CUDA device).

Models, layers and the compiled step take a few branches on an accelerator that they do not take on the CPU:
attention leaves cuDNN's SDPA kernel out (`structseq.nn.attention.sdpa_without_cudnn`), dropout uses
`F.dropout`'s fused kernel (`structseq.nn.dropout`), Dangle / R-Dangle batch more re-encoding points a pass
(`AUTO_CHUNK_STEPS_ACCELERATOR`), and the compiled step captures CUDA graphs (`structseq.train.compiled`). Each
asks `on_accelerator`, so that a test on a machine without a GPU can make the CPU take every one of them
(`accelerator_paths`, used by `structseq.testing.accelerator`): what a GPU would run, short of its kernels.

Calls into CUDA itself (the RNG state, `torch.cuda.set_device`, bf16 support, autocast's device) are not
branches of this kind: they need the device and stay where they are."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import Tensor

_FORCED = False


def on_accelerator(where: Tensor | torch.device) -> bool:
    """Whether code for this tensor (or device) takes the accelerator's branches: off the CPU, or everywhere
    within `accelerator_paths()`."""
    device = where if isinstance(where, torch.device) else where.device
    return _FORCED or device.type != "cpu"


@contextmanager
def accelerator_paths(enabled: bool = True) -> Iterator[None]:
    """Within the block every `on_accelerator` question is answered yes (a CPU takes the CUDA branches)."""
    global _FORCED
    before, _FORCED = _FORCED, enabled
    try:
        yield
    finally:
        _FORCED = before
