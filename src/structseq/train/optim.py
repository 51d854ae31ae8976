"""Optimisers and learning-rate schedules (as multipliers of the configured lr), each registered by name:
`optim.optimizer` and `optim.schedule` pick them, and a plugin adds one with the same decorators."""

from __future__ import annotations

import math

import torch

from structseq.config import OptimConfig
from structseq.registry import OPTIMIZERS, SCHEDULES, register_optimizer, register_schedule


def build_optimizer(cfg: OptimConfig, params) -> torch.optim.Optimizer:
    return OPTIMIZERS.get(cfg.optimizer)(cfg, params)


def lr_multiplier(cfg: OptimConfig, model_dim: int, max_steps: int):
    """step (1-based update count) -> factor applied to cfg.lr."""
    return SCHEDULES.get(cfg.schedule)(cfg, model_dim, max_steps)


def _adam_args(cfg: OptimConfig) -> dict:
    # fused: one pass over each parameter's memory per update instead of a Python loop of small ops
    return dict(lr=cfg.lr, betas=tuple(cfg.betas), eps=cfg.eps, weight_decay=cfg.weight_decay, fused=True)


@register_optimizer("adam")
def _adam(cfg: OptimConfig, params) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, **_adam_args(cfg))


@register_optimizer("adamw")
def _adamw(cfg: OptimConfig, params) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, **_adam_args(cfg))


@register_schedule("constant")
def _constant(cfg: OptimConfig, model_dim: int, max_steps: int):
    return lambda step: 1.0


@register_schedule("noam")
def _noam(cfg: OptimConfig, model_dim: int, max_steps: int):
    """lr * d^-0.5 * min(step^-0.5, step * warmup^-1.5)"""
    w = max(cfg.warmup, 1)
    return lambda step: model_dim**-0.5 * min(max(step, 1) ** -0.5, max(step, 1) * w**-1.5)


@register_schedule("inverse_sqrt")
def _inverse_sqrt(cfg: OptimConfig, model_dim: int, max_steps: int):
    """fairseq: linear warm-up from 0, then lr * sqrt(warmup / step)"""
    w = max(cfg.warmup, 1)
    return lambda step: (step / w) if step < w else math.sqrt(w / step)


@register_schedule("cosine")
def _cosine(cfg: OptimConfig, model_dim: int, max_steps: int):
    """linear warm-up, then a half cosine from lr down to min_lr at max_steps"""
    w = max(cfg.warmup, 1)
    floor = cfg.min_lr / cfg.lr if cfg.lr else 0.0

    def cosine(step):
        if step < w:
            return step / w
        progress = min(1.0, (step - w) / max(1, max_steps - w))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress))

    return cosine
