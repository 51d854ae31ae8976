"""Train and evaluate a list of configs x seeds; append one JSON line per (run, split) to a results file.

    structseq sweep configs/scan-jump/lstm-cpu.yaml configs/cogs/transformer-cpu.yaml \
        --seeds 1,2,3 --out results/foundation.jsonl --runs runs/repro --jobs 2

(`python scripts/reproduce.py ...` is the same command.)

Each record has the config, seed, split, every metric, the training wall time (the loop's own clock,
summed over resumes: `progress.train_seconds` of the last checkpoint) and the machine. A run
already recorded in the results file is skipped (and said so), a finished training is evaluated without
retraining, and an interrupted one resumes from its last checkpoint, so the command can be restarted at any time.
A config or seed given twice is refused: it would record one run twice and weigh it twice in the mean.

Learning curves (`--curve-every N --curve-seeds 1,2 --curve-out FILE`): for those seeds the checkpoint that
training writes at every multiple of N updates (N must be a multiple of the config's `train.valid_every`) is
kept as `checkpoints/step{K}.pt`, and after training each one is evaluated on the test splits, one JSON line
per (run, step, split) in FILE. The curve only observes the run: training is the same as without it (same
updates, same final model), and no checkpoint is chosen by its test score (the table uses the last one).

Pricing a run without training it is `structseq.experiments.probe` (`structseq plan --probe`).
"""

from __future__ import annotations

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

from structseq.run.layout import checkpoint_file, step_file


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


def config_label(config: str) -> str:
    """A config's part of its runs' names: `DATASET-STEM` for configs/DATASET/STEM.yaml, else the file's stem
    alone (a config outside configs/ has no dataset folder: `-digits` would read as an option), never starting
    with a dash or a dot."""
    path = Path(config)
    label = f"{path.parent.name}-{path.stem}" if path.parent.parent.name == "configs" else path.stem
    return label.lstrip("-.") or "config"


def run_name(config: str, seed: int, overrides: list[str] = ()) -> str:
    # e.g. -interval4 -max_steps500 -context_window8.0: the key's last part and the whole value (the value may
    # hold dots, so the key is split off at '=' first); a path (train.init_from) by its last part
    tag = "".join(
        f"-{k.split('.')[-1]}{Path(v).name if '/' in v else v}" for k, _, v in (o.partition("=") for o in overrides)
    )
    name = f"{config_label(config)}{tag}-s{seed}"
    if len(name) <= MAX_NAME:
        return name
    # a file name holds 255 bytes, and the claim adds '.lock': a long name keeps its start and ends in a digest of
    # the whole (names that fit are unchanged, so runs already on disk keep theirs)
    return f"{name[: MAX_NAME - 11]}-{hashlib.sha1(name.encode()).hexdigest()[:10]}"


class _KeepCheckpoints:
    """While training runs, hard-link each new checkpoints/last.pt written at a multiple of `every` updates
    to checkpoints/step{K}.pt (checkpoints are replaced atomically, so the link keeps that version)."""

    def __init__(self, run_dir: Path, every: int):
        self.run_dir, self.every, self.seen = run_dir, every, None
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
        from structseq.run.checkpoint import load_checkpoint

        last = checkpoint_file(self.run_dir, "last")
        try:
            ino = os.stat(last).st_ino
        except FileNotFoundError:
            return
        if ino == self.seen:
            return
        tmp = checkpoint_file(self.run_dir, f".watch-{ino}")
        try:
            os.link(last, tmp)
        except FileNotFoundError:  # replaced between stat and link: the next poll sees the new one
            return
        except FileExistsError:
            pass
        self.seen = ino
        step = load_checkpoint(tmp)["progress"]["step"]
        if step % self.every == 0 and not step_file(self.run_dir, step).exists():
            os.replace(tmp, step_file(self.run_dir, step))
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
    from structseq.run.checkpoint import load_checkpoint

    cfg = load_config(config, overrides)
    cfg.train.seed = seed
    name = name or run_name(config, seed, overrides)
    run_dir = Path(runs) / name
    last = checkpoint_file(run_dir, "last")
    if curve_every and curve_every % cfg.train.valid_every:
        from structseq.errors import ConfigError

        raise ConfigError(f"--curve-every {curve_every} is not a multiple of train.valid_every {cfg.train.valid_every}")
    t0 = time.time()
    try:
        with _KeepCheckpoints(run_dir, curve_every) if curve_every else _Nothing():
            summary = _train(cfg, run_dir, (config, seed, overrides))
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


def _train(cfg, run_dir: Path, started: tuple) -> dict:
    """Train `cfg` into `run_dir`, or resume it there; nothing when its last checkpoint is already final. A run
    already there must have been started as `started` (config, seed, overrides), decoding settings aside
    (they apply at evaluation): another config's run of the same name is an error, never reused."""
    from structseq import api
    from structseq.run.checkpoint import load_checkpoint
    from structseq.train.many import continued

    last = checkpoint_file(run_dir, "last")
    if not last.exists():
        return api.train(cfg, run_dir, show_progress=False)
    continued(run_dir, *started, command="sweep", out_option="--runs", free=("decode.",))
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
    summary = _train(cfg, Path(runs) / name, (config, seed, overrides))
    if summary.get("stopped") == "interrupted":
        return f"{name}: interrupted at update {summary['steps']}{INTERRUPTED}"
    return f"{name}: trained"


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
            if not step_file(run_dir, k).exists():
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


def check_sweep(configs, seeds, jobs: int, overrides, curve_every: int, curve_seeds) -> None:
    """Every setting of a sweep checked before its first run: a ConfigError naming the option and value for a
    config or seed given twice (one run recorded twice, averaged twice), `--jobs` below 1, a negative
    `--curve-every`, a curve without seeds or with seeds the sweep does not run, and a curve step that is not a
    multiple of a config's `train.valid_every` or leaves no point below its `train.max_steps`."""
    from structseq.config import load_config
    from structseq.errors import ConfigError

    twice = sorted({c for c in configs if list(configs).count(c) > 1})
    if twice:
        raise ConfigError(f"config {twice[0]} given twice: its runs would be recorded and averaged twice")
    named: dict[str, str] = {}
    for config in configs:
        name = run_name(config, 0, list(overrides))
        if (first := named.setdefault(name, config)) != config:
            raise ConfigError(
                f"configs {first} and {config} both name their runs {name.removesuffix('-s0')}-sSEED: one would "
                "reuse the other's runs; rename one (or move it into configs/DATASET/)"
            )
    if not seeds:
        raise ConfigError("--seeds names no seed; give e.g. --seeds 1,2,3")
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: give 1 or more runs at once")
    if curve_every < 0:
        raise ConfigError(f"--curve-every {curve_every}: give a number of updates >= 1 (0: no curve)")
    if curve_every and not curve_seeds:
        raise ConfigError(f"--curve-every {curve_every} without --curve-seeds: name the seeds that get the curve")
    if curve_seeds and not curve_every:
        raise ConfigError("--curve-seeds without --curve-every N: give the curve's step")
    extra = [s for s in curve_seeds if s not in seeds]
    if extra:
        raise ConfigError(f"--curve-seeds {','.join(map(str, extra))}: not among --seeds {','.join(map(str, seeds))}")
    for config in configs if curve_every else ():
        cfg = load_config(config, list(overrides))
        if cfg.train.valid_every and curve_every % cfg.train.valid_every:
            raise ConfigError(
                f"--curve-every {curve_every} is not a multiple of {config}'s train.valid_every {cfg.train.valid_every}"
            )
        if cfg.train.max_steps and curve_every >= cfg.train.max_steps:
            raise ConfigError(
                f"--curve-every {curve_every} leaves no curve point below {config}'s train.max_steps "
                f"{cfg.train.max_steps}"
            )


def run_sweep(
    configs: list[str],
    seeds: list[int],
    out: str,
    runs: str,
    jobs: int = 1,
    overrides: list[str] = (),
    curve_every: int = 0,
    curve_seeds: list[int] = (),
    curve_out: str | None = None,
    echo=print,
) -> int:
    """The sweep (`structseq sweep`): every (config, seed) not yet recorded in `out`, trained, evaluated and
    recorded; the recorded ones are named as skipped. Returns the exit status (143 when a run was interrupted)."""
    overrides = list(overrides)
    check_sweep(configs, seeds, jobs, overrides, curve_every, list(curve_seeds))
    curve_out = curve_out or str(Path(out).with_name(Path(out).stem + "-curve.jsonl"))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    # restartable: skip (config, seed) pairs already recorded
    done = {(r.get("config"), r.get("seed"), tuple(r.get("overrides", []))) for r in read_jsonl(out)}
    jobs_ = []
    for c in configs:
        for s in seeds:
            if (c, s, tuple(overrides)) in done:
                echo(f"{run_name(c, s, overrides)}: already recorded in {out}; skipped", flush=True)
            else:
                jobs_.append((c, s))
    args = [(c, s, runs, out, overrides, None, curve_every if s in curve_seeds else 0, curve_out) for c, s in jobs_]
    if jobs == 1:  # in this process, one run after another: an interrupted run stops the sweep
        for job in args:
            msg = one(*job)
            echo(msg, flush=True)
            if msg.endswith(INTERRUPTED):
                return 128 + 15
        return 0
    with ProcessPoolExecutor(jobs) as pool:  # Ctrl-C reaches every worker (one process group)
        futures = [pool.submit(one, *job) for job in args]
        for f in futures:
            msg = f.result()
            echo(msg, flush=True)
            if msg.endswith(INTERRUPTED):
                pool.shutdown(wait=False, cancel_futures=True)
                return 128 + 15
    return 0
