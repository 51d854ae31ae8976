"""`arch: hf-seq2seq`: fine-tune a local Hugging Face encoder-decoder (BART, mBART, T5, Marian, ...).

    model: {arch: hf-seq2seq, pretrained: path/to/local/bart-base, lr_scale: 1.0}
    task: hf-seq2seq          # tokenizes with the checkpoint's own tokenizer (structseq.tasks.hf_seq2seq)

`model.pretrained` is a local folder (model + tokenizer, as `save_pretrained` writes them), loaded with
`AutoModelForSeq2SeqLM.from_pretrained(path, local_files_only=True)`; nothing is downloaded (see
`structseq.models.hf_checkpoint` for what is checked). Ids are the tokenizer's: `pad`, `eos` and the decoder's
first input (`start`, e.g. `</s>` for BART, `<pad>` for T5, the target language code for mBART) come from the
checkpoint (`structseq.models.hf_targets`).

The model meets the incremental protocol with the backbone's own key/value cache:
    encode(inputs)      the backbone's encoder, once per batch
    step(prev, state)   one decoder step with the cache (a transformers `Cache` wrapped in `RowCache`, which
                        `structseq.state.map_state` reorders for beam search); the first step reads `start`,
                        whatever `prev` holds (structseq's search starts every hypothesis from one id)
    forward(batch)      teacher-forced log-probs of `batch["tgt_in"]` (start, y_1 .. y_n) in one pass
so structseq's own `decode/search.py` decodes it. Every weight is pretrained: `param_groups()` gives all of
them `model.lr_scale`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from structseq.fields import option
from structseq.models.base import Autoregressive, Inputs, State, Vocabs, with_width
from structseq.models.hf_checkpoint import RowCache, SpecialIds, cache_keyword, load_seq2seq, output_cache, special_ids
from structseq.nn.attention import without_cudnn_attention
from structseq.registry import HF_EXPORT, register_arch


def model_width(config) -> int:
    """The backbone's model dimension (what the Noam schedule scales by)."""
    return int(getattr(config, "d_model", None) or config.hidden_size)


def encoder_output(memory: Tensor):
    """Encoder states as the transformers models take them back (`encoder_outputs=`)."""
    from transformers.modeling_outputs import BaseModelOutput

    return BaseModelOutput(last_hidden_state=memory)


class PretrainedSeq2Seq(Autoregressive):
    """What both pretrained archs share: the backbone `hf` (a transformers `...ForConditionalGeneration`), its
    special ids, the learning-rate factor of its weights and log-probs from its output layer."""

    def __init__(self, hf, ids: SpecialIds, lr_scale: float):
        super().__init__()
        self.hf = hf
        self.pad, self.eos, self.start = ids.pad, ids.eos, ids.start
        self.lr_scale = lr_scale
        generation = getattr(hf, "generation_config", None)
        if generation is not None and generation.decoder_start_token_id is None:  # e.g. mBART-cc25: the export's
            generation.decoder_start_token_id = ids.start  # generate starts where training did

    def param_groups(self) -> list[dict]:
        """The backbone's weights get `lr_scale`; parameters of structseq's own (if any) 1.0."""
        pretrained = [p for p in self.hf.parameters() if p.requires_grad]
        ids = {id(p) for p in pretrained}
        own = [p for p in self.parameters() if p.requires_grad and id(p) not in ids]
        return [
            g
            for g in ({"params": pretrained, "lr_scale": self.lr_scale}, {"params": own, "lr_scale": 1.0})
            if g["params"]
        ]

    def output_limit(self, inputs: Inputs) -> Tensor | None:
        """Per sentence, the most output tokens before the end token that the decoder's position table holds
        (`max_position_embeddings` - 1: the decoder start takes a position); None for relative positions (T5)."""
        positions = getattr(self.hf.config, "max_position_embeddings", None)
        if not positions:
            return None
        return torch.full((inputs["src"].shape[0],), int(positions) - 1, dtype=torch.long)

    def first_input(self, prev: Tensor, step: int) -> Tensor:
        return torch.full_like(prev, self.start) if step == 0 else prev

    def save_pretrained(self, folder) -> None:
        """The fine-tuned backbone as a Hugging Face folder (safetensors weights and config)."""
        self.hf.save_pretrained(str(folder))


class HFSeq2Seq(PretrainedSeq2Seq):
    sentence_state = frozenset({"src", "src_mask", "memory"})

    def __init__(self, hf, ids: SpecialIds, lr_scale: float = 1.0):
        super().__init__(hf, ids, lr_scale)
        self._cache_key = cache_keyword(hf)

    @without_cudnn_attention
    def forward(self, batch: Inputs) -> Tensor:
        src = batch["src"]
        out = self.hf(
            input_ids=src, attention_mask=src.ne(self.pad).long(), decoder_input_ids=batch["tgt_in"], use_cache=False
        )
        return out.logits.float().log_softmax(-1)

    @without_cudnn_attention
    def encode(self, inputs: Inputs) -> State:
        src = inputs["src"]
        mask = src.ne(self.pad).long()
        memory = self.hf.get_encoder()(input_ids=src, attention_mask=mask).last_hidden_state
        return {"src": src, "src_mask": mask, "memory": memory}

    def init_state(self, enc: State) -> State:
        return {**enc, "cache": RowCache(None), "step": 0}

    @without_cudnn_attention
    def step(self, prev: Tensor, state: State) -> tuple[Tensor, State]:
        t = state["step"]
        out = self.hf(
            encoder_outputs=encoder_output(state["memory"]),
            attention_mask=state["src_mask"],
            decoder_input_ids=self.first_input(prev, t)[:, None],
            use_cache=True,
            **{self._cache_key: state["cache"].cache},
        )
        log_probs = out.logits[:, -1].float().log_softmax(-1)
        return log_probs, {**state, "cache": RowCache(output_cache(out)), "step": t + 1}


# ---------------------------------------------------------------- schema and builder


@dataclass
class HFSeq2SeqConfig:
    """A local Hugging Face encoder-decoder, fine-tuned (task hf-seq2seq: its own tokenizer end to end)."""

    #: keys the builder needs set (a local folder no config check can see); configs and tests that build every
    #: registered arch from its defaults skip an arch that declares them
    build_requires: ClassVar[tuple[str, ...]] = ("pretrained",)
    #: None: the encoder reads the source alone; else it reads source pieces + target pieces + this many more
    #: in one position table, so readers bound that sum by the positions too (`HFSeq2SeqTask.input_measure`)
    fused_extra: ClassVar[int | None] = None

    arch: str = option("hf-seq2seq", "a local Hugging Face encoder-decoder, fine-tuned")
    pretrained: str | None = option(
        None,
        "the local folder of a Hugging Face encoder-decoder (model + tokenizer, "
        "as save_pretrained writes them; BART, mBART, T5, Marian, ...); required "
        "when the model is built; nothing is downloaded (stored absolute in the run)",
        path=True,
    )
    lr_scale: float = option(1.0, "learning-rate factor of the pretrained weights (0 freezes them)", ge=0.0, le=100.0)


@register_arch("hf-seq2seq", config=HFSeq2SeqConfig, tasks=("hf-seq2seq",), capabilities=(HF_EXPORT,))
def build_hf_seq2seq(cfg: HFSeq2SeqConfig, vocabs: Vocabs, train_examples: Sequence | None = None) -> HFSeq2Seq:
    ids = special_ids(cfg.pretrained)
    hf = load_seq2seq(cfg.pretrained)
    return with_width(HFSeq2Seq(hf, ids, cfg.lr_scale), model_width(hf.config))
