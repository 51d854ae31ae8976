"""`task: hf-seq2seq`: sequence to sequence with a pretrained checkpoint's own tokenizer, end to end.

The archs `hf-seq2seq` and `rdangle-pretrained` serve this task. It is `Seq2SeqTask` with another tokenisation,
so training (`train/loop.py`), search (`decode/search.py`) and evaluation (`api.Run.evaluate`) stay the ones
every other model uses; what changes:

- ids are the tokenizer's (`model.pretrained`'s AutoTokenizer, local files only), not structseq `Vocab`s built
  from the data. A source is the example's text as the tokenizer encodes it (its special tokens included, e.g.
  `<s> ... </s>` for BART), a target (`tgt_out`, the labels) is `tokenizer(text_target=...)` (eos appended
  only where it adds none), `tgt_in` what the model class's own `prepare_decoder_input_ids_from_labels` makes
  of the labels (`structseq.models.hf_targets`: BART / T5 / Marian shift right after the decoder start, mBART
  wraps the language code to the front), padding is the tokenizer's pad: the labels and decoder inputs
  `model(labels=...)` trains on;
- predictions are decoded by the tokenizer (special tokens skipped) before any metric, so exact match, BLEU
  (with its signature), COGS categories and CTER read the original strings; a prediction is the decoded text's
  whitespace tokens, like a reference (`Example.target`), so `format_prediction` gives the text back;
- decoding lengths (`decode.max_len_a * |x| + b`) count the source's tokenizer pieces;
- a checkpoint's `vocab` holds one record, `tokenizer`: structseq's four special names, then the tokenizer's
  pieces in id order (the loader wants `Vocab`s; the model never reads it); its `task` state holds the base
  folder's path and content hash (`structseq.models.hf_checkpoint.base_digest`), and loading a run (evaluate,
  predict, resume, init_from) refuses a base folder whose hash changed, naming both hashes.
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from structseq.config import TaskOptions
from structseq.data.batching import Batch, pad_sequences
from structseq.data.example import Example
from structseq.data.vocab import SPECIALS, Vocab
from structseq.errors import ConfigError, DataError, StructseqError
from structseq.models.hf_checkpoint import base_digest, checkpoint_folder, load_config, load_tokenizer, special_ids
from structseq.models.hf_targets import DecoderInputs, target_ids
from structseq.nn.loss import label_smoothed_nll
from structseq.registry import register_task
from structseq.tasks.base import Encoded, Task, Vocabs
from structseq.tasks.seq2seq import Seq2SeqTask

POSITIONS = "model.pretrained's max_position_embeddings"  # the setting the position limits come from


def tokenizer_record(tokenizer) -> Vocab:
    """A `Vocab` recording the tokenizer's pieces (structseq's specials first, then the pieces in id order)."""
    pieces = sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
    return Vocab(list(SPECIALS) + [p for p, _ in pieces if p not in SPECIALS])


@register_task("hf-seq2seq")
class HFSeq2SeqTask(Seq2SeqTask):
    options_class = TaskOptions  # the tokenizer is the checkpoint's: no subword keys of seq2seq's own

    def __init__(self, cfg):
        super().__init__(cfg)
        self._tokenizer = self._ids = self._digest = self._limit = self._decoder_inputs = None

    # ------------------------------------------------------------------ the checkpoint
    @property
    def folder(self) -> str:
        path = getattr(self.cfg.model, "pretrained", None)
        if not path:
            raise ConfigError(
                "'model.pretrained' is required: task hf-seq2seq tokenizes with a local Hugging Face "
                "checkpoint's tokenizer (arch hf-seq2seq or rdangle-pretrained)"
            )
        return path

    @property
    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.folder)
        return self._tokenizer

    @property
    def ids(self):
        if self._ids is None:
            self._ids = special_ids(self.folder)
        return self._ids

    @property
    def decoder_inputs(self) -> DecoderInputs:
        """The backbone's own rule from labels to decoder inputs."""
        if self._decoder_inputs is None:
            self._decoder_inputs = DecoderInputs(load_config(self.folder))
        return self._decoder_inputs

    @property
    def digest(self) -> str:
        if self._digest is None:
            self._digest = base_digest(checkpoint_folder(self.folder))
        return self._digest

    def state_dict(self) -> dict:
        return {"pretrained": str(self.folder), "base_sha256": self.digest}

    def load_state_dict(self, state: dict) -> None:
        """A run's base folder must be the one it was trained on (same content hash)."""
        saved = (state or {}).get("base_sha256")
        if saved is None:
            return
        now = base_digest(checkpoint_folder(self.folder))
        if now != saved:
            raise StructseqError(
                f"the base checkpoint folder {self.folder} changed since this run was trained: its "
                f"content hash is now {now}, the run was trained on {saved}; restore the folder "
                "the run was trained on (or train again)"
            )
        self._digest = saved

    # ------------------------------------------------------------------ data
    def build_vocabs(self, train: Sequence[Example]) -> Vocabs:
        _ = self.digest  # fingerprint the base folder as training starts
        return {"tokenizer": tokenizer_record(self.tokenizer)}

    def _positions(self) -> int:
        if self._limit is None:
            self._limit = getattr(load_config(self.folder), "max_position_embeddings", None) or 0
        return self._limit

    def input_measure(self) -> dict:
        """Sources and targets count tokenizer pieces against the model's positions (or data.max_length, when
        smaller), so that training skips an over-long example with a warning and evaluation or prediction
        refuses it, naming its file:line; a model without a position table (T5) keeps the token limits. An
        arch whose encoder reads source and target in one position table (`fused_extra`) bounds their sum too."""
        positions = self._positions()
        if not positions:
            return {}
        most = min(positions, self.cfg.data.max_length or positions)
        key = "data.max_length" if most < positions else POSITIONS
        limits = {"max_length": most, "length_key": key, "measure": self._count, "unit": "tokenizer pieces"}
        if self.cfg.model.fused_extra is not None:
            limits.update(fused=self._fused, max_fused=positions, fused_key=POSITIONS)
        return limits

    def _count(self, side: str, tokens) -> int:
        return len(self._text_ids(" ".join(tokens), side == "target"))

    def _fused(self, example: Example) -> int:
        """Source pieces + target pieces (an empty target: its end alone) + the arch's `fused_extra`."""
        pieces = self._count("source", example.source) + self._count("target", example.target)
        return pieces + self.cfg.model.fused_extra

    def _text_ids(self, text: str, target: bool) -> list[int]:
        return target_ids(self.tokenizer, text, self.ids.eos) if target else self.tokenizer(text)["input_ids"]

    def _pieces(self, text: str, target: bool = False) -> list[int]:
        ids = self._text_ids(text, target)
        if self._positions() and len(ids) > self._limit:
            side = "target" if target else "source"
            raise DataError(
                f"{side} {text[:60]!r}... has {len(ids)} tokenizer pieces, more than the model's "
                f"{self._limit} positions; lower data.max_length"
            )
        return ids

    def encode(self, example: Example, vocabs: Vocabs) -> Encoded:
        return {"src": self._pieces(example.source_text), "tgt": self._pieces(example.target_text, target=True)}

    def pad_batch(self, batch: Batch, rows: int, length: int, source_length: int | None = None) -> Batch:
        """Not offered: the checkpoint's padding and start ids would have to fill the rows (`optim.num_buckets`
        alone still mixes examples of similar length)."""
        return Task.pad_batch(self, batch, rows, length)

    def length(self, encoded: Encoded) -> int:
        return max(len(encoded["src"]), len(encoded["tgt"]))

    def collate(self, items: Sequence[Encoded], index: Sequence[int]) -> Batch:
        pad = self.ids.pad
        tgt = [it["tgt"] for it in items]
        labels = pad_sequences(tgt, pad)
        return Batch(
            {
                "src": pad_sequences([it["src"] for it in items], pad),
                "tgt_in": self.decoder_inputs(labels),
                "tgt_out": labels,
            },
            index,
            sum(len(t) for t in tgt),
        )

    # ------------------------------------------------------------------ training
    def loss(self, model: nn.Module, batch: Batch, label_smoothing: float):
        loss, nll = label_smoothed_nll(model(batch), batch["tgt_out"], label_smoothing, pad=self.ids.pad)
        return loss, nll, batch.num_tokens

    def validation_nll(self, model: nn.Module, batch: Batch) -> tuple[float, int]:
        """The training loss's NLL: a pretrained model's outputs are not masked (no `head.mask_special`)."""
        _, nll, n = self.loss(model, batch, 0.0)
        return float(nll), n

    # ------------------------------------------------------------------ prediction
    def decode_inputs(self, examples: Sequence[Example], vocabs: Vocabs) -> Batch:
        return Batch({"src": pad_sequences([self._pieces(e.source_text) for e in examples], self.ids.pad)})

    def special_ids(self) -> dict:
        """The checkpoint's ids; bos=pad: search bans only padding (the model's first step reads the decoder
        start itself); </s> forced at the length limit only where the generation config says so."""
        ids = self.ids
        return {"eos": ids.eos, "bos": ids.pad, "pad": ids.pad, "eos_at_limit": ids.eos_at_limit}

    def output_words(self, ids: Sequence[int], vocabs: Vocabs) -> list[str]:
        return self.detokenize(ids)

    def output_pieces(self, ids: Sequence[int], vocabs: Vocabs) -> list[str]:
        return list(self.tokenizer.convert_ids_to_tokens(list(ids)))

    def outputs_are_words(self) -> bool:
        return False

    def output_space(self, vocabs: Vocabs):
        """The tokenizer's pieces (every id it knows), the checkpoint's special ids, words by `detokenize`."""
        from structseq.decode.processors import OutputSpace

        pieces = list(self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer)))))
        return OutputSpace(pieces, self.ids.eos, self.ids.pad, self.ids.pad, self.detokenize)

    def detokenize(self, ids: Sequence[int]) -> list[str]:
        """Output ids as the text's whitespace tokens (special tokens skipped)."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True, clean_up_tokenization_spaces=False).split()
