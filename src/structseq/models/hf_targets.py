"""Targets in a pretrained backbone's own convention: structseq trains on what `model(labels=...)` trains on.

- labels: what the tokenizer gives for the target text (`tokenizer(text_target=...)`): BART `<s> y </s>`,
  T5 and Marian `y </s>`, mBART with language codes `y </s> ro_RO`, mBART-50 `ro_RO y </s>`; an end token is
  appended only where the tokenizer adds none (the search stops there);
- decoder inputs: the model class's own `prepare_decoder_input_ids_from_labels` (the rule its `forward` applies
  to `labels`, and transformers' `DataCollatorForSeq2Seq`): BART, T5, Marian shift right after
  `decoder_start_token_id`; mBART wraps the last label (the language code) to the front;
- the decoder's first input when decoding: the first decoder input that rule gives for the tokenizer's targets,
  so decoding starts where training did.

The rule is read from the model class built on the meta device (no weights, no memory), so the task needs no
model; a class without the method gets transformers' generic shift after `decoder_start_token_id`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from structseq.errors import ConfigError


def target_ids(tokenizer, text: str, eos: int) -> list[int]:
    """The labels of a target text, as the tokenizer makes them (with an end token appended where it adds none)."""
    ids = list(tokenizer(text_target=text)["input_ids"])
    return ids if eos in ids else [*ids, eos]


class DecoderInputs:
    """labels (B, T), padded with the pad id -> decoder inputs (B, T), by the backbone's own rule."""

    def __init__(self, config):
        from transformers import AutoModelForSeq2SeqLM

        self.config = config
        with torch.device("meta"):
            model = AutoModelForSeq2SeqLM.from_config(config, trust_remote_code=False)
        self._rule = getattr(model, "prepare_decoder_input_ids_from_labels", None)

    def __call__(self, labels: Tensor) -> Tensor:
        if self._rule is not None:
            return self._rule(labels=labels)
        from transformers.models.encoder_decoder.modeling_encoder_decoder import shift_tokens_right

        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)


def decoder_start(config, tokenizer, eos: int, where: str) -> int:
    """The decoder's first input: what the backbone's rule puts first for the tokenizer's targets. A generation
    config whose `decoder_start_token_id` says otherwise (transformers' `generate` would start elsewhere than
    training did) is a ConfigError naming both."""
    labels = torch.tensor([target_ids(tokenizer, "", eos)])
    try:
        start = int(DecoderInputs(config)(labels)[0, 0])
    except (TypeError, ValueError) as e:  # no decoder_start_token_id where the rule needs one
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ConfigError(
            f"{where}: its decoder inputs cannot be made from labels ({first}); its config needs a "
            "decoder_start_token_id"
        ) from None
    return start


def check_generation_start(start: int, generation_config, tokenizer, where: str) -> None:
    """`generate` starts from the generation config's decoder_start_token_id: it must be `start` (or unset)."""
    own = getattr(generation_config, "decoder_start_token_id", None)
    if own is not None and not isinstance(own, (list, tuple)) and int(own) != start:
        names = tokenizer.convert_ids_to_tokens([start, int(own)])
        raise ConfigError(
            f"{where}: training starts the decoder from {names[0]!r} (id {start}: the model's own shift of the "
            f"tokenizer's targets), but its generation config's decoder_start_token_id is {names[1]!r} (id {own}), "
            f"where generate would start; set decoder_start_token_id to {start} (or the tokenizer's tgt_lang)"
        )
