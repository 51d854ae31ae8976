"""The task seam: everything that differs between kinds of problem, behind one interface.

A task (config `task.type`) owns the examples' fields, the vocabularies, tensorising (`encode` once per
example, `collate` into a *named* `Batch`), the length that token-budget batching counts, the loss,
validation, prediction (decoding) and the metrics. The training loop, `api.Run` (`evaluate`, `translate`,
`predict`) and the CLI only call these methods, so a new kind of problem is a new `Task` subclass in
`structseq/tasks/`, a model family and a config, never a fork of the loop or the evaluator.

A task registers its name with `@register_task(NAME)` (`structseq.registry`); models declare the tasks they
serve when they register (`register_arch(..., tasks=...)`), which the config loader checks.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch
from torch import nn

from structseq.config import TaskOptions
from structseq.data.batching import Batch
from structseq.data.example import Example
from structseq.data.vocab import Vocab, Vocabs
from structseq.errors import ConfigError
from structseq.metrics.base import MetricInputs

#: One example's ids, computed once: named lists of ints (e.g. {"src": [...], "tgt": [...]}).
Encoded = dict[str, Any]

#: `structseq predict --format` of a task that writes no formats of its own (sequence outputs)
SEQUENCE_FORMATS = ("text", "json")


class Task(abc.ABC):
    name: ClassVar[str]
    options_class: ClassVar[type] = TaskOptions
    #: early-stopping metrics (train.valid_metric) -> "min" or "max"; `validate` returns `valid_<name>`
    valid_metrics: ClassVar[dict[str, str]] = {"loss": "min"}
    #: the registered metrics (`structseq.registry.METRICS`) its evaluation reports; a dataset adds its own
    metrics: ClassVar[tuple[str, ...]] = ()
    #: `structseq predict --format` values; a task writing its own (a tagger's) sets `own_formats` and
    #: implements `format_outputs`
    output_formats: ClassVar[tuple[str, ...]] = SEQUENCE_FORMATS
    own_formats: ClassVar[bool] = False
    #: the label of decoding's progress bar and lines on stderr (`structseq.decode.run`; "sample" when sampling)
    progress_label: ClassVar[str] = "decode"

    def __init__(self, cfg):
        self.cfg = cfg  # the whole Config
        self.options = cfg.task

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """What the task learned from the training data besides vocabularies (e.g. a subword model), as plain
        types; saved in every checkpoint (`task`) and given back to `load_state_dict` when a run is loaded."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()` (before `build_vocabs` on resume, so that nothing is learned twice)."""

    # ------------------------------------------------------------------ data
    @abc.abstractmethod
    def build_vocabs(self, train: Sequence[Example]) -> Vocabs:
        """Vocabularies from the training examples (saved in every checkpoint by name)."""

    def input_measure(self) -> dict:
        """`data.limits.length_limit` keywords overriding `input_limits(cfg)` where the task counts a source or
        target otherwise than by its tokens (a pretrained tokenizer's pieces against the model's positions), so
        that readers skip (training) or refuse (evaluation, prediction) an over-long example naming its line."""
        return {}

    def check_examples(self, examples: Sequence[Example], where: str) -> None:
        """Raise a DataError naming `where` when examples lack a field the task needs."""

    @abc.abstractmethod
    def encode(self, example: Example, vocabs: Vocabs) -> Encoded:
        """Ids of one example, computed once before training."""

    @abc.abstractmethod
    def length(self, encoded: Encoded) -> int:
        """The padded length this example adds to a batch (what `optim.max_tokens` budgets)."""

    @abc.abstractmethod
    def collate(self, items: Sequence[Encoded], index: Sequence[int]) -> Batch:
        """Pad a list of encoded examples into one named batch."""

    def training_batch(self, items: Sequence[Encoded], index: Sequence[int], step: int) -> Batch:
        """The batch of training update `step` (1-based): `collate` unless the task augments training data.
        Draws must be a function of (train.seed, step, index) so that they are reproducible and survive resume."""
        return self.collate(items, index)

    def batch(self, examples: Sequence[Example], vocabs: Vocabs, index: Sequence[int] | None = None) -> Batch:
        index = range(len(examples)) if index is None else index
        return self.collate([self.encode(e, vocabs) for e in examples], index)

    # ------------------------------------------------------------------ training
    @abc.abstractmethod
    def loss(self, model: nn.Module, batch: Batch, label_smoothing: float) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(summed training loss, summed NLL, number of predicted units) of one batch; the loop normalises
        by the units of the whole update (every accumulated batch, every data-parallel rank)."""

    @abc.abstractmethod
    def validate(self, model: nn.Module, examples: Sequence[Example], vocabs: Vocabs) -> dict[str, float]:
        """`valid_loss` and the task's other `valid_<metric>` values on held-out examples."""

    # ------------------------------------------------------------------ prediction and evaluation
    @abc.abstractmethod
    def predict(
        self,
        model: nn.Module,
        examples: Sequence[Example],
        vocabs: Vocabs,
        *,
        beam: int | None = None,
        show_progress: bool = False,
    ) -> list[Any]:
        """One prediction per example (decoding settings from the config's `decode` section)."""

    # ------------------------------------------------------------------ what generic decoding needs
    def decode_inputs(self, examples: Sequence[Example], vocabs: Vocabs) -> Batch:
        """The named model inputs that search (`structseq.decode.run`) and scoring decode from, without targets."""
        raise ConfigError(f"the {self.name} task has no decoding (n-best lists, sampling, scoring)")

    def decode_batch(self, examples: Sequence[Example], vocabs: Vocabs, index: Sequence[int]) -> Batch:
        """What `structseq.decode.run` searches for the examples at positions `index` of its list: `decode_inputs`
        (whose two-argument form plugin tasks implement), unless the task's errors name an example by `index`."""
        return self.decode_inputs(examples, vocabs)

    def special_ids(self) -> dict:
        """The search's special ids (`eos`, `bos`, `pad`, and `eos_at_limit`) where they are not `Vocab`'s
        (e.g. a pretrained tokenizer's); {}: `Vocab`'s."""
        return {}

    def output_words(self, ids: Sequence[int], vocabs: Vocabs) -> list[str]:
        """Output ids (without </s>) as the task's output words (what metrics and `predict` read)."""
        return vocabs["tgt"].decode(ids)

    def output_space(self, vocabs: Vocabs):
        """What per-step processors know of the outputs (`structseq.decode.processors.OutputSpace`): each output
        id's token, the special ids, and how ids become words where a token is not a word (`detokenize`)."""
        from structseq.decode.processors import OutputSpace

        ids = {"eos": Vocab.eos, "bos": Vocab.bos, "pad": Vocab.pad, **self.special_ids()}
        words = None if self.outputs_are_words() else (lambda out: self.output_words(out, vocabs))
        return OutputSpace(list(vocabs["tgt"].itos), ids["eos"], ids["bos"], ids["pad"], words)

    def outputs_are_words(self) -> bool:
        """Whether each output token is one output word (no subword units): what a grammar over words needs."""
        return True

    def output_tag(self, hyp: Any, vocabs: Vocabs) -> str | None:
        """One word's output from a tagger's search (`structseq.decode.strategies.tagging`: a label id, or a
        tree's {position: symbol id}) as the task's tag; None where it is not a well-formed one."""
        raise ConfigError(f"the {self.name} task has no tagging outputs")

    def output_pieces(self, ids: Sequence[int], vocabs: Vocabs) -> list[str]:
        """Output ids as the model's own tokens (`<unk>` and subword pieces kept), as `score` lists them."""
        return [vocabs["tgt"].itos[i] for i in ids]

    @property
    def reversed_pairs(self) -> bool:
        """The task trains target -> source (the reverse model of backward perplexity)."""
        return False

    def format_outputs(self, fmt: str, lines: Sequence[str], predictions: Sequence[Any]):
        """The lines of `structseq predict --format fmt` for a task with `own_formats`."""
        raise ConfigError(f"'--format {fmt}': the {self.name} task writes no formats of its own")

    def parse_input(self, line: str) -> Example:
        """An example from one line of `structseq predict`'s input (default: the source text)."""
        return Example.from_text(line)

    def format_prediction(self, prediction: Any) -> str:
        """One output line of `structseq predict`."""
        return " ".join(prediction)

    def evaluate(
        self,
        examples: Sequence[Example],
        predictions: Sequence[Any],
        *,
        dataset: str,
        split: str,
        data_root=None,
        metrics: Sequence[str] = (),
    ) -> dict:
        """Every metric this task, the dataset and the config name (`metric_names`) and the `metrics` asked for
        (`--metric`), each with its signature stating its scale, after the task's non-score entries
        (`report_facts`); JSON-able."""
        from structseq.metrics.report import compute_metrics

        inputs = self.metric_inputs(examples, predictions, dataset=dataset, split=split, data_root=data_root)
        names = (*self.metric_names(dataset), *metrics)
        return {**self.report_facts(inputs), **compute_metrics(names, inputs)}

    def metric_names(self, dataset: str) -> tuple[str, ...]:
        """The registered metrics of a report: the task's (`metrics`), then the dataset's (`Dataset.metrics`)."""
        from structseq.data.registry import datasets

        spec = datasets().get(dataset)
        extra = (*(spec.metrics if spec is not None else ()), *self.cfg.task.metrics)
        return tuple(dict.fromkeys((*self.metrics, *extra)))

    def registered_validation(
        self, examples: Sequence[Example], predictions: Sequence[Any], names: Sequence[str] | str
    ) -> dict[str, float]:
        """{`valid_<name>`: score} of registered metrics on validation outputs, each computed as `evaluate`
        computes it (one `MetricInputs` for all): NaN where a metric does not apply, 0.0 for no examples.
        One name may be given as a string (never read letter by letter)."""
        from structseq.metrics.report import compute_metric

        names = (names,) if isinstance(names, str) else names
        if not examples:
            return {f"valid_{name}": 0.0 for name in names}
        inputs = self.metric_inputs(examples, predictions, dataset=self.cfg.data.dataset, split="valid")
        results = {name: compute_metric(name, inputs) for name in dict.fromkeys(names)}
        return {f"valid_{k}": float("nan") if r is None else float(r["score"]) for k, r in results.items()}

    def bleu_tokenize(self, dataset: str) -> str:
        """sacrebleu's tokenizer: `data.bleu_tokenize`, else the dataset's declared one, else 13a."""
        from structseq.data.registry import datasets

        if self.cfg.data.bleu_tokenize:
            return self.cfg.data.bleu_tokenize
        spec = datasets().get(dataset)
        return spec.bleu_tokenize if spec is not None else "13a"

    @property
    def tokenized_output(self) -> bool:
        """Outputs are the data's own whitespace tokens, like its references (sacrebleu need not warn)."""
        return False

    def metric_inputs(
        self, examples: Sequence[Example], predictions: Sequence[Any], *, dataset: str, split: str, data_root=None
    ) -> MetricInputs:
        """What the metrics read: by default the formatted predictions against the targets' text, the sources,
        the categories (when any example has one), the meta fields every example carries, and the dataset."""
        from structseq.data.registry import datasets, load_dataset

        spec = datasets().get(dataset)
        shared = set.intersection(*(set(e.meta) for e in examples)) if examples else set()
        return MetricInputs(
            [self.format_prediction(p) for p in predictions],
            [e.target_text for e in examples],
            sources=[e.source for e in examples],
            categories=[e.category for e in examples] if any(e.category for e in examples) else None,
            meta={k: [e.meta[k] for e in examples] for k in sorted(shared)},
            dataset=dataset,
            split=split,
            data_root=data_root,
            dataset_spec=spec,
            load_split=(lambda name: load_dataset(dataset, name, data_root)) if spec is not None else None,
            bleu_tokenize=self.bleu_tokenize(dataset),
            tokenized=self.tokenized_output,
        )

    def report_facts(self, inputs: MetricInputs) -> dict:
        """What a report holds besides its metrics (default: the number of examples `n`)."""
        return {"n": inputs.n}

    def prediction_rows(
        self, examples: Sequence[Example], predictions: Sequence[Any]
    ) -> tuple[list[str], list[list[str]]]:
        """Header and rows of the predictions TSV that `evaluate` writes."""
        return (
            ["source", "reference", "hypothesis"],
            [[e.source_text, e.target_text, self.format_prediction(p)] for e, p in zip(examples, predictions)],
        )

    def source_length(self, encoded: Encoded) -> int | None:
        """The padded length of the part of an example that `optim.static_shapes` pads to its bucket's longest
        (`pad_batch`'s `source_length`: a seq2seq source); None: every tensor is padded to the bucket's length."""
        return None

    def pad_batch(self, batch: Batch, rows: int, length: int, source_length: int | None = None) -> Batch:
        """`batch` padded to `rows` rows of `length` positions (`optim.static_shapes`; the source part to
        `source_length` where the task has one, see `source_length`), filler rows predicting nothing: the loss,
        its units and the gradients are those of `batch`. Tasks that can, say how."""
        raise ConfigError(f"'optim.static_shapes': the {self.name} task cannot pad its batches to fixed shapes")

    # ------------------------------------------------------------------ devices
    def to_device(self, batch: Batch, device: torch.device) -> Batch:
        return batch.to(device)


def vocab_state(vocabs: Mapping[str, Vocab]) -> dict[str, list[str]]:
    return {k: v.to_list() for k, v in vocabs.items()}
