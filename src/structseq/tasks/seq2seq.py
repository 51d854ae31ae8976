"""Sequence to sequence: one token sequence in, one out (SCAN, COGS, Colors, translation).

Raw text in and out (`task.subword`, for this task and every task built on it): `bpe` learns a BPE model on
the training split (source, target and context sides, Hugging Face `tokenizers`), `tokenizer` uses a given one
(`task.tokenizer_path`); either is saved in every checkpoint as the task's state. The model reads and writes
pieces (`prepare`); outputs are turned back into words (`finish`) before anything else sees them, so every
metric, the predictions file and `predict` read detokenised text against the original references.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import nn

from structseq.config import TaskOptions
from structseq.data.batching import Batch, encode_source, pad_sequences, target_batch
from structseq.data.example import Example
from structseq.data.limits import LengthLimit, input_limits, over_limit
from structseq.data.subword import KINDS
from structseq.data.vocab import Vocab
from structseq.errors import ConfigError, DataError
from structseq.fields import option
from structseq.metrics.base import MetricInputs
from structseq.models.heads import SPECIAL_OUTPUTS, masked_targets
from structseq.nn.loss import label_smoothed_nll
from structseq.registry import register_task
from structseq.tasks.base import Encoded, Task, Vocabs


@dataclass
class Seq2SeqTaskOptions(TaskOptions):
    subword: str = option(
        "none",
        "subword units for raw text: none (the data's whitespace tokens) | bpe (learned "
        "on the training split with Hugging Face tokenizers) | tokenizer (a given one, "
        "task.tokenizer_path); saved in every checkpoint, undone before every metric",
        choices=KINDS,
    )
    subword_vocab_size: int = option(
        8000, "BPE vocabulary size (pieces), one model for every side (source, context, target)", ge=1
    )
    tokenizer_path: str | None = option(
        None,
        "with subword: tokenizer, a tokenizers JSON file or a Hugging Face "
        "tokenizer folder (its tokenizer.json, else its fast tokenizer; read "
        "locally only); SentencePiece .model files are not read",
    )
    source_bos: bool = option(
        False,
        "read every source as <s> x </s>, not x </s>, as the reference code of Akyürek & Andreas 2021 "
        "does: one more position to attend to, whose lexicon row is <s> itself",
    )


@register_task("seq2seq")
class Seq2SeqTask(Task):
    options_class = Seq2SeqTaskOptions
    valid_metrics = {"loss": "min", "exact_match": "max", "bleu": "max"}
    metrics = ("exact_match", "token_accuracy", "bleu", "nltk_bleu", "per_category")
    #: tokens that subword units never split (the context task's separators)
    keep_tokens: ClassVar[tuple[str, ...]] = ()

    def __init__(self, cfg):
        super().__init__(cfg)
        o = self.options
        kind, path = getattr(o, "subword", "none"), getattr(o, "tokenizer_path", None)
        if (kind == "tokenizer") != (path is not None):
            raise ConfigError(
                "'task.subword: tokenizer' and 'task.tokenizer_path' go together: set both (a given "
                "tokenizer) or neither" + (f"; task.subword is {kind!r}" if path is not None else "")
            )
        self.subword = None  # a Subword / GivenTokenizer once learned or loaded (build_vocabs, load_state_dict)
        self.limit = LengthLimit(**input_limits(cfg))  # what the model takes (subword pieces are checked here)

    @property
    def tokenized_output(self) -> bool:
        """Outputs are the data's own whitespace tokens, like its references: BLEU needs no detokenising, and
        sacrebleu's warning that it looks tokenised is noise (silenced; no score or signature changes). With
        subwords, outputs are detokenised text: sacrebleu's check stays."""
        return getattr(self.options, "subword", "none") == "none"

    # ------------------------------------------------------------------ task state (saved in checkpoints)
    def state_dict(self) -> dict:
        sw = self.subword
        return {"subword": sw.to_str(), "subword_kind": sw.kind} if sw is not None else {}

    def load_state_dict(self, state: dict) -> None:
        from structseq.data.subword import from_state

        if state.get("subword"):
            self.subword = from_state(state, keep=self.keep_tokens)

    # ------------------------------------------------------------------ subwords
    def learn_subword(self, train: Sequence[Example]) -> None:
        """`task.subword`'s model, unless one was loaded: BPE learned on every side of the training examples,
        or the given tokenizer (`task.tokenizer_path`)."""
        from structseq.data.subword import GivenTokenizer, Subword, load_tokenizer

        kind = getattr(self.options, "subword", "none")
        if self.subword is not None or kind == "none":
            return
        if kind == "tokenizer":
            self.subword = GivenTokenizer(load_tokenizer(self.options.tokenizer_path), self.keep_tokens)
            return
        sides = ((e.source, e.target, e.context or ()) for e in train)
        self.subword = Subword.learn(
            (s for triple in sides for s in triple), self.options.subword_vocab_size, keep=self.keep_tokens
        )

    def to_pieces(self, e: Example) -> Example:
        """`e` in subword pieces (every side), or `e` itself without subwords."""
        sw = self.subword
        if sw is None:
            return e
        return Example(
            sw.encode(e.source),
            sw.encode(e.target),
            e.category,
            None if e.context is None else sw.encode(e.context),
            e.meta,
        )

    def check_pieces(self, e: Example) -> None:
        """A DataError when a side in pieces is longer than the model takes (words were checked when read)."""
        over = over_limit(e, self.limit) if self.subword is not None else None
        if over is not None:
            side, n, most, key = over
            raise DataError(
                f"an example's {side} has {n} subword pieces, more than {key} {most} (it starts: "
                f"{' '.join(self.finish(getattr(e, side)[:12]))} ...)"
            )

    def prepare(self, e: Example) -> Example:
        """The example the model sees: subword pieces, checked against the model's limits."""
        e = self.to_pieces(e)
        self.check_pieces(e)
        return e

    def output_words(self, ids: Sequence[int], vocabs: Vocabs) -> list[str]:
        return self.finish(vocabs["tgt"].decode(ids))

    def outputs_are_words(self) -> bool:
        return self.subword is None

    def finish(self, tokens: Sequence[str]) -> list[str]:
        """Model output tokens -> words (subwords undone)."""
        return list(self.subword.decode(tokens)) if self.subword is not None else list(tokens)

    # ------------------------------------------------------------------ data
    def build_vocabs(self, train: Sequence[Example]) -> Vocabs:
        d = self.cfg.data
        self.learn_subword(train)
        train = [self.prepare(e) for e in train] if self.subword is not None else train
        extra = d.extra_target_tokens
        if d.share_vocab:
            shared = Vocab.build([e.source for e in train] + [e.target for e in train], d.min_freq, extra)
            return {"src": shared, "tgt": shared}
        return {
            "src": Vocab.build((e.source for e in train), d.min_freq),
            "tgt": Vocab.build((e.target for e in train), d.min_freq, extra),
        }

    def check_examples(self, examples: Sequence[Example], where: str) -> None:
        for i, e in enumerate(examples):
            if not e.target:
                raise DataError(f"example {i + 1} has no target", where)

    def encode(self, example: Example, vocabs: Vocabs) -> Encoded:
        e = self.prepare(example)
        return {"src": self.source_ids(vocabs["src"], e.source), "tgt": vocabs["tgt"].encode(e.target)}

    def source_ids(self, vocab: Vocab, tokens: Sequence[str]) -> list[int]:
        """A source's ids as the model reads them: the tokens, </s>, and with `task.source_bos` <s> first."""
        ids = encode_source(vocab, tokens)
        return [vocab.bos, *ids] if getattr(self.options, "source_bos", False) else ids

    def length(self, encoded: Encoded) -> int:
        return max(len(encoded["src"]) - 1, len(encoded["tgt"]))

    def collate(self, items: Sequence[Encoded], index: Sequence[int]) -> Batch:
        tgt = [it["tgt"] for it in items]
        return Batch(
            {"src": pad_sequences([it["src"] for it in items]), **target_batch(tgt)},
            index,
            sum(len(t) + 1 for t in tgt),
        )

    def source_length(self, encoded: Encoded) -> int | None:
        return len(encoded["src"])

    def pad_batch(self, batch: Batch, rows: int, length: int, source_length: int | None = None) -> Batch:
        """`src`, `tgt_in`, `tgt_out` padded to (rows, length), `src` to (rows, `source_length`) when given (its
        bucket's longest source: Dangle on COGS did 2x the work of sorted batches with sources padded to the
        target's bucket, 1.2x so; scripts/padding_flops.py); a filler row reads `</s>`, starts from `<s>` and
        predicts only padding (no loss). Batches holding other tensors are refused (their tasks say how)."""
        other = sorted(set(batch) - {"src", "tgt_in", "tgt_out"})
        if other:
            raise ConfigError(f"'optim.static_shapes': the {self.name} task's batches hold {', '.join(other)}")
        first = {"src": Vocab.eos, "tgt_in": Vocab.bos, "tgt_out": Vocab.pad}
        out = {}
        for key, t in batch.items():
            width = source_length if key == "src" and source_length else length
            if t.shape[0] > rows or t.shape[1] > width:
                raise ValueError(f"a batch of shape {tuple(t.shape)} does not fit ({rows}, {width})")
            padded = t.new_full((rows, width), Vocab.pad)
            padded[: t.shape[0], : t.shape[1]] = t
            padded[t.shape[0] :, 0] = first[key]
            out[key] = padded
        return Batch(out, batch.index, batch.num_tokens)

    # ------------------------------------------------------------------ training
    def loss(self, model: nn.Module, batch: Batch, label_smoothing: float):
        loss, nll = label_smoothed_nll(model(batch), batch["tgt_out"], label_smoothing)
        return loss, nll, batch.num_tokens

    def validation_nll(self, model: nn.Module, batch: Batch) -> tuple[float, int]:
        """Summed NLL and the number of target tokens of a validation batch, teacher forced, by the task's own
        `loss` (a task that overrides `loss` validates by it), without the targets a head masks on purpose
        (`models.heads.masked_targets`: with head.mask_special, a reference word outside the target vocabulary is
        <unk>, scored -1e5 as the model can never emit it; the reference code has no validation loss, and
        averaging its -1e5 in made valid_loss a count of unknown words and set off the blow-up warning). Only a
        batch whose targets hold <s> or <unk> is run forward once more, to find them."""
        target = batch["tgt_out"]
        specials = torch.tensor([i for i in SPECIAL_OUTPUTS if i != Vocab.pad], device=target.device)
        if torch.isin(target, specials).any():
            masked = masked_targets(model(batch), target)
            if masked.any():
                tensors = {**batch, "tgt_out": target.masked_fill(masked, Vocab.pad)}
                batch = Batch(tensors, batch.index, batch.num_tokens - int(masked.sum()))
        _, nll, n = self.loss(model, batch, 0.0)
        return float(nll), n

    @torch.no_grad()
    def validate(self, model: nn.Module, examples: Sequence[Example], vocabs: Vocabs) -> dict[str, float]:
        """Loss per target token (`validation_nll`) and, when the early-stopping metric needs outputs, the registered metrics
        (`exact_match`, and `train.valid_metric` when another) of greedy outputs, computed as `evaluate`
        computes them: outputs compared as text (an out-of-vocabulary reference word never matches <unk>),
        `bleu` as sacrebleu corpus BLEU (0-100) with `data.bleu_tokenize`, else the dataset's tokenizer."""
        d = self.cfg.decode
        total_nll, total_tok = 0.0, 0
        device = next(model.parameters()).device
        for start in range(0, len(examples), d.batch_size):
            b = self.to_device(self.batch(examples[start : start + d.batch_size], vocabs), device)
            nll, n = self.validation_nll(model, b)
            total_nll, total_tok = total_nll + nll, total_tok + n
        out = {"valid_loss": total_nll / max(total_tok, 1)}
        name = self.cfg.train.valid_metric
        if name != "loss":
            hyps = self.predict(model, examples, vocabs, beam=1)
            out.update(self.registered_validation(examples, hyps, ("exact_match", name)))
        return out

    # ------------------------------------------------------------------ prediction
    def decode_inputs(self, examples: Sequence[Example], vocabs: Vocabs) -> Batch:
        """The model inputs of a batch to decode (no target needed)."""
        return Batch({"src": pad_sequences([self.source_ids(vocabs["src"], self.prepare(e).source) for e in examples])})

    @torch.no_grad()
    def predict(
        self,
        model: nn.Module,
        examples: Sequence[Example],
        vocabs: Vocabs,
        *,
        beam: int | None = None,
        show_progress: bool = False,
    ) -> list[list[str]]:
        from structseq.decode.batched import run

        lists = run(model, self, examples, self.cfg.decode, vocabs=vocabs, beam=beam, show_progress=show_progress)
        return [c[0].tokens for c in lists]

    # ------------------------------------------------------------------ evaluation
    def metric_inputs(self, examples, predictions, *, dataset: str, split: str, data_root=None) -> MetricInputs:
        inputs = super().metric_inputs(examples, predictions, dataset=dataset, split=split, data_root=data_root)
        if "compound" in inputs.meta:  # a CoGnition compound labels 5 lines: not a category worth a table
            inputs.categories = None
        return inputs

    def prediction_rows(self, examples, predictions):
        rows = []
        for e, h in zip(examples, predictions):
            hyp = " ".join(h)
            rows.append([e.source_text, e.target_text, hyp, str(int(hyp == e.target_text)), e.category or ""])
        return ["source", "reference", "hypothesis", "correct", "category"], rows
