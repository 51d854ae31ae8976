"""The Python API: everything the CLI does is a call here, with the same names and defaults.

    from structseq.api import train, load_run
    train("configs/scan-jump/transformer.yaml", "runs/jump", overrides=["train.max_steps=2000"])
    run = load_run("runs/jump")
    run.translate(["jump twice"])            # -> ["I_JUMP I_JUMP"]
    run.evaluate("test", beam=5)             # -> {"exact_match": ..., "bleu": ..., ...}

A run knows its task (`run.task`), which does the decoding and the scoring, so the same calls serve
sequence, tree and context-aware models.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from structseq.config import Config, config_from_dict, load_config
from structseq.data.example import Example
from structseq.data.registry import dataset_split, load_dataset
from structseq.data.vocab import NamedVocabs, Vocab
from structseq.errors import StructseqError
from structseq.models.registry import build_model
from structseq.tasks import Task, get_task
from structseq.train import loop
from structseq.train.checkpoint import load_checkpoint


def train(config: str | Path | Config, out_dir: str | Path, *, overrides: list[str] = (), seed: int | None = None,
          data_root=None, show_progress: bool = True) -> dict:
    """Train from a config file (or Config) with `key=value` overrides; returns a summary dict."""
    cfg = config if isinstance(config, Config) else load_config(config, list(overrides))
    if seed is not None:
        cfg.train.seed = seed
    return loop.train(cfg, out_dir, data_root=data_root, show_progress=show_progress)


def resume(run_dir: str | Path, *, data_root=None, show_progress: bool = True) -> dict:
    """Continue an interrupted run exactly where its last checkpoint left it."""
    return loop.resume(run_dir, data_root=data_root, show_progress=show_progress)


@dataclass
class Run(NamedVocabs):
    """A trained model with its vocabularies, config and task, loaded from a run directory."""

    run_dir: Path
    config: Config
    model: torch.nn.Module
    vocabs: dict[str, Vocab]
    checkpoint: str
    task: Task

    # ---------------------------------------------------------------- prediction
    @torch.no_grad()
    def decode_examples(self, examples: Sequence[Example], *, beam: int | None = None, show_progress: bool = False
                        ) -> list[Any]:
        """The task's prediction for each example (tokens for seq2seq)."""
        return self.task.predict(self.model, examples, self.vocabs, beam=beam, show_progress=show_progress)

    def translate(self, sources: Sequence[str], *, contexts: Sequence[str] | None = None, beam: int | None = None
                  ) -> list[str]:
        """Decode raw (space-tokenised) source strings, each with its context string when given."""
        if contexts is not None and len(contexts) != len(sources):
            raise StructseqError(f"{len(sources)} sources but {len(contexts)} contexts")
        examples = [Example.from_text(s, context=None if contexts is None else contexts[i])
                    for i, s in enumerate(sources)]
        return [self.task.format_prediction(p) for p in self.decode_examples(examples, beam=beam)]

    def predict(self, lines: Sequence[str], *, beam: int | None = None) -> list[str]:
        """`structseq predict`: each input line parsed by the task (e.g. `source<TAB>context`), one output line."""
        examples = [self.task.parse_input(line) for line in lines]
        return [self.task.format_prediction(p) for p in self.decode_examples(examples, beam=beam)]

    @torch.no_grad()
    def token_log_probs(self, sources: list[str], targets: list[str], batch_size: int = 64, *,
                        contexts: list[str] | None = None) -> list[torch.Tensor]:
        """Teacher-forced log-probabilities over the target vocabulary: one (len + 1, V) tensor each."""
        out = []
        device = next(self.model.parameters()).device
        for i in range(0, len(sources), batch_size):
            ex = [Example.from_text(s, t, context=None if contexts is None else contexts[i + j])
                  for j, (s, t) in enumerate(zip(sources[i:i + batch_size], targets[i:i + batch_size]))]
            lp = self.model(self.task.to_device(self.task.batch(ex, self.vocabs), device))
            for j, e in enumerate(ex):
                out.append(lp[j, : len(e.target) + 1].cpu().clone())
        return out

    # ---------------------------------------------------------------- evaluation
    def load_split(self, split: str | None = None, data_root=None) -> tuple[str, str, list[Example]]:
        """(dataset, split name, examples) of a split of the run's dataset, a file, or NAME:SPLIT."""
        d = self.config.data
        split = split or (d.test[0] if d.test else "test")
        spec = dataset_split(split)
        if spec:
            dataset, name = spec
            return dataset, name, load_dataset(split, name, data_root)
        if d.dataset == "files" or Path(split).exists() or "," in split:
            return d.dataset, split, load_dataset(split, split, data_root, columns=d.columns)
        return d.dataset, split, load_dataset(d.dataset, split, data_root)

    def evaluate(self, split: str | None = None, *, beam: int | None = None, data_root=None,
                 bleu_tokenize: str | None = None, write_predictions: bool = True, show_progress: bool = False
                 ) -> dict:
        """Decode a split (default: the config's first test split) and compute every metric of the task.

        `split` is a split of the training dataset, a file, or `NAME:SPLIT` of any registered dataset (e.g.
        `cognition:cg-test`). For seq2seq: exact match, token accuracy, BLEU with its signature, per-category
        exact match; CoGnition splits also get character BLEU and, on cg-test, the compound error rate."""
        d = self.config.data
        split = split or (d.test[0] if d.test else "test")
        dataset, split_name, examples = self.load_split(split, data_root)
        if not examples:
            raise StructseqError(f"{dataset}/{split_name}: no examples to evaluate")
        self.task.check_examples(examples, f"{dataset}/{split_name}")
        predictions = self.decode_examples(examples, beam=beam, show_progress=show_progress)
        extra = {"bleu_tokenize": bleu_tokenize} if bleu_tokenize else {}
        metrics = self.task.evaluate(examples, predictions, dataset=dataset, split=split_name, data_root=data_root,
                                     **extra)
        beam = self.config.decode.beam if beam is None else beam
        metrics.update({"dataset": dataset, "split": split_name, "n": len(examples), "beam": beam,
                        "checkpoint": self.checkpoint, "seed": self.config.train.seed, "task": self.task.name})
        if "src" in self.vocabs:
            metrics["source_oov_tokens"] = sum(t not in self.vocabs["src"] for e in examples for t in e.source)
        if write_predictions:
            self._write_predictions(split, dataset, split_name, examples, predictions, metrics)
        return metrics

    def _write_predictions(self, spec: str, dataset: str, split_name: str, examples, predictions, metrics) -> None:
        if dataset_split(spec):
            label = f"{dataset}-{split_name}"  # NAME:SPLIT -> NAME-SPLIT.tsv
        else:
            label = Path(spec).stem if ("/" in spec or "." in spec) else spec  # a file: its stem
        path = self.run_dir / "predictions" / f"{label}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        header, rows = self.task.prediction_rows(examples, predictions)
        with open(path, "w", newline="") as f:
            w = csv.writer(f, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar="\\")
            w.writerow(header)
            w.writerows(rows)
        metrics["predictions"] = str(path)
        (self.run_dir / "predictions" / f"{label}.metrics.json").write_text(json.dumps(metrics, indent=1))


def load_run(run_dir: str | Path, checkpoint: str | None = None, *, device: str = "auto") -> Run:
    """Load `checkpoints/{checkpoint}.pt` of a run (default: the config's `train.eval_checkpoint`;
    `best` falls back to `last` when no validation ran) onto `device` (auto: CUDA when available)."""
    run_dir = Path(run_dir)
    if checkpoint is None:
        saved = yaml.safe_load((run_dir / "config.yaml").read_text()) if (run_dir / "config.yaml").exists() else {}
        checkpoint = ((saved or {}).get("train") or {}).get("eval_checkpoint", "best")
    path = run_dir / "checkpoints" / f"{checkpoint}.pt"
    if not path.exists() and checkpoint == "best":
        checkpoint, path = "last", run_dir / "checkpoints" / "last.pt"
    if not path.exists():
        raise StructseqError(f"no checkpoint in {run_dir} (looked for {path}); is this a training run directory?")
    ckpt = load_checkpoint(path)
    cfg = config_from_dict(ckpt["config"], saved=True)
    vocabs = {name: Vocab(tokens) for name, tokens in ckpt["vocab"].items()}
    task = get_task(cfg)
    model = build_model(cfg.model, vocabs, task=task.name)
    model.load_state_dict(ckpt["model"])
    model.to(loop.resolve_device(device)).eval()
    return Run(run_dir, cfg, model, vocabs, checkpoint, task)
