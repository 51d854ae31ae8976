"""Builders: the only place where config objects turn into modules (blocks take plain arguments)."""

from __future__ import annotations

from torch import nn

from structseq.config import HeadConfig, LSTMConfig, TransformerConfig
from structseq.data.vocab import Vocab
from structseq.errors import ConfigError
from structseq.models.heads import HEADS, CopyHead, SoftmaxHead, shared_token_map
from structseq.models.lstm import LSTMSeq2Seq
from structseq.models.transformer import TransformerDecoder, TransformerEncoder, TransformerSeq2Seq
from structseq.nn.layers import DecoderLayer, EncoderLayer, TokenEmbedding


def build_head(cfg: HeadConfig, d_model: int, src_vocab: Vocab, tgt_vocab: Vocab) -> nn.Module:
    if cfg.type not in HEADS:
        raise ConfigError(f"'model.head.type': unknown head '{cfg.type}'; choices: {', '.join(HEADS)}")
    if cfg.type == "copy":
        return CopyHead(d_model, len(tgt_vocab), shared_token_map(src_vocab, tgt_vocab), cfg.dropout)
    return SoftmaxHead(d_model, len(tgt_vocab), cfg.dropout)


def build_transformer(cfg: TransformerConfig, src_vocab: Vocab, tgt_vocab: Vocab) -> TransformerSeq2Seq:
    if cfg.positions not in ("sinusoidal", "relative"):
        raise ConfigError(f"'model.positions' must be sinusoidal or relative, got '{cfg.positions}'")
    relative = cfg.max_relative if cfg.positions == "relative" else None
    absolute = cfg.positions == "sinusoidal"
    layer_args = dict(d_model=cfg.d_model, n_heads=cfg.n_heads, ffn_dim=cfg.ffn_dim, dropout=cfg.dropout,
                      attention_dropout=cfg.attention_dropout, activation_dropout=cfg.activation_dropout,
                      norm_first=cfg.norm_first, max_relative=relative)
    src_embed = TokenEmbedding(len(src_vocab), cfg.d_model, positions=absolute, dropout=cfg.dropout)
    if cfg.share_all_embeddings:
        if src_vocab != tgt_vocab:
            raise ConfigError("'model.share_all_embeddings' needs one shared vocabulary: set data.share_vocab: true")
        tgt_embed = TokenEmbedding(len(tgt_vocab), cfg.d_model, positions=absolute, dropout=cfg.dropout)
        tgt_embed.embed = src_embed.embed
    else:
        tgt_embed = TokenEmbedding(len(tgt_vocab), cfg.d_model, positions=absolute, dropout=cfg.dropout)
    norm = (lambda: nn.LayerNorm(cfg.d_model)) if cfg.norm_first else (lambda: None)
    encoder = TransformerEncoder(src_embed, [EncoderLayer(**layer_args) for _ in range(cfg.encoder_layers)], norm())
    decoder = TransformerDecoder(tgt_embed, [DecoderLayer(**layer_args) for _ in range(cfg.decoder_layers)], norm())
    head = build_head(cfg.head, cfg.d_model, src_vocab, tgt_vocab)
    if cfg.share_decoder_embeddings or cfg.share_all_embeddings:
        write = head.write if isinstance(head, CopyHead) else head
        assert isinstance(write, SoftmaxHead)
        write.proj.weight = tgt_embed.embed.weight
    return TransformerSeq2Seq(encoder, decoder, head)


def build_lstm(cfg: LSTMConfig, src_vocab: Vocab, tgt_vocab: Vocab) -> LSTMSeq2Seq:
    head = build_head(cfg.head, cfg.hidden_dim, src_vocab, tgt_vocab)
    return LSTMSeq2Seq(len(src_vocab), len(tgt_vocab), head, embed_dim=cfg.embed_dim, hidden_dim=cfg.hidden_dim,
                       layers=cfg.layers, dropout=cfg.dropout)


BUILDERS = {"transformer": build_transformer, "lstm": build_lstm}


def build_model(cfg, src_vocab: Vocab, tgt_vocab: Vocab) -> nn.Module:
    if cfg.arch not in BUILDERS:
        raise ConfigError(f"'model.arch': unknown model '{cfg.arch}'; choices: {', '.join(BUILDERS)}")
    return BUILDERS[cfg.arch](cfg, src_vocab, tgt_vocab)
