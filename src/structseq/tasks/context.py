"""Context-aware sequence to sequence (Wang et al. 2019): a short source S, a long context C, a target T.

Batches hold `src` (S ids + </s>), `ctx` (C ids + </s>; an empty row of padding when an example has no
context) and the teacher-forcing tensors. S and C share the source vocabulary (one encoder reads both);
`<sep>` (the sequential model's separator) and `<brk>` (between context sentences) are always in it.

Task keys: how much context to keep, subword units for real text (a BPE model learned on the training
split with Hugging Face `tokenizers`, applied to S, C and T, saved in every checkpoint as the task's state
and undone before any metric), seeded data augmentation (p1: drop C; p2: predict C from S), and `reverse`
(train T -> S without context: the reverse model of the backward-perplexity diagnostic).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from structseq.config import _f
from structseq.data.batching import Batch, encode_source, pad_sequences, target_batch
from structseq.data.context import BRK
from structseq.data.example import Example
from structseq.data.vocab import SPECIALS, Vocab
from structseq.errors import ConfigError, DataError
from structseq.models.context import SEP
from structseq.tasks.base import Encoded, TaskOptions, Vocabs
from structseq.tasks.seq2seq import Seq2SeqTask

RESERVED = (SEP, BRK)


@dataclass
class ContextTaskOptions(TaskOptions):
    type: str = _f("context-seq2seq", "context-aware sequence to sequence (source, context, target)")
    context_sentences: int | None = _f(None, "keep the last N '<brk>'-separated context sentences (null: all read)")
    max_context_tokens: int | None = _f(None, "keep the last N context tokens, after subwords (null: all)")
    p_drop_context: float = _f(0.0, "augmentation p1: probability that a training example loses its context")
    p_predict_context: float = _f(0.0, "augmentation p2: probability that a training example becomes S -> C "
                                       "(predict the context from the source)")
    subword: str = _f("none", "none | bpe (Hugging Face tokenizers, learned on the training split)")
    subword_vocab_size: int = _f(8000, "BPE vocabulary size (pieces), one model for source, context and target")
    reverse: bool = _f(False, "train the reverse model T -> S without context (for backward perplexity)")


class ContextSeq2SeqTask(Seq2SeqTask):
    name = "context-seq2seq"
    options_class = ContextTaskOptions
    archs = ("context-transformer",)

    @property
    def tokenized_output(self) -> bool:
        return self.subword is None  # with subwords, outputs are detokenised text: keep sacrebleu's check

    def __init__(self, cfg):
        super().__init__(cfg)
        o = self.options
        if not (0 <= o.p_drop_context <= 1 and 0 <= o.p_predict_context <= 1
                and o.p_drop_context + o.p_predict_context <= 1):
            raise ConfigError("'task.p_drop_context' and 'task.p_predict_context' must be probabilities summing to <= 1")
        if o.subword not in ("none", "bpe"):
            raise ConfigError(f"'task.subword': unknown '{o.subword}'; choices: none, bpe")
        self.subword = None  # a `Subword` once learned (build_vocabs) or loaded (load_state_dict)

    # ------------------------------------------------------------------ task state (saved in checkpoints)
    def state_dict(self) -> dict:
        return {"subword": self.subword.to_str()} if self.subword is not None else {}

    def load_state_dict(self, state: dict) -> None:
        from structseq.data.subword import Subword

        if state.get("subword"):
            self.subword = Subword.from_str(state["subword"], keep=RESERVED)

    # ------------------------------------------------------------------ data
    def prepare(self, e: Example) -> Example:
        """The example the model sees: reversed, context trimmed, subword pieces."""
        o = self.options
        if o.reverse:
            e = Example(e.target, e.source, e.category, None, e.meta)
        ctx = e.context
        if ctx and o.context_sentences is not None:
            sentences, cur = [], []
            for t in ctx:
                if t == BRK:
                    sentences.append(cur)
                    cur = []
                else:
                    cur.append(t)
            sentences.append(cur)
            kept = sentences[-o.context_sentences:] if o.context_sentences > 0 else []
            ctx = tuple(t for i, s in enumerate(kept) for t in ([BRK] if i else []) + s) or None
        if self.subword is not None:
            sw = self.subword
            e = Example(sw.encode(e.source), sw.encode(e.target), e.category, None if ctx is None else sw.encode(ctx),
                        e.meta)
            ctx = e.context
        if ctx and o.max_context_tokens is not None:
            ctx = ctx[-o.max_context_tokens:] if o.max_context_tokens > 0 else None
        return replace(e, context=ctx or None)

    def finish(self, tokens: Sequence[str]) -> list[str]:
        """Model output tokens -> words (subwords undone)."""
        return list(self.subword.decode(tokens)) if self.subword is not None else list(tokens)

    def build_vocabs(self, train: Sequence[Example]) -> Vocabs:
        o, d = self.options, self.cfg.data
        if o.subword == "bpe" and self.subword is None:
            from structseq.data.subword import Subword

            sides = ((e.source, e.target, e.context or ()) for e in train)
            self.subword = Subword.learn((s for triple in sides for s in triple), o.subword_vocab_size, keep=RESERVED)
        prepared = [self.prepare(e) for e in train]
        inputs = [e.source for e in prepared] + [e.context for e in prepared if e.context]
        outputs = [e.target for e in prepared] + ([e.context for e in prepared if e.context]
                                                  if o.p_predict_context > 0 else [])
        if d.share_vocab:
            shared = _with_reserved(Vocab.build(inputs + outputs, d.min_freq))
            return {"src": shared, "tgt": shared}
        return {"src": _with_reserved(Vocab.build(inputs, d.min_freq)), "tgt": Vocab.build(outputs, d.min_freq)}

    def encode(self, example: Example, vocabs: Vocabs) -> Encoded:
        e = self.prepare(example)
        out = {"src": encode_source(vocabs["src"], e.source), "tgt": vocabs["tgt"].encode(e.target),
               "ctx": encode_source(vocabs["src"], e.context) if e.context else []}
        if self.options.p_predict_context > 0:
            out["ctx_tgt"] = vocabs["tgt"].encode(e.context or ())
        return out

    def length(self, encoded: Encoded) -> int:
        return max(len(encoded["src"]) + len(encoded["ctx"]) - 1, len(encoded["tgt"]),
                   len(encoded.get("ctx_tgt", ())))

    def collate(self, items: Sequence[Encoded], index: Sequence[int]) -> Batch:
        tgt = [it["tgt"] for it in items]
        tensors = {"src": pad_sequences([it["src"] for it in items]), "ctx": _pad([it["ctx"] for it in items]),
                   **target_batch(tgt)}
        return Batch(tensors, index, sum(len(t) + 1 for t in tgt))

    def augmentation_draws(self, index: Sequence[int], step: int) -> list[str]:
        """For each example of training update `step`: "keep", "drop" (p1) or "predict" (p2); a function of
        (train.seed, step, example index) only, so the same run draws the same way, resumed or not."""
        o = self.options
        out = []
        for i in index:
            u = np.random.default_rng([self.cfg.train.seed, step, int(i), 0x5EED]).random()
            out.append("drop" if u < o.p_drop_context else
                       "predict" if u < o.p_drop_context + o.p_predict_context else "keep")
        return out

    def training_batch(self, items: Sequence[Encoded], index: Sequence[int], step: int) -> Batch:
        o = self.options
        if o.p_drop_context == 0 and o.p_predict_context == 0:
            return self.collate(items, index)
        changed = []
        for it, draw in zip(items, self.augmentation_draws(index, step)):
            if draw == "drop":
                it = {**it, "ctx": []}
            elif draw == "predict" and it["ctx"]:
                it = {**it, "ctx": [], "tgt": it["ctx_tgt"]}
            changed.append(it)
        return self.collate(changed, index)

    # ------------------------------------------------------------------ prediction
    def decode_inputs(self, examples: Sequence[Example], vocabs: Vocabs) -> Batch:
        prepared = [self.prepare(e) for e in examples]
        return Batch({"src": pad_sequences([encode_source(vocabs["src"], e.source) for e in prepared]),
                      "ctx": _pad([encode_source(vocabs["src"], e.context) if e.context else [] for e in prepared])})

    @torch.no_grad()
    def predict(self, model: nn.Module, examples: Sequence[Example], vocabs: Vocabs, *, beam: int | None = None,
                show_progress: bool = False) -> list[list[str]]:
        return [self.finish(p) for p in super().predict(model, examples, vocabs, beam=beam, show_progress=show_progress)]

    @torch.no_grad()
    def validate(self, model: nn.Module, examples: Sequence[Example], vocabs: Vocabs) -> dict[str, float]:
        if self.options.reverse:  # exact match against the reversed targets
            examples = [Example(e.target, e.source, e.category, None, e.meta) for e in examples]
            reverse, self.options.reverse = True, False
            try:
                return super().validate(model, examples, vocabs)
            finally:
                self.options.reverse = reverse
        return super().validate(model, examples, vocabs)

    def parse_input(self, line: str) -> Example:
        """`source<TAB>context` (the context may be absent or empty)."""
        source, _, context = line.partition("\t")
        if "\t" in context:
            raise DataError("expected 'source<TAB>context', found more than two columns")
        return Example.from_text(source, context=context if context.strip() else None)

    def evaluate(self, examples, predictions, *, dataset: str, split: str, data_root=None,
                 bleu_tokenize: str | None = None) -> dict:
        if self.options.reverse:
            examples = [Example(e.target, e.source, e.category, None, e.meta) for e in examples]
        return super().evaluate(examples, predictions, dataset=dataset, split=split, data_root=data_root,
                                bleu_tokenize=bleu_tokenize)

    def prediction_rows(self, examples, predictions):
        header, rows = super().prediction_rows(examples, predictions)
        return header + ["context"], [r + [e.context_text] for r, e in zip(rows, examples)]


def _with_reserved(vocab: Vocab) -> Vocab:
    extra = [t for t in RESERVED if t not in vocab]
    return Vocab(vocab.itos + extra) if extra else vocab


def _pad(seqs: Sequence[Sequence[int]]) -> torch.Tensor:
    """Like `pad_sequences`, allowing every row to be empty ((B, 0))."""
    if not any(seqs):
        return torch.zeros(len(seqs), 0, dtype=torch.long)
    return pad_sequences(seqs)


__all__ = ["ContextSeq2SeqTask", "ContextTaskOptions", "SPECIALS"]
