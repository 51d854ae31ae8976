"""Tasks: one class per kind of problem (see `structseq.tasks.base`); the config key `task.type` picks one."""

from __future__ import annotations

from structseq.tasks.base import Task, TaskOptions
from structseq.tasks.context import ContextSeq2SeqTask
from structseq.tasks.seq2seq import Seq2SeqTask
from structseq.tasks.supertag import SupertagTask

#: task name -> class; a new kind of problem registers here
TASKS: dict[str, type[Task]] = {"seq2seq": Seq2SeqTask, "context-seq2seq": ContextSeq2SeqTask,
                                "supertag": SupertagTask}


def get_task(cfg) -> Task:
    return TASKS[cfg.task.type](cfg)


__all__ = ["TASKS", "Task", "TaskOptions", "get_task"]
