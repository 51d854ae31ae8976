"""Tiny random Hugging Face checkpoints built offline (no download): word-level tokenizers over a word list (and
transformers' own MBartTokenizer with language codes) and BART / mBART / T5 / Marian / BERT configs of width
16-32, written with save_pretrained into a folder. Shared by the tests (HF models, conventions, R-Dangle on
BART) and benchmarks/bench_pretrained.py, check_hf_conventions.py; transformers is imported inside each builder."""

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


def _bart_shape(tokenizer, d_model: int, layers: int = 2, dropout: float = 0.0) -> dict:
    """The config settings BART, mBART and Marian share: sizes, dropout, positions."""
    return dict(
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
    )


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
        **_bart_shape(tokenizer, d_model, layers, dropout),
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


def mbart_tokenizer(words=None, src_lang: str = "en_XX", tgt_lang: str = "ro_RO"):
    """transformers' own MBartTokenizer over a word list (one `▁word` piece each) with mBART's language codes:
    a source is `x </s> en_XX`, a target `y </s> ro_RO`."""
    from transformers import MBartTokenizer
    from transformers.models.mbart.tokenization_mbart import FAIRSEQ_LANGUAGE_CODES

    pieces = [(t, 0.0) for t in ("<s>", "<pad>", "</s>", "<unk>")] + [("▁", -2.0)]
    pieces += [(f"▁{w}", -1.0) for w in (words if words is not None else colors_words())]
    pieces += [(code, 0.0) for code in FAIRSEQ_LANGUAGE_CODES] + [("<mask>", 0.0)]
    return MBartTokenizer(vocab=pieces, src_lang=src_lang, tgt_lang=tgt_lang)


def tiny_mbart_lang(folder: Path, *, start: str | None = "ro_RO", seed: int = 0, d_model: int = 16, **extra) -> Path:
    """A random mBART with a language-code tokenizer (en_XX -> ro_RO); the config's decoder start is the
    target language code `start` (as facebook/mbart-large-en-ro), or unset (None, as mBART-cc25)."""
    from transformers import MBartConfig, MBartForConditionalGeneration

    tokenizer = mbart_tokenizer()
    settings = dict(
        **_bart_shape(tokenizer, d_model),
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=tokenizer.convert_tokens_to_ids(start) if start else None,
        forced_eos_token_id=2,
        init_std=0.3,
    )
    settings.update(extra)
    torch.manual_seed(seed)
    return _save(MBartForConditionalGeneration(MBartConfig(**settings)), tokenizer, folder)


def tiny_marian(folder: Path, *, seed: int = 0, d_model: int = 16) -> Path:
    """A random Marian (sinusoidal positions; the decoder starts from <pad>, targets `y </s>`, as opus-mt)."""
    from transformers import MarianConfig, MarianMTModel

    tokenizer = word_tokenizer(colors_words(), "t5")
    config = MarianConfig(
        **_bart_shape(tokenizer, d_model),
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
        forced_eos_token_id=1,
        init_std=0.3,
    )
    torch.manual_seed(seed)
    return _save(MarianMTModel(config), tokenizer, folder)


def labels_loss(folder: Path, examples) -> tuple[float, torch.Tensor]:
    """transformers' own recipe, the reference for structseq's targets: `tokenizer(sources, text_target=targets)`,
    padding as -100, the mean token loss of `model(labels=...)`; returns it and the labels."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    hf = AutoModelForSeq2SeqLM.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False).eval()
    enc = tokenizer(
        [e.source_text for e in examples],
        text_target=[e.target_text for e in examples],
        padding=True,
        return_tensors="pt",
    )
    labels = enc["labels"].masked_fill(enc["labels"].eq(tokenizer.pad_token_id), -100)
    with torch.no_grad():
        loss = hf(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels).loss
    return float(loss), labels


def convention_checkpoints(root: Path) -> dict[str, Path]:
    """One tiny checkpoint per target convention: BART, mBART with language codes, T5, Marian."""
    return {
        "bart": tiny_bart(root / "bart", seed=1, init_std=0.3),
        "mbart_lang": tiny_mbart_lang(root / "mbart_lang", seed=1),
        "t5": tiny_t5(root / "t5", seed=1),
        "marian": tiny_marian(root / "marian", seed=1),
    }


#: four Colors sentences of different lengths (sources and targets in every tiny tokenizer's word list)
EXAMPLES = [
    ("dax lug", "RED BLUE"),
    ("zup", "YELLOW YELLOW RED GREEN BLUE"),
    ("wif blicket dax fep", "GREEN"),
    ("lug kiki zup", "YELLOW BLUE"),
]


def hf_setup(folder: Path, examples, **model):
    """task hf-seq2seq and an `hf-seq2seq` model (eval mode) on a checkpoint folder: (task, vocabs, model)."""
    from structseq.config import config_from_dict
    from structseq.models import build_model
    from structseq.tasks import get_task

    cfg = config_from_dict({"task": "hf-seq2seq", "model": {"arch": "hf-seq2seq", "pretrained": str(folder), **model}})
    task = get_task(cfg)
    vocabs = task.build_vocabs(examples)
    return task, vocabs, build_model(cfg.model, vocabs, task="hf-seq2seq").eval()
