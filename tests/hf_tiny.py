"""Tiny random Hugging Face checkpoints built offline (no download): word-level tokenizers over a word list and
BART / mBART / T5 / BERT configs of width 16-32, written with save_pretrained into a folder. Used by
tests/test_hf_seq2seq.py, tests/test_rdangle_pretrained.py and benchmarks/bench_pretrained.py."""

from __future__ import annotations

from pathlib import Path

import torch

from structseq.data.colors import splits

BART_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")  # BART's ids 0-3 (+ mask)
T5_SPECIALS = ("<pad>", "</s>", "<unk>")  # T5's ids 0-2


def colors_words() -> list[str]:
    """Every word of the Colors dataset (sources and targets), sorted."""
    data = splits()
    return sorted({w for part in data.values() for e in part for w in (*e.source, *e.target)})


def word_tokenizer(words, style: str = "bart", drop: tuple[str, ...] = ()):
    """A word-level tokenizer (whitespace split) with BART's (`<s> x </s>`) or T5's (`x </s>`) special tokens;
    `drop` leaves special tokens unset (e.g. ("pad",) for a tokenizer lacking one)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = BART_SPECIALS if style == "bart" else T5_SPECIALS
    vocab = {w: i for i, w in enumerate([*specials, *words])}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if style == "bart":
        tk.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
        )
        named = {
            "bos_token": "<s>",
            "eos_token": "</s>",
            "pad_token": "<pad>",
            "unk_token": "<unk>",
            "mask_token": "<mask>",
        }
    else:
        tk.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
        named = {"eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}
    named = {k: v for k, v in named.items() if k.removesuffix("_token") not in drop}
    return PreTrainedTokenizerFast(tokenizer_object=tk, clean_up_tokenization_spaces=False, **named)


def _save(model, tokenizer, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return folder


def tiny_bart(
    folder: Path,
    words=None,
    *,
    d_model: int = 16,
    layers: int = 2,
    dropout: float = 0.0,
    seed: int = 0,
    family: str = "bart",
    drop: tuple[str, ...] = (),
    **extra,
) -> Path:
    """A random BART (or mBART) of `layers` encoder and decoder layers, saved with its tokenizer."""
    from transformers import BartConfig, BartForConditionalGeneration, MBartConfig, MBartForConditionalGeneration

    tokenizer = word_tokenizer(words if words is not None else colors_words(), "bart", drop)
    config_class, model_class = (
        (BartConfig, BartForConditionalGeneration) if family == "bart" else (MBartConfig, MBartForConditionalGeneration)
    )
    settings = dict(
        vocab_size=len(tokenizer),
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=2 * d_model,
        decoder_ffn_dim=2 * d_model,
        max_position_embeddings=128,
        dropout=dropout,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        forced_bos_token_id=None,
        forced_eos_token_id=2,  # transformers' default for BART and mBART: </s> at the length limit
        scale_embedding=True,
    )
    settings.update(extra)
    torch.manual_seed(seed)
    return _save(model_class(config_class(**settings)), tokenizer, folder)


def tiny_t5(folder: Path, words=None, *, d_model: int = 16, layers: int = 2, seed: int = 0) -> Path:
    """A random T5 (relative position biases; the decoder starts from <pad>), saved with its tokenizer."""
    from transformers import T5Config, T5ForConditionalGeneration

    tokenizer = word_tokenizer(words if words is not None else colors_words(), "t5")
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=d_model,
        d_kv=8,
        d_ff=2 * d_model,
        num_layers=layers,
        num_decoder_layers=layers,
        num_heads=2,
        dropout_rate=0.0,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        relative_attention_num_buckets=8,
    )
    torch.manual_seed(seed)
    return _save(T5ForConditionalGeneration(config), tokenizer, folder)


def tiny_bert(folder: Path) -> Path:
    """An encoder-only model (for the error that refuses it)."""
    from transformers import BertConfig, BertModel

    tokenizer = word_tokenizer(colors_words(), "bart")
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
    )
    return _save(BertModel(config), tokenizer, folder)
