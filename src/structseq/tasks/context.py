"""Context-aware sequence to sequence (Wang et al. 2019): a short source S, a long context C, a target T.

Batches hold `src` (S ids + </s>), `ctx` (C ids + </s>; an empty row of padding when an example has no
context) and the teacher-forcing tensors. S and C share the source vocabulary (one encoder reads both);
`<sep>` (the sequential model's separator) and `<brk>` (between context sentences) are always in it.

Task keys: how much context to keep, subword units for real text (`task.subword`, shared with the seq2seq
task: a BPE model learned on the training split or a given tokenizer, applied to S, C and T, saved in every
checkpoint as the task's state and undone before any metric), seeded data augmentation (p1: drop C; p2:
predict C from S), and `reverse` (train T -> S without context: the reverse model of the backward-perplexity
diagnostic).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn

from structseq.data.batching import Batch, encode_source, pad_sequences, target_batch
from structseq.data.example import Example
from structseq.data.limits import BRK
from structseq.data.vocab import SPECIALS, Vocab
from structseq.errors import ConfigError, DataError
from structseq.fields import option
from structseq.models.context import SEP
from structseq.registry import register_metric, register_task
from structseq.tasks.base import Encoded, Vocabs
from structseq.tasks.seq2seq import Seq2SeqTask, Seq2SeqTaskOptions

RESERVED = (SEP, BRK)


@dataclass
class ContextTaskOptions(Seq2SeqTaskOptions):  # subword, subword_vocab_size, tokenizer_path: the seq2seq task's
    type: str = option("context-seq2seq", "context-aware sequence to sequence (source, context, target)")
    context_sentences: int | None = option(
        None,
        "keep the last N '<brk>'-separated context sentences (null: all read; 0: none, a sentence-level model)",
        ge=0,
    )
    max_context_tokens: int | None = option(
        None, "keep the last N context tokens, after subwords (null: all; 0: none)", ge=0, role="context_trim"
    )
    p_drop_context: float = option(
        0.0, "augmentation p1: probability that a training example loses its context", ge=0, le=1
    )
    p_predict_context: float = option(
        0.0,
        "augmentation p2: probability that a training example becomes S -> C (predict the context from the source)",
        ge=0,
        le=1,
    )
    reverse: bool = option(False, "train the reverse model T -> S without context (for backward perplexity)")


@register_task("context-seq2seq")
class ContextSeq2SeqTask(Seq2SeqTask):
    options_class = ContextTaskOptions
    archs = ("context-transformer",)
    keep_tokens = RESERVED

    def __init__(self, cfg):
        super().__init__(cfg)
        o = self.options  # each value's range is its field's (ContextTaskOptions); here what involves two
        if o.p_drop_context + o.p_predict_context > 1:
            raise ConfigError(
                f"'task.p_drop_context' ({o.p_drop_context}) + 'task.p_predict_context' "
                f"({o.p_predict_context}) must not exceed 1: they are probabilities of one draw"
            )

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
            kept = sentences[-o.context_sentences :] if o.context_sentences > 0 else []
            ctx = tuple(t for i, s in enumerate(kept) for t in ([BRK] if i else []) + s) or None
        e = self.to_pieces(replace(e, context=ctx))
        ctx = e.context
        if ctx and o.max_context_tokens is not None:
            ctx = ctx[-o.max_context_tokens :] if o.max_context_tokens > 0 else None
        e = replace(e, context=ctx or None)
        self.check_pieces(e)
        return e

    def check_examples(self, examples: Sequence[Example], where: str) -> None:
        """A target for each example, and a context for at least one unless this model is meant to go without
        (task.reverse, context_sentences 0, max_context_tokens 0, p_drop_context 1): a file with no context
        column would otherwise train or evaluate a context model with no context at all."""
        super().check_examples(examples, where)
        o = self.options
        without = o.reverse or o.context_sentences == 0 or o.max_context_tokens == 0 or o.p_drop_context == 1
        held_out = where.endswith("(held out)")  # a sample of a training split that has contexts
        if examples and not (without or held_out) and not any(e.context for e in examples):
            raise DataError(
                "no example has a context: a context-aware task needs a 'context' column (a TSV header "
                "or data.columns naming it) or document files; to go without on purpose, set "
                "task.context_sentences: 0",
                where,
            )

    def build_vocabs(self, train: Sequence[Example]) -> Vocabs:
        o, d = self.options, self.cfg.data
        self.learn_subword(train)
        prepared = [self.prepare(e) for e in train]
        inputs = [e.source for e in prepared] + [e.context for e in prepared if e.context]
        outputs = [e.target for e in prepared] + (
            [e.context for e in prepared if e.context] if o.p_predict_context > 0 else []
        )
        if d.share_vocab:
            shared = _with_reserved(Vocab.build(inputs + outputs, d.min_freq))
            return {"src": shared, "tgt": shared}
        return {"src": _with_reserved(Vocab.build(inputs, d.min_freq)), "tgt": Vocab.build(outputs, d.min_freq)}

    def encode(self, example: Example, vocabs: Vocabs) -> Encoded:
        e = self.prepare(example)
        out = {
            "src": self.source_ids(vocabs["src"], e.source),
            "tgt": vocabs["tgt"].encode(e.target),
            "ctx": encode_source(vocabs["src"], e.context) if e.context else [],
        }
        if self.options.p_predict_context > 0:
            out["ctx_tgt"] = vocabs["tgt"].encode(e.context or ())
        return out

    def length(self, encoded: Encoded) -> int:
        return max(len(encoded["src"]) + len(encoded["ctx"]) - 1, len(encoded["tgt"]), len(encoded.get("ctx_tgt", ())))

    def collate(self, items: Sequence[Encoded], index: Sequence[int]) -> Batch:
        tgt = [it["tgt"] for it in items]
        tensors = {
            "src": pad_sequences([it["src"] for it in items]),
            "ctx": _pad([it["ctx"] for it in items]),
            **target_batch(tgt),
        }
        return Batch(tensors, index, sum(len(t) + 1 for t in tgt))

    def augmentation_draws(self, index: Sequence[int], step: int) -> list[str]:
        """For each example of training update `step`: "keep", "drop" (p1) or "predict" (p2); a function of
        (train.seed, step, example index) only, so the same run draws the same way, resumed or not."""
        o = self.options
        out = []
        for i in index:
            u = np.random.default_rng([self.cfg.train.seed, step, int(i), 0x5EED]).random()
            out.append(
                "drop" if u < o.p_drop_context else "predict" if u < o.p_drop_context + o.p_predict_context else "keep"
            )
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
    @property
    def reversed_pairs(self) -> bool:
        return self.options.reverse

    def decode_inputs(self, examples: Sequence[Example], vocabs: Vocabs) -> Batch:
        prepared = [self.prepare(e) for e in examples]
        return Batch(
            {
                "src": pad_sequences([self.source_ids(vocabs["src"], e.source) for e in prepared]),
                "ctx": _pad([encode_source(vocabs["src"], e.context) if e.context else [] for e in prepared]),
            }
        )

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

    def metric_inputs(self, examples, predictions, *, dataset: str, split: str, data_root=None):
        """The sequence inputs, with each example's context text in `extras["contexts"]` (`context_use`)."""
        contexts = [e.context_text for e in examples]
        if self.options.reverse:  # the reverse model's outputs are the sources
            examples = [Example(e.target, e.source, e.category, None, e.meta) for e in examples]
        inputs = super().metric_inputs(examples, predictions, dataset=dataset, split=split, data_root=data_root)
        inputs.extras = {**inputs.extras, "contexts": contexts}
        return inputs

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


@register_metric("context_use", scale="fraction")
def context_use_metric(inputs) -> dict | None:
    """Of the context's nouns that the reference contains, the share the output contains too (Wang et al. 2019;
    TextBlob's tagger): a context task's inputs only (`--metric context_use`, `task.metrics`)."""
    from structseq.decode.contrastive import context_use

    contexts = inputs.extras.get("contexts")
    if not contexts or not any(contexts):
        return None
    return context_use(contexts, inputs.ref_text, inputs.hyp_text).to_dict()
