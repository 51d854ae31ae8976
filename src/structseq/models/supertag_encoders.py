"""Sentence encoders of the supertaggers: word states h (B, W, d_model) and a word mask (B, W).

`WordEncoder`: words + a character CNN + BiLSTM, trained from scratch (`model.encoder.pretrained: null`).
`PretrainedEncoder`: a local Hugging Face checkpoint; a word's state pools its subword pieces (attention,
first piece, or mean).

A pretrained encoder is only ever read from a local folder (model + tokenizer, as `save_pretrained` writes
them), with `local_files_only=True`: a name that is not a folder (a hub name such as `camembert-base`), a
folder that is missing or moved, or one that transformers cannot load is a one-line ConfigError naming
`model.encoder.pretrained`; nothing is downloaded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from structseq.data.vocab import Vocab
from structseq.errors import ConfigError, StructseqError
from structseq.fields import option
from structseq.nn.attention import without_cudnn_attention
from structseq.nn.dropout import Dropout

POOLINGS = ("attention", "first", "mean")
_KEY = "model.encoder.pretrained"


@dataclass
class SupertagEncoderConfig:
    pretrained: str | None = option(
        None,
        "a local Hugging Face encoder directory (model + tokenizer; nothing is "
        "downloaded); null: train the word + character BiLSTM encoder from scratch",
        path=True,
    )
    lr_scale: float = option(
        0.1, "learning-rate factor of the pretrained encoder's parameters (paper: 1e-5 / 1e-4; 0 freezes it)", ge=0.0
    )
    pooling: str = option("attention", "pooling of a word's subword pieces: attention | first | mean", choices=POOLINGS)
    word_dim: int = option(128, "word embedding width (from-scratch encoder)", ge=1, role="width")
    char_dim: int = option(32, "character embedding width (0: no character component)", ge=0)
    char_filters: int = option(64, "character CNN filters (width-3 convolution, max over the word)", ge=1)
    max_chars: int = option(24, "characters of a word the CNN reads (the first ones)", ge=1)
    hidden: int = option(128, "BiLSTM width per direction", ge=1, role="width")
    layers: int = option(2, "BiLSTM layers", ge=1)
    word_dropout: float = option(
        0.1,
        "training: a word id replaced by <unk> with this probability (teaches the unknown-word path)",
        ge=0.0,
        lt=1.0,
    )


# ---------------------------------------------------------------- local Hugging Face checkpoints


def pretrained_folder(path: str) -> Path:
    """The folder of a pretrained encoder, or a ConfigError saying that it is missing (nothing is downloaded)."""
    folder = Path(path).expanduser()
    if not folder.is_dir():
        what = "is a file, not a folder" if folder.exists() else "does not exist (moved or deleted?)"
        raise ConfigError(
            f"'{_KEY}': the encoder folder {str(path)!r} {what}; give a local folder holding the "
            "model and its tokenizer (as save_pretrained writes them): nothing is downloaded (a hub "
            "name such as camembert-base is not fetched)"
        )
    return folder


def load_pretrained(path: str, what: str = "model"):
    """A local Hugging Face `model`, `tokenizer` or `config` (local files only), or a one-line ConfigError."""
    folder = pretrained_folder(path)
    try:
        import transformers
    except ImportError:
        raise ConfigError(f"'{_KEY}' needs the transformers package: pip install 'structseq[hf]'") from None
    loader = {
        "model": transformers.AutoModel,
        "tokenizer": transformers.AutoTokenizer,
        "config": transformers.AutoConfig,
    }[what]
    try:
        return loader.from_pretrained(str(folder), local_files_only=True, trust_remote_code=False)
    except StructseqError:
        raise
    except Exception as e:  # a broken folder: transformers raises OSError, ValueError, safetensors errors...
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ConfigError(
            f"'{_KEY}': cannot load the encoder's {what} from {str(folder)!r} ({type(e).__name__}: "
            f"{first}); nothing is downloaded"
        ) from None


def max_pieces(path: str, tokenizer) -> int:
    """The most subword pieces (special tokens included) one sentence may have: the smaller of the tokenizer's
    `model_max_length` and the model's position table (`max_position_embeddings`, less the offset of
    RoBERTa-style positions, which start after the padding id)."""
    config = load_pretrained(path, "config")
    limit = int(min(getattr(tokenizer, "model_max_length", None) or 10**9, 10**9))
    positions = getattr(config, "max_position_embeddings", None)
    if positions:
        offset = (
            config.pad_token_id + 1
            if getattr(config, "position_embedding_type", "absolute") == "absolute"
            and config.model_type in ("roberta", "camembert", "xlm-roberta", "xlm-roberta-xl")
            else 0
        )
        limit = min(limit, positions - offset)
    return limit


# ---------------------------------------------------------------- encoders


class WordEncoder(nn.Module):
    """Words + character CNN -> BiLSTM -> d_model. Reads batch["words"] (B, W) and batch["chars"] (B, W, C)."""

    def __init__(self, cfg: SupertagEncoderConfig, n_words: int, n_chars: int, d_model: int, dropout: float):
        super().__init__()
        self.cfg = cfg
        self.words = nn.Embedding(n_words, cfg.word_dim, padding_idx=Vocab.pad)
        width = cfg.word_dim
        if cfg.char_dim > 0:
            self.chars = nn.Embedding(n_chars, cfg.char_dim, padding_idx=Vocab.pad)
            self.conv = nn.Conv1d(cfg.char_dim, cfg.char_filters, 3, padding=1)
            width += cfg.char_filters
        self.lstm = nn.LSTM(
            width,
            cfg.hidden,
            cfg.layers,
            batch_first=True,
            bidirectional=True,
            dropout=dropout if cfg.layers > 1 else 0.0,
        )
        self.out = nn.Linear(2 * cfg.hidden, d_model)
        self.drop = Dropout(dropout)

    def forward(self, batch) -> tuple[Tensor, Tensor]:
        words = batch["words"]
        B, W = words.shape
        mask = words.ne(Vocab.pad)
        if self.training and self.cfg.word_dropout > 0:
            drop = torch.rand(words.shape, device=words.device) < self.cfg.word_dropout
            words = words.masked_fill(drop & mask, Vocab.unk)
        x = [self.words(words)]
        if self.cfg.char_dim > 0:
            c = batch["chars"]  # (B, W, C)
            C = c.shape[2]
            e = self.chars(c.view(B * W, C)).transpose(1, 2)  # (BW, dc, C)
            f = self.conv(e).masked_fill(c.view(B * W, 1, C).eq(Vocab.pad), -1e4).amax(-1)
            x.append(f.clamp_min(-1.0).view(B, W, -1) * mask[..., None])
        x = self.drop(torch.cat(x, -1))
        lengths = mask.sum(1).clamp_min(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=W)
        return self.drop(self.out(h)) * mask[..., None], mask


class PretrainedEncoder(nn.Module):
    """A local Hugging Face encoder; a word's state pools its pieces. Reads batch["pieces"] (B, P) and
    batch["piece_word"] (B, P): the word index of each piece, -1 for special tokens and padding."""

    def __init__(self, cfg: SupertagEncoderConfig, d_model: int, dropout: float):
        super().__init__()
        self.cfg = cfg
        self.model = load_pretrained(cfg.pretrained, "model")
        width = self.model.config.hidden_size
        self.score = nn.Linear(width, 1)
        self.out = nn.Linear(width, d_model)
        self.drop = Dropout(dropout)

    @without_cudnn_attention
    def forward(self, batch) -> tuple[Tensor, Tensor]:
        pieces, pw = batch["pieces"], batch["piece_word"]
        hp = self.model(input_ids=pieces, attention_mask=batch["piece_mask"].long()).last_hidden_state  # (B, P, H)
        W = batch["word_mask"].shape[1]
        member = pw[:, None, :].eq(torch.arange(W, device=pw.device)[None, :, None])  # (B, W, P)
        if self.cfg.pooling == "attention":
            s = self.score(hp)[..., 0][:, None, :].masked_fill(~member, float("-inf"))
        elif self.cfg.pooling == "mean":
            s = torch.zeros_like(member, dtype=hp.dtype).masked_fill(~member, float("-inf"))
        elif self.cfg.pooling == "first":
            first = member & (member.cumsum(-1) == 1)
            s = torch.zeros_like(member, dtype=hp.dtype).masked_fill(~first, float("-inf"))
        else:
            raise ValueError(f"unknown pooling {self.cfg.pooling!r}; choices: {', '.join(POOLINGS)}")
        mask = member.any(-1)
        a = torch.softmax(s.masked_fill(~mask[..., None], 0.0), -1) * mask[..., None]
        return self.drop(self.out(a @ hp)) * mask[..., None], mask

    def lr_scaled(self) -> list[nn.Parameter]:
        return list(self.model.parameters())


def build_encoder(cfg, vocabs) -> nn.Module:
    """The encoder of a supertagger config `cfg` (its `encoder` section, `d_model`, `dropout`)."""
    e = cfg.encoder
    if e.pretrained:
        return PretrainedEncoder(e, cfg.d_model, cfg.dropout)
    return WordEncoder(e, len(vocabs["words"]), len(vocabs["chars"]), cfg.d_model, cfg.dropout)
