"""`train.device`: which device a run (or a loaded model) uses."""

from __future__ import annotations

import torch

from structseq.errors import ConfigError


def resolve_device(name: str) -> torch.device:
    """`train.device`: auto (CUDA when available) | cpu | cuda | cuda:N."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"'train.device': unknown device '{name}'; choices: auto, cpu, cuda, cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"'train.device' is '{name}' but no CUDA device is available; use auto or cpu")
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"'train.device': unsupported device '{name}'; choices: auto, cpu, cuda, cuda:N")
    return device
