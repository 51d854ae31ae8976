"""Sequence to sequence: one token sequence in, one out (SCAN, COGS, Colors, translation)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from structseq.data.batching import Batch, encode_source, pad_sequences, target_batch
from structseq.data.example import Example
from structseq.data.vocab import Vocab
from structseq.errors import DataError
from structseq.tasks.base import Encoded, Task, Vocabs


class Seq2SeqTask(Task):
    name = "seq2seq"
    valid_metrics = {"loss": "min", "exact_match": "max"}

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
        from structseq.train.optim import label_smoothed_nll

        loss, nll = label_smoothed_nll(model(batch), batch["tgt_out"], label_smoothing)
        return loss, nll, batch.num_tokens

    @torch.no_grad()
    def validate(self, model: nn.Module, examples: Sequence[Example], vocabs: Vocabs) -> dict[str, float]:
        """Loss per target token and, when it is the early-stopping metric, exact match of greedy outputs
        compared as strings (as `evaluate` does: an out-of-vocabulary reference word never matches <unk>)."""
        d = self.cfg.decode
        total_nll, total_tok = 0.0, 0
        device = next(model.parameters()).device
        for start in range(0, len(examples), d.batch_size):
            b = self.to_device(self.batch(examples[start: start + d.batch_size], vocabs), device)
            _, nll, n = self.loss(model, b, 0.0)
            total_nll, total_tok = total_nll + float(nll), total_tok + n
        out = {"valid_loss": total_nll / max(total_tok, 1)}
        if self.cfg.train.valid_metric == "exact_match":
            hyps = self.predict(model, examples, vocabs, beam=1)
            out["valid_exact_match"] = sum(tuple(h) == e.target for h, e in zip(hyps, examples)) / max(len(examples), 1)
        return out

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
    def bleu_tokenize(self, dataset: str) -> str:
        """The configured sacrebleu tokenizer, else the dataset's declared one, else 13a."""
        from structseq.data.registry import datasets

        if self.cfg.data.bleu_tokenize:
            return self.cfg.data.bleu_tokenize
        ds = datasets().get(dataset)
        return ds.bleu_tokenize if ds is not None else "13a"

    def evaluate(self, examples, predictions, *, dataset: str, split: str, data_root=None,
                 bleu_tokenize: str | None = None) -> dict:
        from structseq.metrics import compute_all

        hyp_text = [" ".join(h) for h in predictions]
        ref_text = [e.target_text for e in examples]
        compounds = [e.meta["compound"] for e in examples] if examples and all("compound" in e.meta for e in examples) \
            else None
        # a CoGnition compound is a label of 5 lines, not a category worth a per-category table
        cats = [e.category for e in examples] if any(e.category for e in examples) and not compounds else None
        report = compute_all(hyp_text, ref_text, categories=cats,
                             bleu_tokenize=bleu_tokenize or self.bleu_tokenize(dataset),
                             cognition=dataset == "cognition", compounds=compounds, data_root=data_root,
                             tokenized=self.tokenized_output)
        report.update(self.pooled_bleu(examples, hyp_text, dataset=dataset, split=split, data_root=data_root))
        return report

    @staticmethod
    def pooled_bleu(examples, hyp_text: list[str], *, dataset: str, split: str, data_root=None) -> dict:
        """`pooled_bleu` (full and 1-shot) for datasets that declare `pooled_references` (Tatoeba), else {}."""
        from structseq.data.registry import datasets, load_dataset
        from structseq.metrics import pooled_bleu

        ds = datasets().get(dataset)
        if ds is None or not ds.pooled_references or split not in ds.splits:
            return {}
        other = {s: load_dataset(dataset, s, data_root) for s in ds.pooled_references if s != split}
        extra = [(e.source, e.target) for exs in other.values() for e in exs]
        train = other.get(ds.pooled_references[0], examples)
        return {"pooled_bleu": pooled_bleu([e.source for e in examples], hyp_text, [e.target for e in examples],
                                           extra, [e.source for e in train])}

    def prediction_rows(self, examples, predictions):
        rows = []
        for e, h in zip(examples, predictions):
            hyp = " ".join(h)
            rows.append([e.source_text, e.target_text, hyp, str(int(hyp == e.target_text)), e.category or ""])
        return ["source", "reference", "hypothesis", "correct", "category"], rows


def progress(items, label: str, enabled: bool):
    """`items`, with a transient progress bar when enabled."""
    if not enabled:
        yield from items
        return
    from rich.progress import track

    yield from track(items, description=label, transient=True)
