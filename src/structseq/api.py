"""The Python API: everything the CLI does is a call here, with the same names and defaults.

    from structseq.api import train, load_run
    train("configs/scan-jump/transformer.yaml", "runs/jump", overrides=["train.max_steps=2000"])
    run = load_run("runs/jump")
    run.translate(["jump twice"])            # -> ["I_JUMP I_JUMP"]
    run.evaluate("test", beam=5)             # -> {"exact_match": ..., "bleu": ..., ...}
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from structseq.config import Config, config_from_dict, load_config
from structseq.data.batching import collate
from structseq.data.example import Example
from structseq.data.registry import dataset_split, load_dataset
from structseq.data.vocab import Vocab
from structseq.decode.search import decode
from structseq.errors import StructseqError
from structseq.models.build import build_model
from structseq.train.checkpoint import load_checkpoint
from structseq.train import loop


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
class Run:
    """A trained model with its vocabularies and config, loaded from a run directory."""

    run_dir: Path
    config: Config
    model: torch.nn.Module
    src_vocab: Vocab
    tgt_vocab: Vocab
    checkpoint: str

    # ---------------------------------------------------------------- decoding
    @torch.no_grad()
    def decode_examples(self, examples: list[Example], *, beam: int | None = None, show_progress: bool = False
                        ) -> list[list[str]]:
        d = self.config.decode
        beam = d.beam if beam is None else beam
        order = sorted(range(len(examples)), key=lambda i: len(examples[i].source))  # fewer pad tokens
        out: list[list[str] | None] = [None] * len(examples)
        chunks = [order[i: i + d.batch_size] for i in range(0, len(order), d.batch_size)]
        for chunk in _progress(chunks, "decode", show_progress):
            b = collate([examples[i] for i in chunk], chunk, self.src_vocab, None)
            hyp = decode(self.model, b.src, beam=beam, max_len_a=d.max_len_a, max_len_b=d.max_len_b,
                         len_penalty=d.len_penalty)
            for i, toks in zip(chunk, hyp.tokens):
                out[i] = self.tgt_vocab.decode(toks)
        return out  # type: ignore[return-value]

    def translate(self, sources: list[str], *, beam: int | None = None) -> list[str]:
        """Decode raw (space-tokenised) source strings."""
        examples = [Example(tuple(s.split()), ()) for s in sources]
        return [" ".join(t) for t in self.decode_examples(examples, beam=beam)]

    @torch.no_grad()
    def token_log_probs(self, sources: list[str], targets: list[str], batch_size: int = 64) -> list[torch.Tensor]:
        """Teacher-forced log-probabilities over the target vocabulary: one (len + 1, V) tensor each."""
        out = []
        for i in range(0, len(sources), batch_size):
            ex = [Example(tuple(s.split()), tuple(t.split())) for s, t in zip(sources[i:i + batch_size],
                                                                                targets[i:i + batch_size])]
            b = collate(ex, range(len(ex)), self.src_vocab, self.tgt_vocab)
            lp = self.model(b.src, b.tgt_in)
            for j, e in enumerate(ex):
                out.append(lp[j, : len(e.target) + 1].clone())
        return out

    # ---------------------------------------------------------------- evaluation
    def evaluate(self, split: str | None = None, *, beam: int | None = None, data_root=None,
                 bleu_tokenize: str | None = None, write_predictions: bool = True, show_progress: bool = False
                 ) -> dict:
        """Decode a split (default: the config's first test split) and compute every metric.

        `split` is a split of the training dataset, a file (with `data.dataset: files`), or `NAME:SPLIT` of
        any registered dataset (e.g. `cognition:cg-test`). CoGnition splits also get character BLEU and,
        on cg-test (whose examples carry their compound), the compound translation error rate."""
        from structseq.metrics import compute_all

        d = self.config.data
        split = split or (d.test[0] if d.test else "test")
        spec = dataset_split(split)
        dataset, split_name = spec if spec else (d.dataset, split)
        examples = load_dataset(split if spec or d.dataset == "files" else dataset, split_name, data_root)
        hyps = self.decode_examples(examples, beam=beam, show_progress=show_progress)
        hyp_text = [" ".join(h) for h in hyps]
        ref_text = [e.target_text for e in examples]
        cognition = dataset == "cognition"
        compounds = [e.extra[0] for e in examples] if cognition and split_name == "cg-test" else None
        # a CoGnition compound is a label of 5 lines, not a category worth a per-category table
        cats = [e.category for e in examples] if any(e.category for e in examples) and not compounds else None
        tok = bleu_tokenize or ("zh" if any(k in dataset for k in ("zh", "cognition")) else "13a")
        metrics = compute_all(hyp_text, ref_text, categories=cats, bleu_tokenize=tok, cognition=cognition,
                              compounds=compounds, data_root=data_root)
        beam = self.config.decode.beam if beam is None else beam
        oov = sum(t not in self.src_vocab for e in examples for t in e.source)
        metrics.update({"dataset": dataset, "split": split_name, "n": len(examples), "beam": beam,
                        "checkpoint": self.checkpoint, "seed": self.config.train.seed,
                        "source_oov_tokens": oov})
        if write_predictions:
            if spec:
                label = f"{dataset}-{split_name}"  # NAME:SPLIT -> NAME-SPLIT.tsv
            else:
                label = Path(split).stem if ("/" in split or "." in split) else split  # a file: its stem
            path = self.run_dir / "predictions" / f"{label}.tsv"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", newline="") as f:
                w = csv.writer(f, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_NONE, escapechar="\\")
                w.writerow(["source", "reference", "hypothesis", "correct", "category"])
                for e, h, r in zip(examples, hyp_text, ref_text):
                    w.writerow([e.source_text, r, h, int(h == r), e.category or ""])
            metrics["predictions"] = str(path)
            (self.run_dir / "predictions" / f"{label}.metrics.json").write_text(json.dumps(metrics, indent=1))
        return metrics


def load_run(run_dir: str | Path, checkpoint: str | None = None) -> Run:
    """Load `checkpoints/{checkpoint}.pt` of a run (default: the config's `train.eval_checkpoint`;
    `best` falls back to `last` when no validation ran)."""
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
    cfg = config_from_dict(ckpt["config"])
    src_vocab, tgt_vocab = Vocab(ckpt["vocab"]["src"]), Vocab(ckpt["vocab"]["tgt"])
    model = build_model(cfg.model, src_vocab, tgt_vocab)
    model.load_state_dict(ckpt["model"])
    model.eval()
    return Run(run_dir, cfg, model, src_vocab, tgt_vocab, checkpoint)


def _progress(items, label: str, enabled: bool):
    if not enabled:
        yield from items
        return
    from rich.progress import track

    yield from track(items, description=label, transient=True)
