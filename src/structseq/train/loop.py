"""The training loop shared by every model.

Exact resumption: an update is a pure function of (parameters, optimiser state, data position, RNG
state) at its start, and checkpoints are only written between updates (Ctrl-C sets a flag that the
loop honours after the current update). So a checkpoint written on Ctrl-C, at a validation or every
`save_every` updates resumes bit-exactly: same parameters as an uninterrupted run with the same seed.
"""

from __future__ import annotations

import json
import math
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

from structseq.config import Config, config_from_dict
from structseq.data.batching import Batch, collate, encode_source, make_batches, pad_sequences
from structseq.data.example import Example
from structseq.data.registry import holdout, load_dataset
from structseq.data.vocab import Vocab
from structseq.errors import StructseqError
from structseq.models.build import build_model
from structseq.train.checkpoint import load_checkpoint, save_atomic
from structseq.train.optim import build_optimizer, label_smoothed_nll, lr_multiplier

CHECKPOINT_FORMAT = 1


@dataclass
class TrainingData:
    train: list[Example]
    valid: list[Example]
    src_vocab: Vocab
    tgt_vocab: Vocab


def load_training_data(cfg: Config, data_root=None) -> TrainingData:
    """Train/valid examples and vocabularies built from the training split."""
    d = cfg.data
    train = load_dataset(d.dataset if d.dataset != "files" else d.train, d.train, data_root)
    if d.max_train_examples:
        train = train[: d.max_train_examples]
    if d.valid is None:
        train, valid = holdout(train, d.valid_fraction, cfg.train.seed)
    else:
        valid = load_dataset(d.dataset if d.dataset != "files" else d.valid, d.valid, data_root)
    if not train:
        raise StructseqError(f"no training examples in {d.dataset}/{d.train}")
    if d.share_vocab:
        src_vocab = tgt_vocab = Vocab.build([e.source for e in train] + [e.target for e in train], d.min_freq)
    else:
        src_vocab = Vocab.build((e.source for e in train), d.min_freq)
        tgt_vocab = Vocab.build((e.target for e in train), d.min_freq)
    return TrainingData(train, valid, src_vocab, tgt_vocab)


def _describe_mismatch(name: str, saved: Vocab, built: Vocab) -> str:
    missing = [t for t in built.itos if t not in saved][:5]
    extra = [t for t in saved.itos if t not in built][:5]
    return (f"the checkpoint's {name} vocabulary ({len(saved)} tokens) does not match the data "
            f"({len(built)} tokens; new in data: {missing}, only in checkpoint: {extra}). "
            "Was the run trained on another dataset or config?")


@dataclass
class Progress:
    """Where training stands; saved in every checkpoint."""

    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    best: float | None = None
    bad_validations: int = 0
    history: list = field(default_factory=list)


class Trainer:
    def __init__(self, cfg: Config, out_dir: str | Path, *, data_root=None, resume: bool = False,
                 show_progress: bool = True, on_update: Callable[[int], None] | None = None):
        self.cfg, self.out = cfg, Path(out_dir)
        self.show_progress, self.on_update = show_progress, on_update
        if cfg.train.threads:
            torch.set_num_threads(cfg.train.threads)
        self.data = load_training_data(cfg, data_root)
        ckpt = None
        if resume:
            ckpt = load_checkpoint(self.out / "checkpoints" / "last.pt")
            for name, built in (("source", self.data.src_vocab), ("target", self.data.tgt_vocab)):
                saved = Vocab(ckpt["vocab"]["src" if name == "source" else "tgt"])
                if saved != built:
                    raise StructseqError(_describe_mismatch(name, saved, built))
        elif (self.out / "checkpoints" / "last.pt").exists():
            raise StructseqError(f"{self.out} already holds a run; use --resume to continue it or another --out")
        torch.manual_seed(cfg.train.seed)
        random.seed(cfg.train.seed)
        self.model = build_model(cfg.model, self.data.src_vocab, self.data.tgt_vocab, self.data.train)
        self.optimizer = build_optimizer(cfg.optim, self.model.parameters())
        self.lr_at = lr_multiplier(cfg.optim, cfg.model_dim, cfg.train.max_steps)
        self.progress = Progress()
        src = self.data.train
        self._src_ids = [encode_source(self.data.src_vocab, e.source) for e in src]
        self._tgt_ids = [self.data.tgt_vocab.encode(e.target) for e in src]
        self._epoch_cache: tuple[int, list[list[int]]] | None = None
        if ckpt is not None:
            self.model.load_state_dict(ckpt["model"])
            self.optimizer.load_state_dict(ckpt["optimizer"])
            self.progress = Progress(**ckpt["progress"])
            torch.set_rng_state(ckpt["rng"]["torch"])
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False))

    # ------------------------------------------------------------ data
    def _epoch_batches(self, epoch: int) -> list[list[int]]:
        if self._epoch_cache is None or self._epoch_cache[0] != epoch:
            o = self.cfg.optim
            batches = make_batches([len(s) - 1 for s in self._src_ids], [len(t) for t in self._tgt_ids],
                                   max_tokens=o.max_tokens, batch_size=o.batch_size, shuffle=True,
                                   seed=self.cfg.train.seed * 100003 + epoch)
            self._epoch_cache = (epoch, batches)
        return self._epoch_cache[1]

    def _next_batch(self) -> Batch:
        p = self.progress
        batches = self._epoch_batches(p.epoch)
        if p.batch_in_epoch >= len(batches):
            p.epoch, p.batch_in_epoch = p.epoch + 1, 0
            batches = self._epoch_batches(p.epoch)
        idx = batches[p.batch_in_epoch]
        p.batch_in_epoch += 1
        eos, bos = self.data.tgt_vocab.eos, self.data.tgt_vocab.bos
        src = pad_sequences([self._src_ids[i] for i in idx])
        tgt_in = pad_sequences([[bos] + self._tgt_ids[i] for i in idx])
        tgt_out = pad_sequences([self._tgt_ids[i] + [eos] for i in idx])
        return Batch(src, tgt_in, tgt_out, idx)

    # ------------------------------------------------------------ checkpoints
    def _snapshot(self) -> dict:
        p = self.progress
        return {"step": p.step, "epoch": p.epoch, "batch_in_epoch": p.batch_in_epoch, "best": p.best,
                "bad_validations": p.bad_validations, "history": list(p.history), "rng": torch.get_rng_state()}

    def _save(self, name: str, snap: dict) -> None:
        progress = {k: v for k, v in snap.items() if k != "rng"}
        save_atomic({
            "format": CHECKPOINT_FORMAT,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": {"schedule": self.cfg.optim.schedule, "step": snap["step"]},
            "rng": {"torch": snap["rng"]},
            "vocab": {"src": self.data.src_vocab.to_list(), "tgt": self.data.tgt_vocab.to_list()},
            "config": self.cfg.to_dict(),
            "progress": progress,
        }, self.out / "checkpoints" / f"{name}.pt")

    # ------------------------------------------------------------ validation
    @torch.no_grad()
    def validate(self) -> dict:
        from structseq.decode.search import decode

        self.model.eval()
        examples = self.data.valid
        total_nll, total_tok, correct = 0.0, 0, 0
        d = self.cfg.decode
        for start in range(0, len(examples), d.batch_size):
            chunk = examples[start: start + d.batch_size]
            b = collate(chunk, range(len(chunk)), self.data.src_vocab, self.data.tgt_vocab)
            _, nll = label_smoothed_nll(self.model(b.src, b.tgt_in), b.tgt_out, 0.0)
            total_nll += float(nll)
            total_tok += b.num_target_tokens
            if self.cfg.train.valid_metric == "exact_match":
                hyp = decode(self.model, b.src, beam=1, max_len_a=d.max_len_a, max_len_b=d.max_len_b)
                refs = [self.data.tgt_vocab.encode(e.target) for e in chunk]
                correct += sum(h == r for h, r in zip(hyp.tokens, refs))
        self.model.train()
        out = {"valid_loss": total_nll / max(total_tok, 1)}
        if self.cfg.train.valid_metric == "exact_match":
            out["valid_exact_match"] = correct / max(len(examples), 1)
        return out

    # ------------------------------------------------------------ the loop
    def _update(self) -> tuple[float, int]:
        cfg = self.cfg
        batches = [self._next_batch() for _ in range(cfg.optim.accumulate)]
        ntok = sum(b.num_target_tokens for b in batches)
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for b in batches:
            loss, nll = label_smoothed_nll(self.model(b.src, b.tgt_in), b.tgt_out, cfg.optim.label_smoothing)
            (loss / ntok).backward()
            total += nll.item()
        if cfg.optim.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), cfg.optim.clip_norm)
        step = self.progress.step + 1
        lr = cfg.optim.lr * self.lr_at(step)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        self.optimizer.step()
        self.progress.step = step
        return total / max(ntok, 1), ntok

    def request_stop(self) -> None:
        """Finish the current update, save the last checkpoint and return (what Ctrl-C does)."""
        self._stop = True

    def run(self) -> dict:
        cfg, p = self.cfg, self.progress
        self.model.train()
        self._stop = False
        log = open(self.out / "metrics.jsonl", "a")
        bar = _ProgressBar(cfg.train.max_steps, p.step, enabled=self.show_progress)
        t_log, tok_log, loss_log, n_log = time.perf_counter(), 0, 0.0, 0
        stopped = "max_steps"
        previous_handler = self._install_interrupt_handler()
        try:
            while p.step < cfg.train.max_steps:
                loss, ntok = self._update()
                tok_log, loss_log, n_log = tok_log + ntok, loss_log + loss, n_log + 1
                if not math.isfinite(loss):
                    raise StructseqError(f"loss became {loss} at update {p.step}; lower optim.lr or check the data")
                if p.step % cfg.train.log_every == 0 or p.step == cfg.train.max_steps:
                    dt = time.perf_counter() - t_log
                    rec = {"step": p.step, "loss": loss_log / n_log, "lr": self.optimizer.param_groups[0]["lr"],
                           "tokens_per_s": tok_log / dt if dt > 0 else 0.0, "epoch": p.epoch}
                    log.write(json.dumps(rec) + "\n")
                    log.flush()
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
                if self._stop and p.step < cfg.train.max_steps:
                    self._save("last", self._snapshot())
                    stopped = "interrupted"
                    break
        finally:
            if previous_handler is not None:
                signal.signal(signal.SIGINT, previous_handler)
            bar.close()
            log.close()
        return {"steps": p.step, "stopped": stopped, "best": p.best, "history": p.history}

    def _install_interrupt_handler(self):
        """First Ctrl-C: stop cleanly after this update (checkpoint saved). Second: abort at once."""
        if threading.current_thread() is not threading.main_thread():
            return None

        def handler(signum, frame):
            if self._stop:
                raise KeyboardInterrupt
            print("\ninterrupt: finishing this update and saving checkpoints/last.pt "
                  "(Ctrl-C again aborts)", file=sys.stderr, flush=True)
            self._stop = True

        return signal.signal(signal.SIGINT, handler)

    def _validate_and_save(self, log) -> bool:
        """Validate, write best/last checkpoints; True when early stopping triggers."""
        p, cfg = self.progress, self.cfg
        metrics = self.validate()
        key = "valid_exact_match" if cfg.train.valid_metric == "exact_match" else "valid_loss"
        value = metrics[key]
        better = p.best is None or (value > p.best if key == "valid_exact_match" else value < p.best)
        if better:
            p.best, p.bad_validations = value, 0
        else:
            p.bad_validations += 1
        rec = {"step": p.step, **metrics, "best": p.best}
        p.history.append(rec)
        log.write(json.dumps(rec) + "\n")
        log.flush()
        snap = self._snapshot()
        if better:
            self._save("best", snap)
        self._save("last", snap)
        return bool(cfg.train.patience) and p.bad_validations >= cfg.train.patience


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


def train(cfg: Config | dict, out_dir: str | Path, **kwargs) -> dict:
    """Train a model from a config; see `Trainer` for keyword arguments."""
    if isinstance(cfg, dict):
        cfg = config_from_dict(cfg)
    return Trainer(cfg, out_dir, **kwargs).run()


def resume(out_dir: str | Path, **kwargs) -> dict:
    """Continue the run in `out_dir` from its last checkpoint, with its saved config."""
    ckpt = load_checkpoint(Path(out_dir) / "checkpoints" / "last.pt")
    return Trainer(config_from_dict(ckpt["config"]), out_dir, resume=True, **kwargs).run()
