"""Supertagging: one category per word (`Example.target`), predicted by a token classifier
(`supertag-classifier`) or built node by node as a tree (`supertag-tree`, Kogkalidis & Moortgat 2023).

Batches: `words` (B, W), `chars` (B, W, C) (or `pieces`, `piece_word`, `piece_mask` for a pretrained
encoder), `cat` (B, W) category ids (classifier; unknown categories are padding), and the gold tree nodes
of every word flattened in depth order: `node_word` (flat row b * W + w), `node_pos`, `node_sym`, with
`depth_counts` (nodes per depth). The loss unit is the word (a tree's node losses are summed, as the paper
normalises by the number of trees).

A prediction is a `Tagged`: per word the k-best categories with log-probabilities (k = decode.beam; 1 is
greedy). `structseq predict` writes `word|category` tokens, or with `task.beta` > 0 the multi-tagger
format `word|cat1|p1|cat2|p2...` (every category within a factor beta of the best); `--format` chooses
C&C `word|POS|cat`, multi-tags, JSON or CoNLL columns instead (`structseq.tasks.supertag_formats`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from structseq.config import TaskOptions
from structseq.data.batching import Batch, pad_sequences
from structseq.data.categories import (
    CategoryError,
    canonical,
    from_nodes,
    is_binary,
    nodes,
    parse_category,
    print_category,
)
from structseq.data.example import Example
from structseq.data.training import load_training_data
from structseq.data.vocab import Vocab
from structseq.errors import DataError
from structseq.fields import option
from structseq.metrics.base import MetricInputs
from structseq.models.supertag_encoders import load_pretrained, max_pieces
from structseq.nn.loss import label_smoothed_nll
from structseq.registry import ARCHS, TREES, register_task
from structseq.tasks.base import Encoded, Task, Vocabs
from structseq.tasks.supertag_formats import FORMATS


@dataclass
class SupertagOptions(TaskOptions):
    type: str = option("supertag", "task")
    beta: float = option(
        0.0,
        "predict output: every category within a factor beta of the best, written "
        "word|cat1|p1|cat2|p2... (0: the single best, word|cat); needs decode.beam > 1 for "
        "more than one category",
        ge=0.0,
        le=1.0,
    )
    betas: list[float] = option(
        [1.0, 0.1, 0.01, 0.001, 0.0001],
        "evaluate: the multi-tagger curve's betas (with beam > 1), each in (0, 1]",
        gt=0.0,
        le=1.0,
    )
    max_tags: int = option(50, "multi-tagging: at most this many categories per word", ge=1)


@dataclass
class Tagged:
    """A tagged sentence: per word the k-best (category, log-prob) list, best first; `repaired`: per word,
    whether the tree decoder's unconstrained choice would have been ill-formed somewhere."""

    words: tuple[str, ...]
    kbest: list[list[tuple[str, float]]]
    repaired: list[bool] = field(default_factory=list)

    @property
    def best(self) -> list[str]:
        return [k[0][0] if k else "?" for k in self.kbest]


def _canonical(cat: str) -> str:
    try:
        return canonical(cat)
    except CategoryError:
        return cat


@register_task("supertag")
class SupertagTask(Task):
    options_class = SupertagOptions
    valid_metrics = {"loss": "min", "accuracy": "max"}
    metrics = (
        "accuracy",
        "sentence_accuracy",
        "accuracy_frequent",
        "accuracy_uncommon",
        "accuracy_rare",
        "accuracy_unseen",
        "oracle_accuracy",
    )
    output_formats = FORMATS  # `structseq predict --format` (structseq.tasks.supertag_formats)
    progress_label = "tag"  # what `structseq predict` showed before the tagger decoded through decode.run
    own_formats = True

    def __init__(self, cfg):
        super().__init__(cfg)
        self._tokenizer = None
        self._max_pieces = 0
        self._train_counts: Counter | None = None

    def format_outputs(self, fmt: str, lines: Sequence[str], predictions: Sequence) -> list[str]:
        from structseq.tasks.supertag_formats import format_tagged

        return list(format_tagged(fmt, self, lines, predictions))

    @property
    def is_tree(self) -> bool:
        return TREES in ARCHS.get(self.cfg.model.arch).capabilities

    # ------------------------------------------------------------------ data
    def build_vocabs(self, train: Sequence[Example]) -> Vocabs:
        d = self.cfg.data
        trees = [parse_category(c) for e in train for c in e.target]
        syms = {s for t in trees for _, s in nodes(t)}
        sym = list(Vocab.build([]).itos) + sorted(syms, key=lambda s: (is_binary(s), s))  # binary ids last
        return {
            "words": Vocab.build((e.source for e in train), d.min_freq),
            "chars": Vocab.build(list(w) for e in train for w in e.source),
            "cat": Vocab.build(tuple(_canonical(c) for c in e.target) for e in train),
            "sym": Vocab(sym),
        }

    def check_examples(self, examples: Sequence[Example], where: str) -> None:
        """Every example has one category per word, each a category (at most `MAX_DEPTH` deep)."""
        for i, e in enumerate(examples):
            if not e.source or len(e.target) != len(e.source):
                raise DataError(f"example {i + 1} has {len(e.source)} words but {len(e.target)} categories", where)
            for c in e.target:
                try:
                    parse_category(c)
                except CategoryError as err:
                    raise DataError(f"example {i + 1}: bad category: {err}", where) from None

    @property
    def tokenizer(self):
        """The pretrained encoder's tokenizer (local files only; a missing folder is a ConfigError)."""
        if self._tokenizer is None:
            path = self.cfg.model.encoder.pretrained
            self._tokenizer = load_pretrained(path, "tokenizer")
            self._max_pieces = max_pieces(path, self._tokenizer)
        return self._tokenizer

    def encode(self, example: Example, vocabs: Vocabs) -> Encoded:
        """Ids of one sentence. With a pretrained encoder, a sentence of more subword pieces than the encoder has
        positions is a DataError (never truncated: no word is dropped silently); `batch` names its number."""
        out: Encoded = {"n": len(example.source)}
        enc = self.cfg.model.encoder
        if enc.pretrained:
            tok = self.tokenizer(list(example.source), is_split_into_words=True, truncation=False)
            if len(tok["input_ids"]) > self._max_pieces:
                start = " ".join(example.source[:6])
                raise DataError(
                    f"the sentence '{start} ...' of {len(example.source)} words is "
                    f"{len(tok['input_ids'])} subword pieces, more than the {self._max_pieces} positions "
                    f"of the encoder {enc.pretrained}: split it (nothing is truncated)"
                )
            out["pieces"] = tok["input_ids"]
            out["piece_word"] = [-1 if w is None else w for w in tok.word_ids()]
        else:
            out["words"] = vocabs["words"].encode(example.source)
            out["chars"] = [vocabs["chars"].encode(list(w[: enc.max_chars])) for w in example.source]
        if example.target:
            out["cat"] = vocabs["cat"].encode([_canonical(c) for c in example.target])
            sym = vocabs["sym"]
            out["nodes"] = [
                (w, k, sym.stoi.get(s, Vocab.pad))  # an unseen symbol is not scored
                for w, c in enumerate(example.target)
                for k, s in nodes(parse_category(c))
            ]
        return out

    def batch(self, examples: Sequence[Example], vocabs: Vocabs, index: Sequence[int] | None = None) -> Batch:
        """`Task.batch`; a sentence that cannot be encoded is a DataError naming its number (1-based: the input
        line of `structseq predict`)."""
        index = range(len(examples)) if index is None else index
        items = []
        for i, e in zip(index, examples):
            try:
                items.append(self.encode(e, vocabs))
            except DataError as err:
                raise DataError(f"sentence {i + 1}: {err}") from None
        return self.collate(items, index)

    def length(self, encoded: Encoded) -> int:
        return len(encoded["pieces"]) if "pieces" in encoded else encoded["n"]

    def collate(self, items: Sequence[Encoded], index: Sequence[int]) -> Batch:
        W = max(it["n"] for it in items)
        t: dict[str, torch.Tensor] = {}
        if "pieces" in items[0]:
            pad = self.tokenizer.pad_token_id or 0
            t["pieces"] = pad_sequences([it["pieces"] for it in items], pad)
            t["piece_word"] = pad_sequences([it["piece_word"] for it in items], -1)
            t["piece_mask"] = pad_sequences([[1] * len(it["pieces"]) for it in items], 0).bool()
        else:
            t["words"] = pad_sequences([it["words"] for it in items])
            C = max(len(c) for it in items for c in it["chars"])
            chars = torch.zeros(len(items), W, C, dtype=torch.long)
            for b, it in enumerate(items):
                for w, c in enumerate(it["chars"]):
                    chars[b, w, : len(c)] = torch.as_tensor(c)
            t["chars"] = chars
        t["word_mask"] = pad_sequences([[1] * it["n"] for it in items], 0).bool()
        if "cat" in items[0]:
            cat = pad_sequences([it["cat"] for it in items])
            t["cat"] = cat.masked_fill(cat.eq(Vocab.unk), Vocab.pad)
            rows = np.array(
                [(k.bit_length() - 1, b * W + w, k, s) for b, it in enumerate(items) for w, k, s in it["nodes"]],
                dtype=np.int64,
            )
            rows = rows[np.lexsort((rows[:, 2], rows[:, 1], rows[:, 0]))]  # by depth, then word, then position
            t["node_word"], t["node_pos"], t["node_sym"] = (torch.from_numpy(rows[:, i].copy()) for i in (1, 2, 3))
            t["depth_counts"] = torch.from_numpy(np.bincount(rows[:, 0]))
        return Batch(t, index, sum(it["n"] for it in items))

    # ------------------------------------------------------------------ training
    def loss(self, model: nn.Module, batch: Batch, label_smoothing: float):
        # the arch, not the model object, says which targets: the loop may pass a DistributedDataParallel wrapper
        target = batch["node_sym"] if self.is_tree else batch["cat"]
        loss, nll = label_smoothed_nll(model(batch), target, label_smoothing)
        return loss, nll, batch.num_tokens

    @torch.no_grad()
    def validate(self, model: nn.Module, examples: Sequence[Example], vocabs: Vocabs) -> dict[str, float]:
        """Loss per word (teacher forced), greedy whole-category word accuracy as a percent (100 x the registered
        `accuracy`, counted here: that metric's inputs read the training split's counts), and a registered
        metric that `task.metrics` adds when train.valid_metric names it."""
        total, words = 0.0, 0
        device = next(model.parameters()).device
        bs = self.cfg.decode.batch_size
        for start in range(0, len(examples), bs):
            chunk = examples[start : start + bs]
            b = self.to_device(self.batch(chunk, vocabs, range(start, start + len(chunk))), device)
            _, nll, n = self.loss(model, b, 0.0)
            total, words = total + float(nll), words + n
        preds = self.predict(model, examples, vocabs, beam=1)
        ok = sum(p == _canonical(g) for t, e in zip(preds, examples) for p, g in zip(t.best, e.target))
        out = {"valid_loss": total / max(words, 1), "valid_accuracy": 100.0 * ok / max(words, 1)}
        name = self.cfg.train.valid_metric
        if f"valid_{name}" not in out:  # another registered metric (task.metrics)
            out.update(self.registered_validation(examples, preds, (name,)))
        return out

    # ------------------------------------------------------------------ prediction
    def decode_inputs(self, examples: Sequence[Example], vocabs: Vocabs) -> Batch:
        """The batch of the sentences alone (no categories)."""
        return self.decode_batch(examples, vocabs, range(len(examples)))

    def decode_batch(self, examples: Sequence[Example], vocabs: Vocabs, index: Sequence[int]) -> Batch:
        """`decode_inputs`, whose errors name a sentence by `index` (1-based)."""
        return self.batch([Example(e.source) for e in examples], vocabs, index)

    def output_tag(self, hyp, vocabs: Vocabs) -> str | None:
        """A tree's {position: symbol id} as its category (None: not a tree), or a classifier's category id."""
        if self.is_tree:
            tree = from_nodes({p: vocabs["sym"].itos[s] for p, s in hyp.items()})
            return None if tree is None else print_category(tree)
        return vocabs["cat"].itos[hyp]

    @torch.no_grad()
    def predict(
        self,
        model: nn.Module,
        examples: Sequence[Example],
        vocabs: Vocabs,
        *,
        beam: int | None = None,
        show_progress: bool = False,
    ) -> list[Tagged]:
        """Each sentence's k-best categories per word (k = decode.beam) from the one decoding loop: the
        strategy `decode.strategy` names, by default `tree-greedy` / `tree-beam` or the classifier's
        `tag-kbest` (`structseq.decode.strategies.tagging`)."""
        from structseq.decode.batched import run

        was_training = model.training
        model.eval()
        try:
            tagged = run(model, self, examples, self.cfg.decode, vocabs=vocabs, beam=beam, show_progress=show_progress)
        finally:
            model.train(was_training)
        return [Tagged(e.source, t.kbest, t.repaired) for e, t in zip(examples, tagged)]

    def parse_input(self, line: str) -> Example:
        """Space-separated words; `word|...` tokens (a tagged file) are read as their word."""
        return Example(tuple(t.split("|")[0] if "|" in t[1:] else t for t in line.split()))

    def format_prediction(self, prediction: Tagged) -> str:
        """`word|cat` tokens, or with `task.beta` > 0 the multi-tags of `supertag_formats.format_multi`; the other
        formats of `structseq predict --format` are in `structseq.tasks.supertag_formats`."""
        from structseq.tasks.supertag_formats import format_multi

        o = self.options
        if o.beta <= 0:
            return " ".join(f"{w}|{c}" for w, c in zip(prediction.words, prediction.best))
        return format_multi(prediction.words, prediction.kbest, o.beta, o.max_tags)

    # ------------------------------------------------------------------ evaluation
    def train_counts(self, data_root=None) -> Counter:
        """Training frequency of each category (the training split as the config defines it)."""
        if self._train_counts is None:
            train = load_training_data(self.cfg, self, data_root).train
            self._train_counts = Counter(_canonical(c) for e in train for c in e.target)
        return self._train_counts

    def metric_inputs(self, examples, predictions, *, dataset: str, split: str, data_root=None) -> MetricInputs:
        """Gold categories against the best ones, with the k-best lists and the training counts as `extras`."""
        d = self.cfg.data
        return MetricInputs(
            [p.best for p in predictions],
            [[_canonical(c) for c in e.target] for e in examples],
            sources=[e.source for e in examples],
            dataset=dataset,
            split=split,
            data_root=data_root,
            extras={
                "kbest": [p.kbest for p in predictions],
                "train_counts": self.train_counts(data_root),
                "betas": self.options.betas,
                "max_tags": self.options.max_tags,
                "beam": max((len(kb) for p in predictions for kb in p.kbest), default=1),
                "repaired": [p.repaired for p in predictions] if self.is_tree else None,
                "train_name": f"{d.dataset}/{d.train}",
            },
        )

    def report_facts(self, inputs: MetricInputs) -> dict:
        """Unseen categories predicted (and right), ill-formed choices repaired, the multi-tagger curve and the
        signature the scores share."""
        from structseq.metrics.supertag import supertag_facts

        return supertag_facts(inputs)

    def prediction_rows(self, examples, predictions):
        rows = []
        for e, p in zip(examples, predictions):
            gold = [_canonical(c) for c in e.target]
            rows.append(
                [e.source_text, " ".join(gold), " ".join(p.best), str(sum(a == b for a, b in zip(gold, p.best)))]
            )
        return ["source", "reference", "hypothesis", "correct_words"], rows
