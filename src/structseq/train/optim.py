"""Optimisers and learning-rate schedules (as multipliers of the configured lr)."""

from __future__ import annotations

import math

import torch

from structseq.config import OptimConfig
from structseq.errors import ConfigError


def build_optimizer(cfg: OptimConfig, params) -> torch.optim.Optimizer:
    # fused: one pass over each parameter's memory per update instead of a Python loop of small ops
    kw = dict(lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay, fused=True)
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, **kw)
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(params, **kw)
    raise ConfigError(f"'optim.optimizer': unknown optimizer '{cfg.optimizer}'; choices: adam, adamw")


def lr_multiplier(cfg: OptimConfig, model_dim: int, max_steps: int):
    """step (1-based update count) -> factor applied to cfg.lr."""
    w = max(cfg.warmup, 1)
    if cfg.schedule == "constant":
        return lambda step: 1.0
    if cfg.schedule == "noam":  # lr * d^-0.5 * min(step^-0.5, step * warmup^-1.5)
        return lambda step: model_dim**-0.5 * min(max(step, 1) ** -0.5, max(step, 1) * w**-1.5)
    if cfg.schedule == "inverse_sqrt":  # fairseq: linear warm-up from 0, then lr * sqrt(warmup / step)
        return lambda step: (step / w) if step < w else math.sqrt(w / step)
    if cfg.schedule == "cosine":
        floor = cfg.min_lr / cfg.lr if cfg.lr else 0.0

        def cosine(step):
            if step < w:
                return step / w
            progress = min(1.0, (step - w) / max(1, max_steps - w))
            return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

        return cosine
    raise ConfigError(
        f"'optim.schedule': unknown schedule '{cfg.schedule}'; choices: constant, noam, inverse_sqrt, cosine"
    )
