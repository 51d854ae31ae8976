"""Sequence to sequence: one token sequence in, one out (SCAN, COGS, Colors, translation)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from structseq.data.batching import Batch, encode_source, pad_sequences, target_batch
from structseq.data.example import Example
from structseq.data.vocab import Vocab
from structseq.errors import DataError
from structseq.metrics.base import MetricInputs
from structseq.nn.loss import label_smoothed_nll
from structseq.progress import progress
from structseq.registry import register_task
from structseq.tasks.base import Encoded, Task, Vocabs


@register_task("seq2seq")
class Seq2SeqTask(Task):
    valid_metrics = {"loss": "min", "exact_match": "max", "bleu": "max"}
    metrics = ("exact_match", "token_accuracy", "bleu", "nltk_bleu", "per_category")

    @property
    def tokenized_output(self) -> bool:
        """Outputs are the data's own whitespace tokens, like its references: BLEU needs no detokenising, and
        sacrebleu's warning that it looks tokenised is noise (silenced; no score or signature changes)."""
        return True

    # ------------------------------------------------------------------ data
    def build_vocabs(self, train: Sequence[Example]) -> Vocabs:
        d = self.cfg.data
        if d.share_vocab:
            shared = Vocab.build([e.source for e in train] + [e.target for e in train], d.min_freq)
            return {"src": shared, "tgt": shared}
        return {"src": Vocab.build((e.source for e in train), d.min_freq),
                "tgt": Vocab.build((e.target for e in train), d.min_freq)}

    def check_examples(self, examples: Sequence[Example], where: str) -> None:
        for i, e in enumerate(examples):
            if not e.target:
                raise DataError(f"example {i + 1} has no target", where)

    def encode(self, example: Example, vocabs: Vocabs) -> Encoded:
        return {"src": encode_source(vocabs["src"], example.source), "tgt": vocabs["tgt"].encode(example.target)}

    def length(self, encoded: Encoded) -> int:
        return max(len(encoded["src"]) - 1, len(encoded["tgt"]))

    def collate(self, items: Sequence[Encoded], index: Sequence[int]) -> Batch:
        tgt = [it["tgt"] for it in items]
        return Batch({"src": pad_sequences([it["src"] for it in items]), **target_batch(tgt)}, index,
                     sum(len(t) + 1 for t in tgt))

    # ------------------------------------------------------------------ training
    def loss(self, model: nn.Module, batch: Batch, label_smoothing: float):
        loss, nll = label_smoothed_nll(model(batch), batch["tgt_out"], label_smoothing)
        return loss, nll, batch.num_tokens

    @torch.no_grad()
    def validate(self, model: nn.Module, examples: Sequence[Example], vocabs: Vocabs) -> dict[str, float]:
        """Loss per target token and, when the early-stopping metric needs outputs (`exact_match`, `bleu`),
        exact match of greedy outputs compared as strings (as `evaluate` does: an out-of-vocabulary reference
        word never matches <unk>), and for `bleu` also sacrebleu corpus BLEU (0-100) of those outputs, scored
        as `evaluate` scores them (`data.bleu_tokenize`, else the dataset's tokenizer)."""
        d = self.cfg.decode
        total_nll, total_tok = 0.0, 0
        device = next(model.parameters()).device
        for start in range(0, len(examples), d.batch_size):
            b = self.to_device(self.batch(examples[start: start + d.batch_size], vocabs), device)
            _, nll, n = self.loss(model, b, 0.0)
            total_nll, total_tok = total_nll + float(nll), total_tok + n
        out = {"valid_loss": total_nll / max(total_tok, 1)}
        if self.cfg.train.valid_metric in ("exact_match", "bleu"):
            hyps = self.predict(model, examples, vocabs, beam=1)
            out["valid_exact_match"] = sum(tuple(h) == e.target for h, e in zip(hyps, examples)) / max(len(examples), 1)
            if self.cfg.train.valid_metric == "bleu":
                out["valid_bleu"] = self.validation_bleu(examples, hyps)
        return out

    def validation_bleu(self, examples: Sequence[Example], predictions: Sequence[list[str]]) -> float:
        """The registered `bleu` metric's score (0-100) of `predictions` on validation examples (0.0 for none)."""
        from structseq.metrics.report import compute_metric

        if not examples:
            return 0.0
        inputs = self.metric_inputs(examples, predictions, dataset=self.cfg.data.dataset, split="valid")
        return float(compute_metric("bleu", inputs)["score"])

    # ------------------------------------------------------------------ prediction
    def decode_inputs(self, examples: Sequence[Example], vocabs: Vocabs) -> Batch:
        """The model inputs of a batch to decode (no target needed)."""
        return Batch({"src": pad_sequences([encode_source(vocabs["src"], e.source) for e in examples])})

    @torch.no_grad()
    def predict(self, model: nn.Module, examples: Sequence[Example], vocabs: Vocabs, *, beam: int | None = None,
                show_progress: bool = False) -> list[list[str]]:
        from structseq.decode.search import decode, max_lengths

        d = self.cfg.decode
        beam = d.beam if beam is None else beam
        device = next(model.parameters()).device
        order = sorted(range(len(examples)), key=lambda i: len(examples[i].source))  # fewer pad tokens
        out: list[list[str] | None] = [None] * len(examples)
        chunks = [order[i: i + d.batch_size] for i in range(0, len(order), d.batch_size)]
        for chunk in progress(chunks, "decode", show_progress):
            inputs = self.to_device(self.decode_inputs([examples[i] for i in chunk], vocabs), device)
            max_len = max_lengths(inputs["src"], d.max_len_a, d.max_len_b)
            hyp = decode(model, inputs, max_len, beam=beam, len_penalty=d.len_penalty)
            for i, toks in zip(chunk, hyp.tokens):
                out[i] = vocabs["tgt"].decode(toks)
        return out  # type: ignore[return-value]

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
