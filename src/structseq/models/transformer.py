"""Transformer encoder-decoder (Vaswani et al. 2017): pre/post-norm, sinusoidal or relative positions.

Reads top to bottom: encoder stack, decoder stack, then the injected output head. Decoder
incremental state per layer: the self-attention (k, v) cache, which grows by one position a step,
and the cross-attention (k, v) projected once from the encoder output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from torch import Tensor, nn

from structseq.data.limits import MAX_LENGTH
from structseq.data.vocab import Vocab
from structseq.errors import ConfigError
from structseq.fields import option
from structseq.models.base import Autoregressive, Inputs, State, Vocabs, with_width
from structseq.models.heads import LexicalHead, SoftmaxHead, build_head, head_option
from structseq.nn.layers import DecoderLayer, EncoderLayer, TokenEmbedding
from structseq.registry import COMPILES, MARIAN_LAYOUT, register_arch


class TransformerEncoder(nn.Module):
    def __init__(self, embed: TokenEmbedding, layers: list[EncoderLayer], final_norm: nn.Module | None):
        super().__init__()
        self.embed, self.layers, self.final_norm = embed, nn.ModuleList(layers), final_norm

    def forward(
        self,
        src: Tensor,
        pad_mask: Tensor,
        *,
        attn_bias: Tensor | None = None,
        logit_scale: float | None = None,
        between=None,
    ) -> Tensor:
        """`attn_bias` / `logit_scale`: call-time focus of every self-attention layer (a context pass);
        `between`: per layer, a function applied between its self-attention and FFN (`EncoderLayer`)."""
        x = self.embed(src)  # (B, S, D)
        for i, layer in enumerate(self.layers):
            x = layer(
                x,
                pad_mask,
                attn_bias=attn_bias,
                logit_scale=logit_scale,
                between=None if between is None else between[i],
            )
        return self.final_norm(x) if self.final_norm is not None else x


class TransformerDecoder(nn.Module):
    """Decoder stack. `forward` handles both the teacher-forced pass (no cache) and incremental steps."""

    def __init__(self, embed: TokenEmbedding, layers: list[DecoderLayer], final_norm: nn.Module | None):
        super().__init__()
        self.embed, self.layers, self.final_norm = embed, nn.ModuleList(layers), final_norm

    def project_memory(self, name: str, keys: Tensor, values: Tensor) -> list[dict[str, tuple[Tensor, Tensor]]]:
        """Per layer, {name: projected (k, v)} of a memory for the layers that attend to it (a cache)."""
        return [
            {name: layer.cross_attn[name].project_kv(keys, values)} if name in layer.cross_attn else {}
            for layer in self.layers
        ]

    def forward(
        self,
        tokens,
        *,
        memories: Mapping[str, Mapping],
        cross_kv: list[Mapping] | None = None,
        past_kv=None,
        offset: int = 0,
        need_weights: bool = False,
        keep_last: int | None = None,
        embedded: Tensor | None = None,
    ):
        """`memories`: name -> {"pad": (B, S) mask, "keys"/"values": (B, S, D)}; `cross_kv`: per layer, name ->
        cached projected (k, v) (then only "pad" is needed). Returns features (B, T, D), new self-attention
        caches and, per memory, the head-averaged cross-attention {memory: (B, T, S)} of the topmost layer that
        attends to it (the top layer when every layer attends to every memory; None unless asked).
        `keep_last`: the top layer computes (and returns) the last n positions only; `embedded`: `tokens` already
        embedded (and dropped out) by the caller."""
        x = self.embed(tokens, offset) if embedded is None else embedded
        new_kv, weights = [], None
        last = len(self.layers) - 1
        top = {name: i for i, layer in enumerate(self.layers) for name in layer.memories}  # memory -> its top layer
        for i, layer in enumerate(self.layers):
            x, kv, w = layer(
                x,
                memories=memories,
                cross_kv=None if cross_kv is None else cross_kv[i],
                past_kv=None if past_kv is None else past_kv[i],
                need_weights=need_weights and i in top.values(),
                keep_last=keep_last if i == last else None,
            )
            new_kv.append(kv)
            if w is not None:
                weights = weights or {}
                for name, a in w.items():
                    if top[name] == i:
                        a = a.mean(1)  # (B, T, S)
                        weights[name] = a if keep_last is None or i == last else a[:, -keep_last:]
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, new_kv, weights


class TransformerSeq2Seq(Autoregressive):
    sentence_state = frozenset({"src", "src_pad", "cross_kv"})

    def __init__(self, encoder: TransformerEncoder, decoder: TransformerDecoder, head: nn.Module):
        super().__init__()
        self.encoder, self.decoder, self.head = encoder, decoder, head

    def encode(self, inputs: Inputs) -> State:
        src = inputs["src"]
        pad_mask = src.eq(self.pad)
        return {"src": src, "src_pad": pad_mask, "memory": self.encoder(src, pad_mask)}

    def forward(self, batch: Inputs) -> Tensor:
        enc = self.encode(batch)
        memory = {"pad": enc["src_pad"], "keys": enc["memory"], "values": enc["memory"]}
        x, _, attn = self.decoder(batch["tgt_in"], memories={"source": memory}, need_weights=self.head.needs_attention)
        return self.head(x, attn and attn["source"], enc["src"])

    def init_state(self, enc: State) -> State:
        cross = self.decoder.project_memory("source", enc["memory"], enc["memory"])
        return {"src": enc["src"], "src_pad": enc["src_pad"], "cross_kv": cross, "self_kv": None}

    def step(self, prev: Tensor, state: State) -> tuple[Tensor, State]:
        past = state["self_kv"]
        offset = 0 if past is None else past[0].size
        x, new_kv, attn = self.decoder(
            prev[:, None],
            memories={"source": {"pad": state["src_pad"]}},
            cross_kv=state["cross_kv"],
            past_kv=past,
            offset=offset,
            need_weights=self.head.needs_attention,
        )
        log_probs = self.head(x, attn and attn["source"], state["src"])[:, 0]
        return log_probs, {**state, "self_kv": new_kv}


# ---------------------------------------------------------------- schema and builder (`arch: transformer`)


@dataclass
class TransformerBlocksConfig:
    """Keys shared by every model built from Transformer blocks."""

    arch: str = option("transformer", "model family (`structseq config --list` names them)")
    d_model: int = option(512, "model width", ge=1, role="width")
    n_heads: int = option(4, "attention heads", ge=1, role="heads")
    ffn_dim: int = option(1024, "feed-forward inner width", ge=1, role="width")
    decoder_layers: int = option(6, "decoder depth", ge=1)
    dropout: float = option(0.3, "residual and embedding dropout", ge=0, lt=1)
    attention_dropout: float = option(0.0, "dropout on attention weights", ge=0, lt=1)
    activation_dropout: float = option(0.0, "dropout after the FFN activation", ge=0, lt=1)
    norm_first: bool = option(False, "pre-norm (true) or post-norm (false)")
    positions: str = option(
        "sinusoidal",
        "sinusoidal (absolute) | relative (Huang et al. 2020 key+query form)",
        choices=("sinusoidal", "relative"),
    )
    max_relative: int = option(16, "relative positions are clipped to +-(max_relative - 1)", ge=1)
    share_decoder_embeddings: bool = option(False, "tie the target embedding and the output projection")
    share_all_embeddings: bool = option(False, "also tie source and target embeddings (needs data.share_vocab)")
    max_length: int = option(
        MAX_LENGTH,
        "longest source or target (tokens) the model takes: longer input is "
        "refused naming its line (training: skipped, see data.too_long); "
        "attention needs memory growing with the square of this length",
        ge=1,
        role="max_length",
    )
    head: Any = head_option()

    def __post_init__(self):
        if isinstance(self.n_heads, int) and self.n_heads > 0 and self.d_model % self.n_heads:
            raise ConfigError(
                f"'model.d_model' ({self.d_model}) must be a multiple of 'model.n_heads' ({self.n_heads})"
            )


@dataclass
class TransformerConfig(TransformerBlocksConfig):
    encoder_layers: int = option(6, "encoder depth", ge=1)


def layer_args(cfg: TransformerBlocksConfig) -> dict:
    """The keyword arguments of an EncoderLayer / DecoderLayer for a Transformer-blocks schema."""
    return dict(
        d_model=cfg.d_model,
        n_heads=cfg.n_heads,
        ffn_dim=cfg.ffn_dim,
        dropout=cfg.dropout,
        attention_dropout=cfg.attention_dropout,
        activation_dropout=cfg.activation_dropout,
        norm_first=cfg.norm_first,
        max_relative=cfg.max_relative if cfg.positions == "relative" else None,
    )


def embeddings(
    cfg: TransformerBlocksConfig, src_vocab: Vocab, tgt_vocab: Vocab
) -> tuple[TokenEmbedding, TokenEmbedding]:
    absolute = cfg.positions == "sinusoidal"
    src_embed = TokenEmbedding(len(src_vocab), cfg.d_model, positions=absolute, dropout=cfg.dropout)
    tgt_embed = TokenEmbedding(len(tgt_vocab), cfg.d_model, positions=absolute, dropout=cfg.dropout)
    if cfg.share_all_embeddings:
        if src_vocab != tgt_vocab:
            raise ConfigError("'model.share_all_embeddings' needs one shared vocabulary: set data.share_vocab: true")
        tgt_embed.embed = src_embed.embed
    return src_embed, tgt_embed


def final_norm(cfg: TransformerBlocksConfig) -> nn.Module | None:
    return nn.LayerNorm(cfg.d_model) if cfg.norm_first else None


def decoder_and_head(
    cfg: TransformerBlocksConfig,
    tgt_embed: TokenEmbedding,
    src_vocab: Vocab,
    tgt_vocab: Vocab,
    train_examples: Sequence | None,
    memories: Sequence[Sequence[str]] | None = None,
) -> tuple[TransformerDecoder, nn.Module]:
    """`memories`: per decoder layer, the named memories it cross-attends to (default: the source)."""
    layers = [
        DecoderLayer(**layer_args(cfg), **({} if memories is None else {"memories": memories[i]}))
        for i in range(cfg.decoder_layers)
    ]
    decoder = TransformerDecoder(tgt_embed, layers, final_norm(cfg))
    head = build_head(cfg.head, cfg.d_model, src_vocab, tgt_vocab, train_examples)
    if cfg.share_decoder_embeddings or cfg.share_all_embeddings:
        write = head.write if isinstance(head, LexicalHead) else head
        assert isinstance(write, SoftmaxHead)
        write.proj.weight = tgt_embed.embed.weight
    return decoder, head


@register_arch("transformer", config=TransformerConfig, attention=True, capabilities=(COMPILES, MARIAN_LAYOUT))
def build_transformer(
    cfg: TransformerConfig, vocabs: Vocabs, train_examples: Sequence | None = None
) -> TransformerSeq2Seq:
    src_vocab, tgt_vocab = vocabs["src"], vocabs["tgt"]
    src_embed, tgt_embed = embeddings(cfg, src_vocab, tgt_vocab)
    encoder = TransformerEncoder(
        src_embed, [EncoderLayer(**layer_args(cfg)) for _ in range(cfg.encoder_layers)], final_norm(cfg)
    )
    decoder, head = decoder_and_head(cfg, tgt_embed, src_vocab, tgt_vocab, train_examples)
    return with_width(TransformerSeq2Seq(encoder, decoder, head), cfg.d_model)
