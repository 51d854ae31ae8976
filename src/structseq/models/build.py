"""Builders: the only place where config objects turn into modules (blocks take plain arguments).

A builder takes (model config, vocabularies by name, training examples or None) and returns the model
with its `width` set (the model dimension the Noam schedule scales by). `models/registry.py` maps each
`arch` to its config class and builder."""

from __future__ import annotations

import dataclasses

from collections.abc import Mapping, Sequence
from pathlib import Path

from torch import nn

from structseq.config import (HEAD_CONFIGS, DangleConfig, LexicalHeadConfig, LSTMConfig, RDangleSepConfig,
                              SoftmaxHeadConfig, TransformerBlocksConfig, TransformerConfig)
from structseq.data.vocab import Vocab

Vocabs = Mapping[str, Vocab]
from structseq.errors import ConfigError
from structseq.lexicon import LEARNERS, Lexicon
from structseq.lexicon import learn as learn_lexicon
from structseq.models.heads import GATES, INITS, CopyHead, LexicalHead, SoftmaxHead, shared_token_map
from structseq.models.dangle import AdaptiveKeyEncoder, RDangleSeq2Seq, ValueEncoder
from structseq.models.lexical import LexiconRows, lexicon_rows, tie_order
from structseq.models.lstm import LSTMSeq2Seq
from structseq.models.transformer import TransformerDecoder, TransformerEncoder, TransformerSeq2Seq
from structseq.nn.layers import DecoderLayer, EncoderLayer, TokenEmbedding


def build_head(cfg: SoftmaxHeadConfig, d_model: int, src_vocab: Vocab, tgt_vocab: Vocab,
               train_examples: Sequence | None = None) -> nn.Module:
    """`train_examples` (the training pairs) resolve a lexical head's lexicon; without them (loading a
    checkpoint, or checking a config) L is a placeholder of the right shape that `load_state_dict` fills."""
    if cfg.type not in HEAD_CONFIGS:
        raise ConfigError(f"'model.head.type': unknown head '{cfg.type}'; choices: {', '.join(HEAD_CONFIGS)}")
    if cfg.type in ("copy", "lexical") and cfg.gate not in GATES:
        raise ConfigError(f"'model.head.gate' must be one of {', '.join(GATES)}, not '{cfg.gate}'")
    if cfg.type == "lexical":
        return build_lexical_head(cfg, d_model, src_vocab, tgt_vocab, train_examples)
    if cfg.type == "copy":
        return CopyHead(d_model, len(tgt_vocab), shared_token_map(src_vocab, tgt_vocab), cfg.dropout, cfg.gate)
    return SoftmaxHead(d_model, len(tgt_vocab), cfg.dropout)


def resolve_lexicon(cfg: LexicalHeadConfig, train_examples: Sequence) -> Lexicon | None:
    """The configured lexicon: learned from the training pairs (a method name) or read from a file."""
    if cfg.lexicon is None:
        return None
    if cfg.lexicon in LEARNERS:
        return learn_lexicon(train_examples, cfg.lexicon, **cfg.lexicon_settings)
    if not Path(cfg.lexicon).is_file():
        raise ConfigError(f"'model.head.lexicon': '{cfg.lexicon}' is neither a lexicon file nor a method "
                          f"({', '.join(LEARNERS)})")
    return Lexicon.load(cfg.lexicon)


def build_lexical_head(cfg: LexicalHeadConfig, d_model: int, src_vocab: Vocab, tgt_vocab: Vocab,
                       train_examples: Sequence | None = None) -> LexicalHead:
    if cfg.init not in INITS:
        raise ConfigError(f"'model.head.init' must be one of {', '.join(INITS)}, not '{cfg.init}'")
    if cfg.tau < 0 or (cfg.init == "frozen" and cfg.tau != 0) or (cfg.init == "soft" and cfg.tau <= 0):
        raise ConfigError(f"'model.head.tau' = {cfg.tau} does not fit init '{cfg.init}': frozen is the hard "
                          "lexicon (tau 0), soft needs tau > 0, learned takes either")
    if cfg.init == "uniform":
        rows = LexiconRows.uniform(len(src_vocab), len(tgt_vocab))
    else:
        lexicon = resolve_lexicon(cfg, train_examples) if train_examples is not None else None
        order = tie_order(train_examples, cfg.ties) if train_examples is not None else None
        rows = lexicon_rows(lexicon, src_vocab, tgt_vocab, cfg.tau, cfg.mutual_exclusivity, order)
    return LexicalHead(d_model, len(tgt_vocab), rows, gate=cfg.gate, learn=cfg.init in ("learned", "uniform"),
                       dropout=cfg.dropout)


def _layer_args(cfg: TransformerBlocksConfig) -> dict:
    if cfg.positions not in ("sinusoidal", "relative"):
        raise ConfigError(f"'model.positions' must be sinusoidal or relative, got '{cfg.positions}'")
    return dict(d_model=cfg.d_model, n_heads=cfg.n_heads, ffn_dim=cfg.ffn_dim, dropout=cfg.dropout,
                attention_dropout=cfg.attention_dropout, activation_dropout=cfg.activation_dropout,
                norm_first=cfg.norm_first, max_relative=cfg.max_relative if cfg.positions == "relative" else None)


def _embeddings(cfg: TransformerBlocksConfig, src_vocab: Vocab, tgt_vocab: Vocab) -> tuple[TokenEmbedding, TokenEmbedding]:
    absolute = cfg.positions == "sinusoidal"
    src_embed = TokenEmbedding(len(src_vocab), cfg.d_model, positions=absolute, dropout=cfg.dropout)
    tgt_embed = TokenEmbedding(len(tgt_vocab), cfg.d_model, positions=absolute, dropout=cfg.dropout)
    if cfg.share_all_embeddings:
        if src_vocab != tgt_vocab:
            raise ConfigError("'model.share_all_embeddings' needs one shared vocabulary: set data.share_vocab: true")
        tgt_embed.embed = src_embed.embed
    return src_embed, tgt_embed


def _final_norm(cfg: TransformerBlocksConfig) -> nn.Module | None:
    return nn.LayerNorm(cfg.d_model) if cfg.norm_first else None


def _decoder_and_head(cfg: TransformerBlocksConfig, tgt_embed: TokenEmbedding, src_vocab: Vocab, tgt_vocab: Vocab,
                      train_examples: Sequence | None, memories: Sequence[Sequence[str]] | None = None
                      ) -> tuple[TransformerDecoder, nn.Module]:
    """`memories`: per decoder layer, the named memories it cross-attends to (default: the source)."""
    layers = [DecoderLayer(**_layer_args(cfg), **({} if memories is None else {"memories": memories[i]}))
              for i in range(cfg.decoder_layers)]
    decoder = TransformerDecoder(tgt_embed, layers, _final_norm(cfg))
    head = build_head(cfg.head, cfg.d_model, src_vocab, tgt_vocab, train_examples)
    if cfg.share_decoder_embeddings or cfg.share_all_embeddings:
        write = head.write if isinstance(head, LexicalHead) else head
        assert isinstance(write, SoftmaxHead)
        write.proj.weight = tgt_embed.embed.weight
    return decoder, head


def build_transformer(cfg: TransformerConfig, vocabs: Vocabs, train_examples: Sequence | None = None
                      ) -> TransformerSeq2Seq:
    src_vocab, tgt_vocab = vocabs["src"], vocabs["tgt"]
    layer_args = _layer_args(cfg)
    src_embed, tgt_embed = _embeddings(cfg, src_vocab, tgt_vocab)
    encoder = TransformerEncoder(src_embed, [EncoderLayer(**layer_args) for _ in range(cfg.encoder_layers)],
                                 _final_norm(cfg))
    decoder, head = _decoder_and_head(cfg, tgt_embed, src_vocab, tgt_vocab, train_examples)
    return with_width(TransformerSeq2Seq(encoder, decoder, head), cfg.d_model)


def build_dangle(cfg: DangleConfig, vocabs: Vocabs, train_examples: Sequence | None = None) -> RDangleSeq2Seq:
    """dangle / rdangle-shr / rdangle-sep. Dangle is rdangle-shr with interval 1 (same modules, same weights)."""
    src_vocab, tgt_vocab = vocabs["src"], vocabs["tgt"]
    separate = isinstance(cfg, RDangleSepConfig)
    if cfg.arch == "dangle" and cfg.interval != 1:
        raise ConfigError("'model.interval': dangle re-encodes at every step (interval 1); "
                          "use arch rdangle-shr for other intervals")
    if cfg.fusion_layers < 1:
        raise ConfigError("'model.fusion_layers' must be >= 1: without fusion the prefix never reaches the source")
    if cfg.interval < 0 or cfg.chunk_points < 0:
        raise ConfigError("'model.interval' and 'model.chunk_points' must be >= 0")
    args = _layer_args(cfg)
    src_embed, tgt_embed = _embeddings(cfg, src_vocab, tgt_vocab)
    pre = [EncoderLayer(**args) for _ in range(cfg.pre_fusion_layers)]
    fusion = [EncoderLayer(**args, segment_relative=True) for _ in range(cfg.fusion_layers)]
    post = [EncoderLayer(**args) for _ in range(cfg.post_fusion_layers)]
    value_encoder = None
    if separate:
        bottom = pre if cfg.share_pre_fusion else []
        top = post if cfg.share_post_fusion else []
        own = cfg.encoder_layers - len(bottom) - len(top)
        if own < 0:
            raise ConfigError(f"'model.encoder_layers' = {cfg.encoder_layers} is fewer than the value-encoder layers "
                              f"shared with the key encoder ({len(bottom)} pre-fusion + {len(top)} post-fusion)")
        value_encoder = ValueEncoder(bottom + [EncoderLayer(**args) for _ in range(own)] + top, _final_norm(cfg),
                                     skip=len(bottom))
    key_encoder = AdaptiveKeyEncoder(cfg.d_model, pre, fusion, post, _final_norm(cfg))
    decoder, head = _decoder_and_head(cfg, tgt_embed, src_vocab, tgt_vocab, train_examples)
    return with_width(RDangleSeq2Seq(src_embed, key_encoder, value_encoder, decoder, head, cfg.interval,
                                     cfg.chunk_points, cfg.recompute_chunks), cfg.d_model)


def build_lstm(cfg: LSTMConfig, vocabs: Vocabs, train_examples: Sequence | None = None) -> LSTMSeq2Seq:
    src_vocab, tgt_vocab = vocabs["src"], vocabs["tgt"]
    head_cfg, high = cfg.head, 0.0
    if cfg.feed_dropout:  # the head's dropout becomes the model's mask on the combined vector, shared with the feed
        head_cfg, high = dataclasses.replace(cfg.head, dropout=0.0), cfg.head.dropout
    head = build_head(head_cfg, cfg.hidden_dim, src_vocab, tgt_vocab, train_examples)
    return with_width(LSTMSeq2Seq(len(src_vocab), len(tgt_vocab), head, embed_dim=cfg.embed_dim,
                                  hidden_dim=cfg.hidden_dim, layers=cfg.layers, dropout=cfg.dropout,
                                  combine_feed=cfg.combine_feed, feed_dropout=cfg.dropout if cfg.feed_dropout else 0.0,
                                  high_dropout=high, combine_activation=cfg.combine_activation), cfg.hidden_dim)


def with_width(model: nn.Module, width: int) -> nn.Module:
    """Record the model dimension that the Noam schedule scales the learning rate by."""
    model.width = width
    return model
