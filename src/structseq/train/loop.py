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

The run directory (`structseq.train.rundir`): `run()` holds its lock for the life of the run (a second run
into the same directory gets an error naming the owner); a new run never overwrites files it did not
create; a resumed run removes the temporaries of interrupted saves and cuts `metrics.jsonl` back to its
checkpoint's step. Each checkpoint records why the run stopped (`progress["stopped"]`: max_steps,
early_stopping, interrupted; None while it runs), and resuming a finished run changes nothing. SIGTERM
(schedulers, `timeout`) is handled like Ctrl-C: finish the update, save, stop (the CLI exits 128 + signal).
Under DDP only rank 0 locks and writes.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from structseq.config import Config, apply_overrides, config_from_dict
from structseq.data.batching import Batch, make_batches
from structseq.data.example import Example
from structseq.data.limits import length_limit
from structseq.data.registry import holdout, load_dataset
from structseq.data.vocab import NamedVocabs, Vocab
from structseq.errors import ConfigError, DivergedError, StructseqError
from structseq.models.registry import build_model
from structseq.tasks import Task, get_task
from structseq.tasks.base import Vocabs
from structseq.train import distributed, rundir
from structseq.train.checkpoint import RESUME_KEYS, RUN_KEYS, load_checkpoint, load_model_state, save_checkpoint
from structseq.train.optim import build_optimizer, lr_multiplier


@dataclass
class TrainingData(NamedVocabs):
    train: list[Example]
    valid: list[Example]
    vocabs: Vocabs
    skipped: int = 0  # examples left out for exceeding data.max_length


def load_split(cfg: Config, split: str, data_root=None) -> list[Example]:
    """A split of the configured dataset, a file (`data.dataset: files`) or NAME:SPLIT of any dataset."""
    d = cfg.data
    return load_dataset(d.dataset if d.dataset != "files" else split, split, data_root, columns=d.columns)


def load_training_data(cfg: Config, task: Task | None = None, data_root=None) -> TrainingData:
    """Train/valid examples and the task's vocabularies built from the training split. Examples longer than
    `data.max_length` are skipped and counted with a warning (`data.too_long: error`: an error naming the
    line)."""
    task = task or get_task(cfg)
    d = cfg.data
    with length_limit(d.max_length, skip=d.too_long == "skip") as limit:
        train = _within_limit(load_split(cfg, d.train, data_root), d.max_length, limit.skipped, d.train, d.too_long)
        if d.max_train_examples:
            train = train[: d.max_train_examples]
        if d.valid is None:
            train, valid = holdout(train, d.valid_fraction, cfg.train.seed)
        else:
            valid = _within_limit(load_split(cfg, d.valid, data_root), d.max_length, limit.skipped, d.valid,
                                  d.too_long)
    if limit.skipped:
        warnings.warn(f"skipped {len(limit.skipped)} examples longer than data.max_length {d.max_length} tokens "
                      f"(first: {limit.skipped[0]})", stacklevel=2)
    if not train:
        raise StructseqError(f"no training examples in {d.dataset}/{d.train}"
                             + (f" ({len(limit.skipped)} longer than data.max_length)" if limit.skipped else ""))
    task.check_examples(train, f"{d.dataset}/{d.train}")
    task.check_examples(valid, f"{d.dataset}/{d.valid or d.train + ' (held out)'}")
    return TrainingData(train, valid, task.build_vocabs(train), len(limit.skipped))


def _within_limit(examples: list[Example], max_length: int | None, skipped: list[str], split: str,
                  too_long: str) -> list[Example]:
    """The limit again for examples no reader admitted line by line (generated splits)."""
    if max_length is None:
        return examples
    kept = []
    for i, e in enumerate(examples):
        n = max(len(e.source), len(e.target))
        if n <= max_length:
            kept.append(e)
        elif too_long == "skip":
            skipped.append(f"{split}: example {i + 1}")
        else:
            raise StructseqError(f"{split}: example {i + 1} has {n} tokens, more than data.max_length {max_length}")
    return kept


def _describe_mismatch(name: str, saved: Vocab, built: Vocab) -> str:
    name = {"src": "source", "tgt": "target"}.get(name, name)
    missing = [t for t in built.itos if t not in saved][:5]
    extra = [t for t in saved.itos if t not in built][:5]
    return (f"the checkpoint's {name} vocabulary ({len(saved)} tokens) does not match the data "
            f"({len(built)} tokens; new in data: {missing}, only in checkpoint: {extra}). "
            "Was the run trained on another dataset or config?")


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


def rng_state() -> dict:
    """Every RNG a run may draw from, as plain types and tensors (weights-only loadable)."""
    np_state = np.random.get_state()
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "numpy": {"keys": torch.from_numpy(np_state[1].astype(np.int64)), "pos": int(np_state[2]),
                       "has_gauss": int(np_state[3]), "cached_gaussian": float(np_state[4])}}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    if "python" in state:
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
    if "numpy" in state:
        n = state["numpy"]
        np.random.set_state(("MT19937", n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                             n["cached_gaussian"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def seed_everything(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    best: float | None = None
    bad_validations: int = 0
    history: list = field(default_factory=list)
    #: why the run stopped: max_steps | early_stopping | interrupted (None: running, or killed)
    stopped: str | None = None
    #: wall seconds spent in the training loop (updates and the validations between them), summed over
    #: resumes; the work a kill lost after the last checkpoint is not counted, its redo is
    train_seconds: float = 0.0


def finished(progress: Mapping, max_steps: int) -> str | None:
    """Why the run whose checkpoint holds `progress` is finished (early_stopping, max_steps), or None when
    it may continue (interrupted or killed before its budget)."""
    if progress.get("stopped") == "early_stopping":
        return "early_stopping"
    if progress.get("step", 0) >= max_steps:
        return "max_steps"
    return None


#: the config keys `--resume` may change (`--resume RUN --set train.max_steps=N` extends a run)
RESUME_OVERRIDES = ("train.max_steps",)


def resume_changes(cfg: Config, overrides: Sequence[str]) -> dict[str, tuple]:
    """The changes `overrides` make to a resumed run's config, `{key: (old, new)}`: only a larger
    `train.max_steps`; anything else is a ConfigError saying what `--resume` accepts."""
    flat: dict = {}

    def walk(node: dict, prefix: str) -> None:
        for k, v in node.items():
            if isinstance(v, dict) and v:
                walk(v, f"{prefix}{k}.")
            else:
                flat[f"{prefix}{k}"] = v

    walk(apply_overrides({}, list(overrides)), "")
    for key in flat:
        if key not in RESUME_OVERRIDES:
            raise ConfigError(f"--resume continues a run with its saved config, so '{key}' cannot be changed; "
                              "the one change allowed is a larger budget: --set train.max_steps=N")
    if not flat:
        return {}
    new = config_from_dict(apply_overrides(cfg.to_dict(), list(overrides)), saved=True).train.max_steps
    old = cfg.train.max_steps
    if new < old:
        raise ConfigError(f"'train.max_steps': --resume can only extend a run's budget ({old}), not cut it to {new}")
    return {"train.max_steps": (old, new)} if new != old else {}


def _stat(path: Path) -> tuple:
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


class Trainer:
    def __init__(self, cfg: Config, out_dir: str | Path, *, data_root=None, resume: bool = False,
                 show_progress: bool = True, on_update: Callable[[int], None] | None = None,
                 config_changes: Mapping[str, tuple] | None = None):
        """`config_changes` (`{key: (old, new)}`, see `resume_changes`): what a resumed run changed in its
        config, recorded in the run's config history when the run starts."""
        self.cfg, self.out = cfg, Path(out_dir)
        self.show_progress, self.on_update = show_progress, on_update
        self.resume, self.config_changes = resume, dict(config_changes or {})
        self._signal: int | None = None
        self.dist = distributed.context()
        rundir.check_directory(self.out)
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        self.device = self.dist.device if self.dist.world_size > 1 else resolve_device(cfg.train.device)
        if cfg.train.bf16 and not (self.device.type == "cuda" and torch.cuda.is_bf16_supported()):
            raise ConfigError("'train.bf16' needs a CUDA device that supports bfloat16; set it to false on "
                              f"{self.device}")
        self.task = get_task(cfg)
        if cfg.train.valid_metric not in self.task.valid_metrics:
            raise ConfigError(f"'train.valid_metric': '{cfg.train.valid_metric}' is not a metric of task "
                              f"'{self.task.name}'; choices: {', '.join(self.task.valid_metrics)}")
        self.data = load_training_data(cfg, self.task, data_root)
        ckpt = None
        self._last = self.out / "checkpoints" / "last.pt"
        if resume:
            ckpt = load_checkpoint(self._last, {**RUN_KEYS, **RESUME_KEYS})
            self._loaded = _stat(self._last)
            if ckpt.get("task"):  # what the task learned (e.g. subwords) is restored, never relearned
                self.task.load_state_dict(ckpt["task"])
                self.data.vocabs = self.task.build_vocabs(self.data.train)
            for name, built in self.data.vocabs.items():
                saved = Vocab(ckpt["vocab"][name])
                if saved != built:
                    raise StructseqError(_describe_mismatch(name, saved, built))
        elif (self.out / "checkpoints" / "last.pt").exists():
            raise StructseqError(f"{self.out} already holds a run; use --resume to continue it or another --out")
        init = None
        if cfg.train.init_from and not resume:  # phase two: another run's parameters, vocabularies, task state
            init_path = init_checkpoint(cfg.train.init_from)
            init = load_checkpoint(init_path, RUN_KEYS)
            self.task.load_state_dict(init.get("task") or {})
            self.data.vocabs = {name: Vocab(tokens) for name, tokens in init["vocab"].items()}
        seed_everything(cfg.train.seed)
        self.model = build_model(cfg.model, self.data.vocabs, self.data.train, task=self.task.name).to(self.device)
        if init is not None:
            state, filled = self.model.pretrained_state(init["model"])
            load_model_state(self.model, state, init_path)  # strict: same keys and shapes
            if filled:
                print(f"init_from {init_path}: {len(filled)} tensors the checkpoint lacks start as their source "
                      f"twins ({', '.join(sorted({n.rsplit('.', 2)[0] for n in filled})[:4])}, ...)",
                      file=sys.stderr)
        # a model may split its parameters into groups with an `lr_scale` (e.g. a pretrained encoder)
        groups = self.model.param_groups() if hasattr(self.model, "param_groups") else self.model.parameters()
        self.optimizer = build_optimizer(cfg.optim, groups)
        self.lr_at = lr_multiplier(cfg.optim, self.model.width, cfg.train.max_steps)
        self.progress = Progress()
        self._encoded = [self.task.encode(e, self.data.vocabs) for e in self.data.train]
        self._lengths = [self.task.length(e) for e in self._encoded]
        self._epoch_cache: tuple[int, list[list[int]]] | None = None
        if ckpt is not None:
            load_model_state(self.model, ckpt["model"], self._last)
            try:
                self.optimizer.load_state_dict(ckpt["optimizer"])
                known = {f for f in Progress.__dataclass_fields__}
                self.progress = Progress(**{k: v for k, v in ckpt["progress"].items() if k in known})
                set_rng_state(ckpt["rng"])
            except (ValueError, KeyError, TypeError, RuntimeError) as e:
                raise StructseqError(f"{self._last}: the optimiser, progress or RNG state does not fit this run "
                                     f"({type(e).__name__}: {' '.join(str(e).split())[:300]})") from None
        self.ddp_model = self.dist.wrap(self.model)

    # ------------------------------------------------------------ data
    def _epoch_batches(self, epoch: int) -> list[list[int]]:
        if self._epoch_cache is None or self._epoch_cache[0] != epoch:
            o = self.cfg.optim
            batches = make_batches(self._lengths, self._lengths, max_tokens=o.max_tokens, batch_size=o.batch_size,
                                   shuffle=True, seed=self.cfg.train.seed * 100003 + epoch)
            self._epoch_cache = (epoch, batches)
        return self._epoch_cache[1]

    def _next_indices(self) -> list[int]:
        p = self.progress
        batches = self._epoch_batches(p.epoch)
        if p.batch_in_epoch >= len(batches):
            p.epoch, p.batch_in_epoch = p.epoch + 1, 0
            batches = self._epoch_batches(p.epoch)
        idx = batches[p.batch_in_epoch]
        p.batch_in_epoch += 1
        return idx

    def _next_batch(self) -> Batch:
        """This rank's shard of the next global batch, on the training device. A rank whose shard is empty
        (a batch smaller than the world) computes on a stand-in example whose loss counts zero."""
        index = self._next_indices()
        idx = self.dist.shard(index)
        batch = self.task.training_batch([self._encoded[i] for i in idx or index[:1]], idx or index[:1],
                                         self.progress.step + 1)
        if not idx:
            batch.num_tokens = 0
        return self.task.to_device(batch, self.device)

    # ------------------------------------------------------------ checkpoints
    def _snapshot(self) -> dict:
        p = self.progress
        return {"step": p.step, "epoch": p.epoch, "batch_in_epoch": p.batch_in_epoch, "best": p.best,
                "bad_validations": p.bad_validations, "history": list(p.history), "stopped": p.stopped,
                "train_seconds": round(p.train_seconds, 3), "rng": rng_state()}

    def _save(self, name: str, snap: dict) -> None:
        if not self.dist.is_main:
            return
        progress = {k: v for k, v in snap.items() if k != "rng"}
        save_checkpoint({
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": {"schedule": self.cfg.optim.schedule, "step": snap["step"]},
            "rng": snap["rng"],
            "vocab": {k: v.to_list() for k, v in self.data.vocabs.items()},
            "task": self.task.state_dict(),
            "config": self.cfg.to_dict(),
            "progress": progress,
        }, self.out / "checkpoints" / f"{name}.pt")

    # ------------------------------------------------------------ validation
    @torch.no_grad()
    def validate(self) -> dict:
        self.model.eval()
        try:
            with self._autocast():
                return self.task.validate(self.model, self.data.valid, self.data.vocabs)
        finally:
            self.model.train()

    # ------------------------------------------------------------ the loop
    def _autocast(self):
        if self.cfg.train.bf16:
            return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
        return nullcontext()

    def _update(self) -> tuple[float, int]:
        cfg = self.cfg
        batches = [self._next_batch() for _ in range(cfg.optim.accumulate)]
        ntok = self.dist.sum_int(sum(b.num_tokens for b in batches))  # the whole update's units, every rank
        scale = self.dist.world_size / max(ntok, 1)  # DDP averages gradients over ranks: undo, then normalise
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for i, b in enumerate(batches):
            sync = self.dist.no_sync(self.ddp_model) if i < len(batches) - 1 else nullcontext()
            with sync, self._autocast():
                loss, nll, _ = self.task.loss(self.ddp_model, b, cfg.optim.label_smoothing)
                if b.num_tokens == 0:  # an empty shard still joins the gradient all-reduce
                    loss = loss * 0.0
                if self.dist.world_size > 1:
                    (loss * scale).backward()
                else:
                    (loss / ntok).backward()  # the exact arithmetic of one process
            total += nll.item()
        if cfg.optim.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.optim.clip_norm)
        step = self.progress.step + 1
        lr = cfg.optim.lr * self.lr_at(step)
        for g in self.optimizer.param_groups:
            g["lr"] = lr * g.get("lr_scale", 1.0)
        self.optimizer.step()
        # fused optimisers update parameters in place without bumping their version counters, which the
        # models' inference caches (derived weights) key on: bump them, so no cache outlives an update
        torch.autograd.graph.increment_version([p for p in self.model.parameters() if p.requires_grad])
        self.progress.step = step
        return self.dist.sum_float(total) / max(ntok, 1), ntok

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
                p = self.progress
                return {"steps": p.step, "stopped": "already_finished", "reason": reason, "best": p.best,
                        "history": p.history}
            return self._run()
        finally:
            if lock is not None:
                lock.release()

    def _open_run_dir(self) -> rundir.RunLock | None:
        """Rank 0 locks the run directory and prepares it: a new run checks and marks it and writes
        config.yaml; a resumed one (unless finished) removes stale save temporaries, cuts metrics.jsonl back
        to the checkpoint's step and records config changes. Every rank raises when rank 0 failed."""
        lock, error = None, None
        if self.dist.is_main:
            try:
                lock = rundir.RunLock(self.out).acquire()
                if not self.resume:
                    rundir.prepare_new(self.out)
                    rundir.write_config(self.out, self.cfg.to_dict())
                else:
                    if not self._last.exists() or _stat(self._last) != self._loaded:
                        raise rundir.RunDirError(f"{self._last} changed after this run loaded it (another run "
                                                 "resumed it meanwhile?); start --resume again")
                    if finished(vars(self.progress), self.cfg.train.max_steps) is None:
                        rundir.clean_temporaries(self.out)
                        rundir.truncate_metrics(self.out, self.progress.step)
                        if self.config_changes:
                            rundir.write_config(self.out, self.cfg.to_dict())
                            rundir.record_config_change(self.out, self.progress.step, self.config_changes)
            except BaseException as e:
                if lock is not None:
                    lock.release()
                error = e
        if self.dist.any(error is not None):
            if error is not None:
                raise error
            raise StructseqError(f"rank 0 could not open the run directory {self.out}; see its error")
        return lock

    def _run(self) -> dict:
        cfg, p = self.cfg, self.progress
        self.model.train()
        self._stop = False
        p.stopped = None
        log = open(self.out / "metrics.jsonl", "a") if self.dist.is_main else None
        bar = _ProgressBar(cfg.train.max_steps, p.step, enabled=self.show_progress and self.dist.is_main)
        t_log, tok_log, loss_log, n_log = time.perf_counter(), 0, 0.0, 0
        stopped = "max_steps"
        previous_handlers = self._install_interrupt_handler()
        try:
            t_prev = time.perf_counter()
            while p.step < cfg.train.max_steps:
                loss, ntok = self._update()
                now = time.perf_counter()
                p.train_seconds, t_prev = p.train_seconds + (now - t_prev), now
                tok_log, loss_log, n_log = tok_log + ntok, loss_log + loss, n_log + 1
                if not math.isfinite(loss):
                    raise DivergedError(loss, p.step)
                if p.step % cfg.train.log_every == 0 or p.step == cfg.train.max_steps:
                    dt = time.perf_counter() - t_log
                    rec = {"step": p.step, "loss": loss_log / n_log, "lr": self.optimizer.param_groups[0]["lr"],
                           "tokens_per_s": tok_log / dt if dt > 0 else 0.0, "epoch": p.epoch}
                    self._write(log, rec)
                    bar.update(p.step, rec)
                    t_log, tok_log, loss_log, n_log = time.perf_counter(), 0, 0.0, 0
                validate_now = cfg.train.valid_every and p.step % cfg.train.valid_every == 0
                if validate_now or p.step == cfg.train.max_steps:
                    if self._validate_and_save(log):
                        stopped = "early_stopping"
                        break
                elif cfg.train.save_every and p.step % cfg.train.save_every == 0:
                    self._save("last", self._snapshot())
                if self.on_update is not None:
                    self.on_update(p.step)
                if self.dist.any(self._stop) and p.step < cfg.train.max_steps:
                    p.stopped = stopped = "interrupted"
                    self._save("last", self._snapshot())
                    break
        finally:
            for signum, previous in previous_handlers.items():
                signal.signal(signum, previous)
            bar.close()
            if log is not None:
                log.close()
        summary = {"steps": p.step, "stopped": stopped, "best": p.best, "history": p.history}
        if stopped == "interrupted":
            summary["signal"] = signal.Signals(self._signal or signal.SIGINT).name
        return summary

    @staticmethod
    def _write(log, rec: dict) -> None:
        if log is not None:
            log.write(json.dumps(rec) + "\n")
            log.flush()

    def _install_interrupt_handler(self) -> dict:
        """First Ctrl-C or SIGTERM: stop cleanly after this update (checkpoint saved). Second: abort at once.
        Returns the previous handlers."""
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum, frame):
            if self._stop:
                raise KeyboardInterrupt
            name = signal.Signals(signum).name
            print(f"\n{name}: finishing this update and saving checkpoints/last.pt "
                  f"({'Ctrl-C' if signum == signal.SIGINT else name} again aborts)", file=sys.stderr, flush=True)
            self._signal = signum
            self._stop = True

        return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

    def _validate_and_save(self, log) -> bool:
        """Validate, write best/last checkpoints; True when early stopping triggers."""
        p, cfg = self.progress, self.cfg
        metrics = self.validate()
        key = f"valid_{cfg.train.valid_metric}"
        value = metrics[key]
        maximise = self.task.valid_metrics[cfg.train.valid_metric] == "max"
        better = p.best is None or (value > p.best if maximise else value < p.best)
        if better:
            p.best, p.bad_validations = value, 0
        else:
            p.bad_validations += 1
        rec = {"step": p.step, **metrics, "best": p.best}
        p.history.append(rec)
        self._write(log, rec)
        stop = bool(cfg.train.patience) and p.bad_validations >= cfg.train.patience
        if stop:
            p.stopped = "early_stopping"
        elif p.step >= cfg.train.max_steps:
            p.stopped = "max_steps"
        snap = self._snapshot()
        if better:
            self._save("best", snap)
        self._save("last", snap)
        return stop


class _ProgressBar:
    """A rich progress bar with loss, lr and throughput; silent when disabled or not a terminal."""

    def __init__(self, total: int, done: int, enabled: bool):
        self.bar = None
        if enabled and sys.stderr.isatty():
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("train"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                TextColumn("{task.fields[info]}"), transient=False)
            self.task = self.bar.add_task("train", total=total, completed=done, info="")
            self.bar.start()
        elif enabled:
            self.last_print = 0.0

    def update(self, step: int, rec: dict) -> None:
        info = f"loss {rec['loss']:.3f} lr {rec['lr']:.2e} {rec['tokens_per_s']:.0f} tok/s"
        if self.bar is not None:
            self.bar.update(self.task, completed=step, info=info)
        elif hasattr(self, "last_print") and time.perf_counter() - self.last_print > 10:
            print(f"step {step}: {info}", file=sys.stderr, flush=True)
            self.last_print = time.perf_counter()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def init_checkpoint(spec: str) -> Path:
    """`train.init_from`: a checkpoint file, or a run directory (its best checkpoint, else its last)."""
    path = Path(spec)
    if path.is_dir():
        best, last = path / "checkpoints" / "best.pt", path / "checkpoints" / "last.pt"
        path = best if best.exists() else last
    if not path.is_file():
        raise ConfigError(f"'train.init_from': no checkpoint at {spec}")
    return path


def train(cfg: Config | dict, out_dir: str | Path, **kwargs) -> dict:
    """Train a model from a config; see `Trainer` for keyword arguments."""
    if isinstance(cfg, dict):
        cfg = config_from_dict(cfg)
    return Trainer(cfg, out_dir, **kwargs).run()


def resume(out_dir: str | Path, *, overrides: Sequence[str] = (), **kwargs) -> dict:
    """Continue the run in `out_dir` from its last checkpoint, with its saved config; `overrides` may only
    extend `train.max_steps` (see `resume_changes`). A finished run is left unchanged: the summary's
    `stopped` is `already_finished` and `reason` says why."""
    out = Path(out_dir)
    rundir.check_directory(out)
    path = out / "checkpoints" / "last.pt"
    if not path.exists():
        raise rundir.RunDirError(f"{out}: nothing to resume (no {path}); is this a training run directory?")
    ckpt = load_checkpoint(path, {**RUN_KEYS, **RESUME_KEYS})
    try:
        cfg = config_from_dict(dict(ckpt["config"]), saved=True)
    except ConfigError as e:
        raise ConfigError(f"{path}: the checkpoint's config: {e}") from None
    changes = resume_changes(cfg, overrides)
    if changes:
        cfg.train.max_steps = changes["train.max_steps"][1]
    progress = ckpt["progress"]
    reason = finished(progress, cfg.train.max_steps)
    if reason is not None:
        return {"steps": progress.get("step"), "stopped": "already_finished", "reason": reason,
                "best": progress.get("best"), "history": progress.get("history", [])}
    del ckpt
    return Trainer(cfg, out, resume=True, config_changes=changes, **kwargs).run()
