"""Tasks: one class per kind of problem (see `structseq.tasks.base`), each registered where it is defined
(`@register_task`); the config key `task.type` picks one."""

from __future__ import annotations

from structseq.config import TaskOptions
from structseq.registry import TASKS
from structseq.tasks.base import Task


def get_task(cfg) -> Task:
    """The task `cfg.task.type` names, set up with the whole config."""
    return TASKS.get(cfg.task.type)(cfg)


__all__ = ["TASKS", "Task", "TaskOptions", "get_task"]
