"""What a run would cost here, without training it (`structseq plan --probe`): a short run's seconds per update
and a few of its decoding batches, extrapolated to the config's budget."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path


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
    `structseq plan --probe` for a config without any record to estimate from."""
    import random
    import tempfile

    import torch

    from structseq import api
    from structseq.config import load_config
    from structseq.run.checkpoint import load_checkpoint
    from structseq.run.layout import checkpoint_file

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
        t1 = load_checkpoint(checkpoint_file(run_dir, "last"))["progress"]["train_seconds"]
        api.resume(run_dir, overrides=[f"train.max_steps={s2}"], show_progress=False)
        t2 = load_checkpoint(checkpoint_file(run_dir, "last"))["progress"]["train_seconds"]
        per_update = (t2 - t1) / (s2 - s1)
        run = api.load_run(run_dir)
        run.config.decode = cfg.decode
        rng = random.Random(seed)
        evals = {split: _time_decoding(run, _examples(run, split, config), batches, rng) for split in cfg.data.test}
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


def _examples(run, split: str, config: str) -> list:
    """The examples of test split `split`; none is a ConfigError naming it (a decoding time per example of none)."""
    examples = run.load_split(split)[2]
    if not examples:
        from structseq.errors import ConfigError

        raise ConfigError(f"plan --probe: {config}'s test split {split} holds no example: nothing to time")
    return examples


def _time_decoding(run, examples, batches: int, rng) -> dict:
    """Seconds to decode `examples` as the task does (length-sorted batches of decode.batch_size), from `batches`
    of those batches. Tasks that decode token by token (`model.step`) decode each sampled batch to its reference
    lengths; others (e.g. the supertagger) are timed as they decode."""
    import torch

    from structseq.data.vocab import Vocab
    from structseq.decode import max_lengths
    from structseq.decode.processors import build_processors
    from structseq.decode.strategies import Settings, choose

    task, model, d = run.task, run.model, run.config.decode
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].source))
    chunks = [order[i : i + d.batch_size] for i in range(0, len(order), d.batch_size)]
    picked = sorted(rng.sample(range(len(chunks)), min(batches, len(chunks))))
    forced = model.autoregressive  # decodes token by token (`Task.decode_inputs` serves it)
    device = next(model.parameters()).device
    times = []
    # as `decode.batched.run` decodes: the strategy's own keys (decode.groups, sampling) and the processors
    processors = build_processors(d, task.output_space(run.vocabs)) if d.processors or d.grammar else None
    settings = Settings(d.beam, 1, d.len_penalty, d.early_stopping, options=d, processors=processors)
    for c in picked:
        part = [examples[i] for i in chunks[c]]
        t = time.perf_counter()
        if forced:
            inputs = task.to_device(task.decode_inputs(part, run.vocabs), device)
            wanted = task.batch(part, run.vocabs)["tgt_out"].ne(Vocab.pad).sum(1).to(device)
            limit = torch.minimum(max_lengths(inputs["src"], d.max_len_a, d.max_len_b), wanted)
            strategy = choose(d.strategy, settings, model.search_interface, type(model).__name__)
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
