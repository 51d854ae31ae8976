"""The training loop shared by every model and task.

The loop only calls the task (`structseq.tasks`): it encodes the examples once, batches them by the task's
length under the token budget, asks the task for each batch's loss and validation metrics, and steps the
optimiser. It runs on a CPU or a GPU (`train.device`, optional bf16 autocast) and data-parallel under
`torchrun` (PyTorch DDP: each rank takes its shard of every batch; gradients are summed over ranks and
normalised by the update's total number of predicted units, so N processes reach the parameters of one
process on the same global batches; only rank 0 writes logs and checkpoints).

Exact resumption: an update is a pure function of (parameters, optimiser state, data position, RNG
state) at its start, and checkpoints are only written between updates (Ctrl-C sets a flag that the
loop honours after the current update). So a checkpoint written on Ctrl-C, at a validation or every
`save_every` updates resumes bit-exactly: same parameters as an uninterrupted run with the same seed.
Every RNG the run uses (Python, NumPy, torch CPU and CUDA) is saved and restored.

A run's directory and starting point live in `structseq.run` (`directory.open_session`: its lock for the
life of the run, its files; `start`: a fresh, resumed or `train.init_from` start, computed once and applied in
one place; `rng`, `checkpoint`); beside the Trainer here are `device`, `loggers` (and the Ctrl-C / SIGTERM handlers: finish the update, save, stop) and
`progress` (the bar, the validation line, the log window). Under DDP only rank 0 locks and writes.
"""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import torch

from structseq.config import Config, config_from_dict
from structseq.data.training import load_training_data
from structseq.decode.strategies import check_fits
from structseq.errors import ConfigError
from structseq.models.base import build_model
from structseq.run import directory, start
from structseq.run.averaging import keep_step_checkpoint
from structseq.run.checkpoint import save_checkpoint
from structseq.run.layout import checkpoint_file
from structseq.run.resume import finished, finished_summary, plan_resume
from structseq.run.rng import rng_state, seed_everything
from structseq.run.saved_config import saved_strategy
from structseq.tasks import get_task
from structseq.train import distributed
from structseq.train.batches import TrainingBatches
from structseq.train.compiled import (
    compile_model,
    compile_wanted,
    declares_compiles,
    new_step,
    set_tf32,
    shapes_within_limit,
)
from structseq.train.device import resolve_device, set_threads
from structseq.train.loggers import check_loggers, close_quietly_on_error, install_stop_handlers, open_loggers
from structseq.train.optim import build_optimizer, lr_multiplier
from structseq.train.progress import (
    LogWindow,
    LossWatch,
    Progress,
    ProgressBar,
    closing_summary,
    higher_is_better,
    validation_line,
)


class StepResult(NamedTuple):
    """What one update (`Trainer.step`) did. `loss`: its targets' mean NLL per target token, a 0-d tensor left
    on the device (reading it syncs; a float under DDP, whose all-reduce synced anyway); `target_tokens`: the
    update's predicted units over all ranks; `grad_norm`: the gradient norm before clipping (a tensor), 0.0
    when `optim.clip_norm` is 0."""

    loss: torch.Tensor | float
    target_tokens: int
    grad_norm: torch.Tensor | float = 0.0


class Trainer:
    """One training run: the task, its data, the model and optimiser, built (or restored for `--resume`)
    from a config; `run()` trains, `step()` takes one update, `batches` (`TrainingBatches`) feeds them."""

    def __init__(
        self,
        cfg: Config,
        out_dir: str | Path,
        *,
        data_root=None,
        resume: bool | start.OpenedRun = False,
        show_progress: bool = True,
        on_update: Callable[[int], None] | None = None,
        config_changes: Mapping[str, tuple] | None = None,
        config_file: str | Path | None = None,
    ):
        """`config_changes` (`{key: (old, new)}`, see `structseq.run.resume.resume_changes`): what a resumed
        run changed in its config, recorded in the run's config history when the run starts; `config_file`:
        the file `cfg` was read from, which an error about one of its values names; `resume`: True, or the run
        directory already opened for it (`structseq.run.start.open_run_dir`, as `resume()` does: its checkpoint
        is loaded once).

        It reads: open the run directory (`structseq.run.start.open_run_dir`: an existing run is refused before
        any data is read) -> the starting point (`start.starting_point`) -> build -> apply (`start.apply`)."""
        self.cfg, self.out = cfg, Path(out_dir)
        self.show_progress, self.on_update = show_progress, on_update
        self.resume, self.config_changes = bool(resume), dict(config_changes or {})
        self._signal: int | None = None
        self.dist = distributed.context()
        self.opened = resume if isinstance(resume, start.OpenedRun) else start.open_run_dir(self.out, resume)
        set_threads(cfg.train.threads, hint=show_progress)
        self.device = self.dist.device if self.dist.world_size > 1 else resolve_device(cfg.train.device)
        set_tf32(self.device, cfg.train.tf32)
        if cfg.train.bf16 and not (self.device.type == "cuda" and torch.cuda.is_bf16_supported()):
            raise ConfigError(
                f"'train.bf16' needs a CUDA device that supports bfloat16; set it to false on {self.device}"
            )
        self.task = get_task(cfg)  # config_from_dict checked train.valid_metric against it
        check_loggers(cfg.train)
        self.data = load_training_data(cfg, self.task, data_root)
        begin = start.starting_point(cfg, self.task, self.data, self.opened)
        self.data.vocabs = begin.vocabs
        self._build(config_file)
        saved = start.apply(begin, self.model, self.optimizer)
        self.progress = Progress() if saved is None else Progress.saved(saved)
        self.ddp_model = self.dist.wrap(self.model)
        self._compiled = compile_wanted(
            cfg.train.compile,
            self.device,
            cfg.optim.static_shapes,
            arch_compiles=declares_compiles(cfg.model.arch),
            accumulate=cfg.optim.accumulate,
        )
        if self._compiled:  # structseq.train.compiled: the step captured per batch shape
            self.ddp_model = compile_model(
                self.ddp_model, self.device, cfg.train.compile_backend, cfg.optim.num_buckets
            )

    def _build(self, config_file) -> None:
        """The model (seeded), its decode strategy checked, the optimiser, the schedule and the batches."""
        cfg = self.cfg
        seed_everything(cfg.train.seed)
        self.model = build_model(cfg.model, self.data.vocabs, self.data.train).to(self.device)
        self.model.static_shapes = cfg.optim.static_shapes  # structseq.models.base.Model
        if self.resume:  # the saved config: a strategy older versions ignored decodes as the default, as it did then
            strategy = saved_strategy(cfg.decode.strategy, self.model, self.opened.last)
            if strategy != cfg.decode.strategy:  # the checkpoints keep the run's config as it was given
                self.task.cfg = replace(cfg, decode=replace(cfg.decode, strategy=strategy))
        else:  # validation decodes with it: refused before any update
            check_fits(cfg.decode.strategy, self.model, str(config_file or ""), cfg.decode)
        # a model may split its parameters into groups with an `lr_scale` (e.g. a pretrained encoder)
        self.optimizer = build_optimizer(cfg.optim, self.model.param_groups())
        self.lr_at = lr_multiplier(cfg.optim, self.model.width, cfg.train.max_steps)
        encoded = [self.task.encode(e, self.data.vocabs) for e in self.data.train]
        self.batches = TrainingBatches(cfg, self.task, encoded, self.device)

    # ------------------------------------------------------------ checkpoints
    def _snapshot(self) -> dict:
        p = self.progress
        return {
            "step": p.step,
            "epoch": p.epoch,
            "batch_in_epoch": p.batch_in_epoch,
            "best": p.best,
            "bad_validations": p.bad_validations,
            "history": list(p.history),
            "stopped": p.stopped,
            "train_seconds": round(p.train_seconds, 3),
            "rng": rng_state(),
        }

    def _save(self, name: str, snap: dict) -> None:
        if not self.dist.is_main:
            return
        progress = {k: v for k, v in snap.items() if k != "rng"}
        save_checkpoint(
            {
                "model": self.model.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "scheduler": {"schedule": self.cfg.optim.schedule, "step": snap["step"]},
                "rng": snap["rng"],
                "vocab": {k: v.to_list() for k, v in self.data.vocabs.items()},
                "task": self.task.state_dict(),
                "config": self.cfg.to_dict(),
                "progress": progress,
            },
            checkpoint_file(self.out, name),
        )

    def _save_periodic(self, snap: dict) -> None:
        """The last checkpoint of a validation or `train.save_every` save, also kept as step{K}.pt when
        `train.keep_last` asks (the older ones beyond it deleted)."""
        self._save("last", snap)
        if self.dist.is_main and self.cfg.train.keep_last:
            keep_step_checkpoint(self.out, snap["step"], self.cfg.train.keep_last)

    # ------------------------------------------------------------ validation
    @torch.no_grad()
    def validate(self) -> dict:
        self.model.eval()
        try:
            with self.autocast():
                return self.task.validate(self.model, self.data.valid, self.data.vocabs)
        finally:
            self.model.train()

    # ------------------------------------------------------------ the loop
    def autocast(self):
        """The context every forward pass runs in: bf16 autocast with `train.bf16`, else none (a benchmark may
        replace it, e.g. `benchmarks/bench_lstm.py`'s CPU bfloat16)."""
        if self.cfg.train.bf16:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return nullcontext()

    def step(self) -> StepResult:
        """One update, the one `run()` takes next: `optim.accumulate` batches' gradients (`self.batches`),
        clipped, one optimiser step at the schedule's learning rate; `progress.step` + 1. Public for the
        benchmarks and tests that time or inspect single updates; `run()` adds logs, validation, checkpoints."""
        cfg = self.cfg
        batches = [self.batches.next(self.progress, self.dist) for _ in range(cfg.optim.accumulate)]
        ntok = self.dist.sum_int(sum(b.num_tokens for b in batches))  # the whole update's units, every rank
        # the loss is divided by the update's target tokens, or with optim.sentence_avg by its sentences
        units = self.dist.sum_int(sum(b.num_sentences for b in batches)) if cfg.optim.sentence_avg else ntok
        scale = self.dist.world_size / max(units, 1)  # DDP averages gradients over ranks: undo, then normalise
        self.optimizer.zero_grad(set_to_none=True)
        total = torch.zeros((), dtype=torch.float64, device=self.device)  # on the device: no sync per update
        grad_norm = 0.0
        for i, b in enumerate(batches):
            if self._compiled:
                new_step()
            sync = self.dist.no_sync(self.ddp_model) if i < len(batches) - 1 else nullcontext()
            shapes = shapes_within_limit(b) if self._compiled else nullcontext()
            with sync, self.autocast(), shapes:
                loss, nll, _ = self.task.loss(self.ddp_model, b, cfg.optim.label_smoothing)
                if b.num_tokens == 0:  # an empty shard still joins the gradient all-reduce
                    loss = loss * 0.0
                if self.dist.world_size > 1:
                    (loss * scale).backward()
                else:
                    (loss / units).backward()  # the exact arithmetic of one process
            total += nll.detach().double()
        if cfg.optim.clip_norm > 0:  # the norm before clipping, logged as grad_norm (a tensor: read when logged)
            grad_norm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.optim.clip_norm)
        step = self.progress.step + 1
        lr = cfg.optim.lr * self.lr_at(step)
        for g in self.optimizer.param_groups:
            g["lr"] = lr * g.get("lr_scale", 1.0)
        self.optimizer.step()
        # fused optimisers update parameters in place without bumping their version counters, which the
        # models' inference caches (derived weights) key on: bump them, so no cache outlives an update
        torch.autograd.graph.increment_version([p for p in self.model.parameters() if p.requires_grad])
        self.progress.step = step
        if self.dist.world_size > 1:  # the all-reduce syncs anyway
            return StepResult(self.dist.sum_float(float(total)) / max(ntok, 1), ntok, grad_norm)
        return StepResult(total / max(ntok, 1), ntok, grad_norm)

    def request_stop(self) -> None:
        """Finish the current update, save the last checkpoint and return (what Ctrl-C does)."""
        self._stop = True

    def run(self) -> dict:
        """Train to `train.max_steps` (or early stopping, or Ctrl-C / SIGTERM) holding the run directory's
        lock; returns a summary: steps, stopped (max_steps | early_stopping | interrupted | already_finished),
        best, history (and signal, reason where they apply)."""
        lock = self._open_run_dir()
        try:
            reason = finished(vars(self.progress), self.cfg.train.max_steps) if self.resume else None
            if reason is not None:
                return finished_summary(vars(self.progress), reason)
            return self._run()
        finally:
            if lock is not None:
                lock.release()

    def _open_run_dir(self) -> directory.RunLock | None:
        """The run directory's session (`structseq.run.directory.open_session`): locked and prepared by rank 0."""
        return directory.open_session(
            self.out,
            self.dist,
            config=self.cfg.to_dict(),
            files=self.data.files,
            resumed=self.opened.check_unchanged if self.resume else None,
            step=self.progress.step,
            unfinished=finished(vars(self.progress), self.cfg.train.max_steps) is None,
            changes=self.config_changes,
        )

    def _run(self) -> dict:
        cfg, p = self.cfg, self.progress
        self.model.train()
        self._stop = False
        p.stopped = None
        log = open_loggers(self.out, cfg.to_dict(), p.step) if self.dist.is_main else None
        bar = self._bar = ProgressBar(cfg.train.max_steps, p.step, enabled=self.show_progress and self.dist.is_main)
        window = LogWindow()
        watch = LossWatch()
        stopped = "max_steps"
        previous_handlers = install_stop_handlers(lambda: self._stop, self._on_signal)
        try:
            t_prev = time.perf_counter()
            while p.step < cfg.train.max_steps:
                loss, ntok, grad_norm = self.step()
                now = time.perf_counter()
                p.train_seconds, t_prev = p.train_seconds + (now - t_prev), now
                window.add(loss, ntok, grad_norm)
                watch.see(loss, p.step)
                validate_now = cfg.train.valid_every and p.step % cfg.train.valid_every == 0
                saving = validate_now or (cfg.train.save_every and p.step % cfg.train.save_every == 0)
                if p.step % cfg.train.log_every == 0 or p.step == cfg.train.max_steps or saving or self._stop:
                    watch.check()  # a non-finite loss never reaches a log line or a checkpoint
                if p.step % cfg.train.log_every == 0 or p.step == cfg.train.max_steps:
                    rec = window.record(p.step, self.optimizer.param_groups[0]["lr"], p.epoch, cfg.optim.clip_norm > 0)
                    self._write(log, rec)
                    bar.update(p.step, rec)
                if validate_now or p.step == cfg.train.max_steps:
                    if self._validate_and_save(log):
                        stopped = "early_stopping"
                        break
                elif cfg.train.save_every and p.step % cfg.train.save_every == 0:
                    self._save_periodic(self._snapshot())
                if self.on_update is not None:
                    self.on_update(p.step)
                if self.dist.any(self._stop) and p.step < cfg.train.max_steps:
                    watch.check()  # every rank (the loss is the same on all): a diverged update is never saved
                    p.stopped = stopped = "interrupted"
                    self._save("last", self._snapshot())
                    break
        finally:
            for signum, previous in previous_handlers.items():
                signal.signal(signum, previous)
            bar.close()
            if log is not None:
                close_quietly_on_error(log)
        line = closing_summary(p.history, cfg.train.valid_metric, self.out)
        if line and self.show_progress and self.dist.is_main:
            print(line, file=sys.stderr, flush=True)
        summary = {"steps": p.step, "stopped": stopped, "best": p.best, "history": p.history}
        if stopped == "interrupted":
            summary["signal"] = signal.Signals(self._signal or signal.SIGINT).name
        return summary

    @staticmethod
    def _write(log, rec: dict) -> None:
        """One record to metrics.jsonl and the loggers the config names (`structseq.train.loggers`)."""
        if log is not None:
            log.log(rec["step"], {k: v for k, v in rec.items() if k != "step"})

    def _on_signal(self, signum: int) -> None:
        self._signal, self._stop = signum, True

    def _validate_and_save(self, log) -> bool:
        """Validate, write best/last checkpoints; True when early stopping triggers."""
        p, cfg = self.progress, self.cfg
        metrics = self.validate()
        key = f"valid_{cfg.train.valid_metric}"
        value = metrics[key]
        maximise = higher_is_better(self.task, cfg.train.valid_metric)
        better = p.best is None or (value > p.best if maximise else value < p.best)
        if better:
            p.best, p.bad_validations = value, 0
        else:
            p.bad_validations += 1
        rec = {"step": p.step, **metrics, "best": p.best}
        p.history.append(rec)
        self._write(log, rec)
        self._bar.validation(validation_line(rec, cfg.train.valid_metric))
        stop = bool(cfg.train.patience) and p.bad_validations >= cfg.train.patience
        if stop:
            p.stopped = "early_stopping"
        elif p.step >= cfg.train.max_steps:
            p.stopped = "max_steps"
        snap = self._snapshot()
        if better:
            self._save("best", snap)
        self._save_periodic(snap)
        return stop


def train(cfg: Config | dict, out_dir: str | Path, **kwargs) -> dict:
    """Train a model from a config; see `Trainer` for keyword arguments."""
    if isinstance(cfg, dict):
        cfg = config_from_dict(cfg)
    return Trainer(cfg, out_dir, **kwargs).run()


def resume(out_dir: str | Path, *, overrides: Sequence[str] = (), **kwargs) -> dict:
    """Continue the run in `out_dir` from its last checkpoint, with its saved config; `overrides` may only
    extend `train.max_steps` (see `resume_changes`). A finished run is left unchanged: the summary's
    `stopped` is `already_finished` and `reason` says why."""
    opened = start.open_run_dir(out_dir, resume=True)  # its last checkpoint, loaded once
    cfg, changes, done = plan_resume(opened.last, opened.state, overrides)
    if done is not None:
        return done
    return Trainer(cfg, Path(out_dir), resume=opened, config_changes=changes, **kwargs).run()
