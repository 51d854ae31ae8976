"""Train and evaluate a list of configs x seeds; append one JSON line per (run, split) to a results file.

    structseq sweep configs/scan-jump/lstm-cpu.yaml configs/cogs/transformer-cpu.yaml \
        --seeds 1 2 3 --out results/foundation.jsonl --runs runs/repro --jobs 2

(`python scripts/reproduce.py ...` is the same command.)

Each record has the config, seed, split, every metric, the training wall time (the loop's own clock,
summed over resumes: `progress.train_seconds` of the last checkpoint) and the machine. A run
already recorded in the results file is skipped, a finished training is evaluated without retraining,
and an interrupted one resumes from its last checkpoint, so the script can be restarted at any time.

Learning curves (`--curve-every N --curve-seeds 1 2 --curve-out FILE`): for those seeds the checkpoint that
training writes at every multiple of N updates (N must be a multiple of the config's `train.valid_every`) is
kept as `checkpoints/step{K}.pt`, and after training each one is evaluated on the test splits, one JSON line
per (run, step, split) in FILE. The curve only observes the run: training is the same as without it (same
updates, same final model), and no checkpoint is chosen by its test score (the table uses the last one).

`probe()` prices a run without training it: a short run's seconds per update and a few decoding batches,
extrapolated to the config's budget (`structseq plan --probe`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def read_jsonl(path: str | Path) -> list[dict]:
    """The records of a JSON-lines file ([] when it does not exist); a line that is not a JSON object is an error
    naming the file and line (blank lines are skipped)."""
    from structseq.errors import DataError
    from structseq.textio import iter_lines

    if not Path(path).exists():
        return []
    out = []
    for number, line in iter_lines(path):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise DataError(f"not a JSON record ({e})", path, number) from None
        if not isinstance(rec, dict):
            raise DataError(f"not a JSON object: {line[:60]!r}", path, number)
        out.append(rec)
    return out


def append_records(path: str | Path, records: list[dict]) -> None:
    """Append one JSON line per record in one write (`structseq.outputs.append_lines`): a failure (a full disk)
    leaves no partial line."""
    from structseq.outputs import append_lines

    append_lines(path, [json.dumps(r) for r in records])


MAX_NAME = 250  # characters of a run directory's name: 255 bytes a file name, less the claim's ".lock"


def run_name(config: str, seed: int, overrides: list[str] = ()) -> str:
    # e.g. -interval4 -max_steps500 -context_window8.0: the key's last part and the whole value (the value may
    # hold dots, so the key is split off at '=' first); a path (train.init_from) by its last part
    tag = "".join(
        f"-{k.split('.')[-1]}{Path(v).name if '/' in v else v}" for k, _, v in (o.partition("=") for o in overrides)
    )
    name = f"{Path(config).parent.name}-{Path(config).stem}{tag}-s{seed}"
    if len(name) <= MAX_NAME:
        return name
    # a file name holds 255 bytes, and the claim adds '.lock': a long name keeps its start and ends in a digest of
    # the whole (names that fit are unchanged, so runs already on disk keep theirs)
    return f"{name[: MAX_NAME - 11]}-{hashlib.sha1(name.encode()).hexdigest()[:10]}"


class _KeepCheckpoints:
    """While training runs, hard-link each new checkpoints/last.pt written at a multiple of `every` updates
    to checkpoints/step{K}.pt (checkpoints are replaced atomically, so the link keeps that version)."""

    def __init__(self, run_dir: Path, every: int):
        self.dir, self.every, self.seen = run_dir / "checkpoints", every, None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()
        self._poll()

    def _watch(self):
        while not self.done.wait(1.0):
            self._poll()

    def _poll(self):
        from structseq.train.checkpoint import load_checkpoint

        last = self.dir / "last.pt"
        try:
            ino = os.stat(last).st_ino
        except FileNotFoundError:
            return
        if ino == self.seen:
            return
        tmp = self.dir / f".watch-{ino}.pt"
        try:
            os.link(last, tmp)
        except FileNotFoundError:  # replaced between stat and link: the next poll sees the new one
            return
        except FileExistsError:
            pass
        self.seen = ino
        step = load_checkpoint(tmp)["progress"]["step"]
        if step % self.every == 0 and not (self.dir / f"step{step}.pt").exists():
            os.replace(tmp, self.dir / f"step{step}.pt")
        else:
            tmp.unlink()


def _record(config, overrides, seed, run_dir, split, train_s, eval_s, steps, m) -> dict:
    return {
        "config": config,
        "overrides": overrides,
        "seed": seed,
        "run_dir": str(run_dir),
        "split": split,
        "train_wall_s": round(train_s, 1),
        "eval_wall_s": round(eval_s, 1),
        "steps": steps,
        "machine": f"{platform.node()} {platform.processor()}",
        "git": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
        ).stdout.strip(),  # the commit of the code that ran
        "metrics": None if m is None else {k: v for k, v in m.items() if k not in ("predictions",)},
    }


def one(
    config: str,
    seed: int,
    runs: str,
    out: str,
    overrides: list[str],
    name: str | None = None,
    curve_every: int = 0,
    curve_out: str | None = None,
) -> str:
    """Train (or resume) one run and append one JSON line per test split to `out`. The decoding settings of
    `config` + `overrides` apply when the run is evaluated, also to a run trained before they changed.
    With `curve_every`, also keep and evaluate the checkpoints at every multiple of it (records in `curve_out`)."""
    from structseq import api
    from structseq.config import load_config
    from structseq.errors import DivergedError
    from structseq.train.checkpoint import load_checkpoint

    cfg = load_config(config, overrides)
    cfg.train.seed = seed
    name = name or run_name(config, seed, overrides)
    run_dir = Path(runs) / name
    last = run_dir / "checkpoints" / "last.pt"
    if curve_every and curve_every % cfg.train.valid_every:
        from structseq.errors import ConfigError

        raise ConfigError(f"--curve-every {curve_every} is not a multiple of train.valid_every {cfg.train.valid_every}")
    t0 = time.time()
    try:
        with _KeepCheckpoints(run_dir, curve_every) if curve_every else _Nothing():
            summary = _train(cfg, run_dir)
    except DivergedError as e:  # a seed that diverges is a result too: recorded, never averaged in
        rec = {
            **_record(config, overrides, seed, run_dir, None, time.time() - t0, 0.0, cfg.train.max_steps, None),
            "diverged": {"step": e.step, "loss": str(e.loss)},
        }
        append_records(out, [{**rec, "split": s} for s in cfg.data.test])
        return f"{name}: diverged ({e})"
    train_s = time.time() - t0
    if last.exists():  # the training loop's own clock, summed over resumes (absent in older checkpoints)
        train_s = load_checkpoint(last)["progress"].get("train_seconds") or train_s
    if summary.get("stopped") == "interrupted":  # Ctrl-C / SIGINT: checkpoint saved, nothing recorded
        return f"{name}: interrupted at update {summary['steps']}, not recorded{INTERRUPTED}"
    if curve_every:
        _curve(config, overrides, seed, run_dir, cfg, curve_every, curve_out)
    lines = []
    for split in cfg.data.test:
        t1 = time.time()
        run = api.load_run(run_dir)
        run.config.decode = cfg.decode
        m = run.evaluate(split)
        lines.append(
            json.dumps(
                _record(config, overrides, seed, run_dir, split, train_s, time.time() - t1, cfg.train.max_steps, m)
            )
        )
    append_records(out, [json.loads(x) for x in lines])
    return f"{name}: " + ", ".join(
        f"{json.loads(x)['split']} EM {json.loads(x)['metrics']['exact_match']['score']:.4f}" for x in lines
    )


INTERRUPTED = "; run the command again to resume"


def _train(cfg, run_dir: Path) -> dict:
    """Train `cfg` into `run_dir`, or resume it there; nothing when its last checkpoint is already final."""
    from structseq import api
    from structseq.train.checkpoint import load_checkpoint

    last = run_dir / "checkpoints" / "last.pt"
    if not last.exists():
        return api.train(cfg, run_dir, show_progress=False)
    if load_checkpoint(last)["progress"]["step"] < cfg.train.max_steps:
        return api.resume(run_dir, show_progress=False)
    return {}


def train_only(config: str, seed: int, runs: str, overrides: list[str]) -> str:
    """Train (or resume) one run to its last update, and neither evaluate nor record it: for a run whose record
    exists but whose checkpoint another run starts from (`train.init_from`) and this machine lacks."""
    from structseq.config import load_config

    cfg = load_config(config, overrides)
    cfg.train.seed = seed
    name = run_name(config, seed, overrides)
    summary = _train(cfg, Path(runs) / name)
    if summary.get("stopped") == "interrupted":
        return f"{name}: interrupted at update {summary['steps']}{INTERRUPTED}"
    return f"{name}: trained"


def probe(
    config: str,
    seed: int,
    overrides: list[str],
    steps: tuple[int, int] = (10, 40),
    batches: int = 2,
    curve_every: int = 0,
) -> dict:
    """What a run of `config` would cost here, from a short one: the seconds per update between updates s1 and s2
    (`progress.train_seconds`, so setup and validation are left out) times max_steps, plus the decoding of every
    test split. Decoding is timed on `batches` of the split's length-sorted decoding batches, drawn at random, each
    decoded to the length of its references (</s> suppressed, within the config's length limit) as a trained model
    would stop there; the mean batch time times the number of batches. With `curve_every`, each learning-curve
    checkpoint (every `curve_every` updates below max_steps) costs one more decoding of the test splits. Used by
    `plan.py --probe` for a config without any record to estimate from."""
    import random
    import tempfile

    import torch

    from structseq import api
    from structseq.config import load_config
    from structseq.train.checkpoint import load_checkpoint

    cfg = load_config(config, overrides)
    cfg.train.seed = seed
    s1, s2 = steps
    if not 0 < s1 < s2:
        from structseq.errors import ConfigError

        raise ConfigError(f"--probe-steps must be 0 < S1 < S2, not {steps}")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "probe"
        short = [f"train.max_steps={s1}", f"train.valid_every={s2}"]
        if cfg.train.init_from:  # the start point costs nothing per update: time the run from scratch
            short.append("train.init_from=null")
        api.train(cfg, run_dir, overrides=short, show_progress=False)
        t1 = load_checkpoint(run_dir / "checkpoints" / "last.pt")["progress"]["train_seconds"]
        api.resume(run_dir, overrides=[f"train.max_steps={s2}"], show_progress=False)
        t2 = load_checkpoint(run_dir / "checkpoints" / "last.pt")["progress"]["train_seconds"]
        per_update = (t2 - t1) / (s2 - s1)
        run = api.load_run(run_dir)
        run.config.decode = cfg.decode
        rng = random.Random(seed)
        evals = {split: _time_decoding(run, run.load_split(split)[2], batches, rng) for split in cfg.data.test}
    decode_s = sum(e["seconds"] for e in evals.values())
    curve_points = len(range(curve_every, cfg.train.max_steps, curve_every)) if curve_every else 0
    return {
        "config": config,
        "overrides": overrides,
        "seed": seed,
        "probe_steps": [s1, s2],
        "s_per_update": round(per_update, 4),
        "max_steps": cfg.train.max_steps,
        "eval": evals,
        "curve_points": curve_points,
        "cost_s": round(per_update * cfg.train.max_steps + decode_s * (1 + curve_points), 1),
        "threads": torch.get_num_threads(),
        "load_before": round(load, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "machine": f"{platform.node()} {platform.processor()}",
        "git": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=Path(__file__).parent
        ).stdout.strip(),
    }


def _time_decoding(run, examples, batches: int, rng) -> dict:
    """Seconds to decode `examples` as the task does (length-sorted batches of decode.batch_size), from `batches`
    of those batches. Tasks that decode token by token (`model.step`) decode each sampled batch to its reference
    lengths; others (e.g. the supertagger) are timed as they decode."""
    import torch

    from structseq.data.vocab import Vocab
    from structseq.decode import max_lengths
    from structseq.decode.strategies import Settings, choose

    task, model, d = run.task, run.model, run.config.decode
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].source))
    chunks = [order[i : i + d.batch_size] for i in range(0, len(order), d.batch_size)]
    picked = sorted(rng.sample(range(len(chunks)), min(batches, len(chunks))))
    forced = model.autoregressive  # decodes token by token (`Task.decode_inputs` serves it)
    device = next(model.parameters()).device
    times = []
    for c in picked:
        part = [examples[i] for i in chunks[c]]
        t = time.perf_counter()
        if forced:
            inputs = task.to_device(task.decode_inputs(part, run.vocabs), device)
            wanted = task.batch(part, run.vocabs)["tgt_out"].ne(Vocab.pad).sum(1).to(device)
            limit = torch.minimum(max_lengths(inputs["src"], d.max_len_a, d.max_len_b), wanted)
            strategy = choose(d.strategy, Settings(d.beam, 1, d.len_penalty, d.early_stopping))
            with torch.no_grad():
                strategy.search(_NoEos(model), inputs, limit, {})
        else:
            run.decode_examples(part)
        times.append(time.perf_counter() - t)
    return {
        "examples": len(examples),
        "batches": len(chunks),
        "timed": picked,
        "batch_s": [round(x, 3) for x in times],
        "forced_length": forced,
        "seconds": round(sum(times) / len(times) * len(chunks), 1),
    }


class _NoEos:
    """`model` with </s> never chosen, so a decoding runs to the length limit it is given."""

    def __init__(self, model):
        self._model = model

    def __getattr__(self, name):
        return getattr(self._model, name)

    def step(self, prev, state):
        import torch

        from structseq.data.vocab import Vocab

        log_probs, state = self._model.step(prev, state)
        return log_probs.index_fill(-1, torch.tensor([Vocab.eos], device=log_probs.device), float("-inf")), state


class _Nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None


def _curve(config, overrides, seed, run_dir: Path, cfg, every: int, out: str) -> None:
    """Evaluate checkpoints/step{K}.pt for K = every, 2 every, ... < max_steps on the test splits (the last
    checkpoint, K = max_steps, is the table's record); skip the (run, step, split) already in `out`."""
    from structseq import api

    done = {(r.get("run_dir"), r.get("step"), r.get("split")) for r in read_jsonl(out)}
    for k in range(every, cfg.train.max_steps, every):
        for split in cfg.data.test:
            if (str(run_dir), k, split) in done:
                continue
            if not (run_dir / "checkpoints" / f"step{k}.pt").exists():
                print(f"{run_dir}: no checkpoints/step{k}.pt (run trained without the curve?)", file=sys.stderr)
                continue
            t1 = time.time()
            run = api.load_run(run_dir, checkpoint=f"step{k}")
            run.config.decode = cfg.decode
            m = run.evaluate(split, write_predictions=False)
            rec = {
                **_record(config, overrides, seed, run_dir, split, 0.0, time.time() - t1, cfg.train.max_steps, m),
                "step": k,
            }
            rec.pop("train_wall_s")
            append_records(out, [rec])


def main(argv=None, prog: str | None = None) -> int:
    """The command (`prog`: the name its usage line shows; by default the script's)."""
    p = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("configs", nargs="+")
    p.add_argument("--seeds", type=int, nargs="+", default=[1])
    p.add_argument("--out", default="results/foundation.jsonl")
    p.add_argument("--runs", default="runs/repro")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--set", dest="overrides", action="append", default=[])
    p.add_argument("--curve-every", type=int, default=0, help="learning curve: evaluate every N updates")
    p.add_argument("--curve-seeds", type=int, nargs="*", default=[], help="seeds that get the learning curve")
    p.add_argument("--curve-out", help="JSON lines of the learning curve (default: OUT with -curve)")
    a = p.parse_args(argv)
    curve_out = a.curve_out or str(Path(a.out).with_name(Path(a.out).stem + "-curve.jsonl"))
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    # restartable: skip (config, seed) pairs already recorded
    done = {(r.get("config"), r.get("seed"), tuple(r.get("overrides", []))) for r in read_jsonl(a.out)}
    jobs = [(c, s) for c in a.configs for s in a.seeds if (c, s, tuple(a.overrides)) not in done]
    args = [
        (c, s, a.runs, a.out, a.overrides, None, a.curve_every if s in a.curve_seeds else 0, curve_out) for c, s in jobs
    ]
    if a.jobs == 1:  # in this process, one run after another: an interrupted run stops the sweep
        for job in args:
            msg = one(*job)
            print(msg, flush=True)
            if msg.endswith(INTERRUPTED):
                return 128 + 15
        return 0
    with ProcessPoolExecutor(a.jobs) as pool:  # Ctrl-C reaches every worker (one process group)
        futures = [pool.submit(one, *job) for job in args]
        for f in futures:
            msg = f.result()
            print(msg, flush=True)
            if msg.endswith(INTERRUPTED):
                pool.shutdown(wait=False, cancel_futures=True)
                return 128 + 15
    return 0
