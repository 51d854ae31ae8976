"""Context-aware Transformers (Wang et al. 2019): a short source S, a long context C, one shared encoder.

Reads top to bottom: the config, the model, the builder. Every variant encodes with the *same* encoder
(same weights) and differs in what its decoder layers cross-attend to:

  sequential    one encoder input [S ; <sep> ; C] (the baseline), one memory "source"
  concatenate   S and C encoded separately, every decoder layer attends to [enc(S) ; enc(C)] (memory "source")
  alternate     two cross-attention blocks per decoder layer: over enc(C) ("context") then over enc(S) ("source")
  interleave    each decoder layer attends to S or to C only (configurable 1-based layer sets; the paper, six
                layers: source 1, 2, 5, 6 and context 3, 4), so the parameter count is a plain Transformer's
  doc-nmt       the document-level baseline the paper re-implements (Zhang et al. 2018): C is encoded first and
                every layer of the source pass attends to enc(C) between its self-attention and its FFN; the
                decoder attends as `alternate` does (enc(C), then enc(S)). As in the issue, the context pass
                uses the shared encoder; Zhang et al.'s code has a separate context encoder and an optional
                gate (off by default), neither built here.

Focused context attention touches only the context pass of the shared encoder, through call-time options of
its self-attention: `context_logit_scale` multiplies the logits (1 / temperature) and `context_window` adds
a Gaussian penalty -(i - j)^2 / (2 (w/2)^2) (`nn.attention.GaussianWindowBias`), never scaled.

An empty context is a row of padding. `concatenate` then attends to enc(S) alone (a plain Transformer);
variants with a context memory of its own unmask the first (padding) position of such a row, a fixed
"no context" key, so attention stays finite.

Heads that copy (copy, lexical) see one attention vector over the tokens of every memory the decoder
reads: for a single memory its top layer's attention; for two memories (alternate, interleave) each
memory's topmost attending layer, halved and concatenated ([0.5 a_S ; 0.5 a_C] over [S ; C]).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor, nn

from structseq.data.limits import MAX_CONTEXT_LENGTH, SEP  # SEP: between S and C (sequential)
from structseq.data.vocab import Vocab
from structseq.errors import ConfigError
from structseq.fields import option
from structseq.models.base import Autoregressive, Inputs, State, with_width
from structseq.models.transformer import (
    TransformerConfig,
    TransformerDecoder,
    TransformerEncoder,
    decoder_and_head,
    embeddings,
    final_norm,
    layer_args,
)
from structseq.nn.attention import GaussianWindowBias, MultiheadAttention
from structseq.nn.layers import EncoderLayer, Residual
from structseq.registry import register_arch

DECODERS = ("sequential", "concatenate", "alternate", "interleave", "doc-nmt")


@dataclass
class ContextTransformerConfig(TransformerConfig):
    arch: str = option("context-transformer", "context-aware Transformer (Wang et al. 2019)")
    decoder: str = option(
        "interleave",
        "how S and C reach the decoder: sequential (one input S <sep> C) | "
        "concatenate | alternate | interleave | doc-nmt (Zhang et al. 2018)",
        choices=DECODERS,
    )
    source_layers: list[int] = option([1, 2, 5, 6], "interleave: 1-based decoder layers attending to the source", ge=1)
    context_layers: list[int] = option([3, 4], "interleave: 1-based decoder layers attending to the context", ge=1)
    context_logit_scale: float = option(
        1.0,
        "focused context attention: factor on the context self-attention logits "
        "(1 / temperature; > 1 is peakier; 1 = off)",
        gt=0,
    )
    context_window: float | None = option(
        None,
        "focused context attention: width of a Gaussian soft local window on the context self-attention (null = off)",
        gt=0,
    )
    max_context_length: int = option(
        MAX_CONTEXT_LENGTH,
        "longest context (tokens, after subwords) the model takes: a longer one "
        "is refused naming its line (training: skipped, see data.too_long) "
        "unless task.max_context_tokens trims it; its self-attention needs "
        "memory growing with the square of this length",
        ge=1,
        role="max_context_length",
    )


def join_sequential(src: Tensor, ctx: Tensor, sep: int | None, pad: int = Vocab.pad) -> Tensor:
    """Per row [S ; <sep> ; C] without the padding in between (both inputs left-aligned); `sep` None: [S ; C]
    (S's own </s> separates)."""
    ls, lc = src.ne(pad).sum(1, keepdim=True), ctx.ne(pad).sum(1, keepdim=True)
    gap = 0 if sep is None else 1
    L = int((ls + gap + lc).max())
    pos = torch.arange(L, device=src.device)[None]
    cpos = pos - ls - gap
    from_src = src.gather(1, pos.clamp(max=src.shape[1] - 1).expand(src.shape[0], L))
    from_ctx = (
        ctx.gather(1, cpos.clamp(0, max(ctx.shape[1] - 1, 0)).expand(ctx.shape[0], L))
        if ctx.shape[1]
        else torch.full_like(from_src, pad)
    )
    out = torch.where((cpos >= 0) & (cpos < lc), from_ctx, torch.full_like(from_src, pad))
    if sep is not None:
        out = torch.where(pos == ls, torch.full_like(out, sep), out)
    return torch.where(pos < ls, from_src, out)


class ContextAttention(nn.Module):
    """A residual cross-attention block from the source pass to enc(C) (doc-nmt: one per encoder layer)."""

    def __init__(self, d_model: int, n_heads: int, dropout: float, attention_dropout: float, norm_first: bool):
        super().__init__()
        self.attn = MultiheadAttention(d_model, n_heads, attention_dropout)
        self.block = Residual(d_model, dropout, norm_first)

    def forward(self, x: Tensor, memory: Tensor, pad: Tensor) -> Tensor:
        return self.block(x, lambda h: self.attn(h, memory, memory, key_padding_mask=pad))[0]


class ContextTransformer(Autoregressive):
    sentence_state = frozenset({"memories", "cross_kv"})

    def __init__(
        self,
        encoder: TransformerEncoder,
        decoder: TransformerDecoder,
        head: nn.Module,
        variant: str,
        sep: int | None,
        context_logit_scale: float = 1.0,
        context_window: float | None = None,
        source_context: Sequence[ContextAttention] | None = None,
    ):
        super().__init__()
        if variant not in DECODERS:
            raise ValueError(f"unknown decoder variant {variant!r}; choices: {', '.join(DECODERS)}")
        if (variant == "doc-nmt") != (source_context is not None):
            raise ValueError("doc-nmt, and only doc-nmt, needs one ContextAttention per encoder layer")
        self.source_context = None if source_context is None else nn.ModuleList(source_context)
        self.encoder, self.decoder, self.head = encoder, decoder, head
        self.variant, self.sep, self.context_logit_scale = variant, sep, context_logit_scale
        self.window = GaussianWindowBias(context_window) if context_window else None
        self.memory_names = tuple(dict.fromkeys(m for layer in decoder.layers for m in layer.memories))

    def pretrained_state(self, state: Mapping[str, Tensor]) -> tuple[dict[str, Tensor], list[str]]:
        """Phase two from a sentence-level model (any variant whose decoder reads only "source", e.g.
        `sequential` trained with `task.context_sentences=0`): a context cross-attention this model has and the
        checkpoint lacks starts as the same layer's source cross-attention. Interleave's context layers take
        over their layer's weights (the parameter count is a plain Transformer's); alternate's context blocks
        start as copies of the source blocks. Anything else (doc-nmt's encoder blocks) must match as it is."""
        own = self.state_dict()
        out, filled = dict(state), []
        for name in own:
            source = name.replace(".context.", ".source.")
            if name not in state and source != name and source in state:
                out[name] = state[source]
                filled.append(name)
        for name in list(out):  # a source attention the model no longer has, taken over by its context twin
            if name not in own and name.replace(".source.", ".context.") in filled:
                del out[name]
        return out, filled

    # ------------------------------------------------------------------ encoding
    def context_bias(self, length: int, device) -> Tensor | None:
        """The soft local window's additive (T, T) term of the context self-attention (None when off)."""
        if self.window is None:
            return None
        pos = torch.arange(length, device=device)
        return self.window(torch.empty(0, device=device), None, pos, pos)

    def encode_context(self, ctx: Tensor, pad_mask: Tensor) -> Tensor:
        """The shared encoder over the context, its self-attention focused (temperature, window)."""
        return self.encoder(
            ctx, pad_mask, attn_bias=self.context_bias(ctx.shape[1], ctx.device), logit_scale=self.context_logit_scale
        )

    def encode(self, inputs: Inputs) -> State:
        """name -> {"tokens", "pad", "out"} for each memory the decoder reads."""
        src = inputs["src"]
        ctx = inputs.get("ctx")
        if ctx is None:
            ctx = src.new_zeros(src.shape[0], 0)
        if self.variant == "sequential":
            tokens = join_sequential(src, ctx, self.sep, self.pad)
            pad = tokens.eq(self.pad)
            return {"source": {"tokens": tokens, "pad": pad, "out": self.encoder(tokens, pad)}}
        src_pad = src.eq(self.pad)
        doc_nmt = self.source_context is not None  # the source pass needs enc(C): encoded below, after it
        out = {"source": {"tokens": src, "pad": src_pad, "out": None if doc_nmt else self.encoder(src, src_pad)}}
        if "context" not in self.memory_names and self.variant != "concatenate":
            return out  # interleave with every layer on the source: the context is never read
        ctx_pad = ctx.eq(self.pad)
        if self.variant != "concatenate":
            if ctx.shape[1] == 0:
                ctx = ctx.new_full((ctx.shape[0], 1), self.pad)
                ctx_pad = ctx.eq(self.pad)
            empty = ctx_pad.all(1)
            ctx_pad = ctx_pad.clone()
            ctx_pad[:, 0] &= ~empty  # a fixed "no context" key for empty rows
        c = {"tokens": ctx, "pad": ctx_pad, "out": self.encode_context(ctx, ctx_pad)} if ctx.shape[1] else None
        if doc_nmt:
            between = [partial(block, memory=c["out"], pad=ctx_pad) for block in self.source_context]
            out["source"]["out"] = self.encoder(src, src_pad, between=between)
        if self.variant == "concatenate":
            if c is not None:
                s = out["source"]
                out["source"] = {k: torch.cat([s[k], c[k]], 1) for k in ("tokens", "pad", "out")}
            return out
        out["context"] = c
        return out

    # ------------------------------------------------------------------ decoding
    def _copy_inputs(self, attn: Mapping[str, Tensor] | None, memories: Mapping[str, Mapping]):
        """(attention over the tokens of every memory read, those tokens) for a copying head."""
        if attn is None:
            return None, None
        names = [n for n in self.memory_names if n in attn]
        if len(names) == 1:
            return attn[names[0]], memories[names[0]]["tokens"]
        return (
            torch.cat([attn[n] / len(names) for n in names], -1),
            torch.cat([memories[n]["tokens"] for n in names], 1),
        )

    def forward(self, batch: Inputs) -> Tensor:
        enc = self.encode(batch)
        memories = {n: {"pad": m["pad"], "keys": m["out"], "values": m["out"]} for n, m in enc.items()}
        x, _, attn = self.decoder(batch["tgt_in"], memories=memories, need_weights=self.head.needs_attention)
        return self.head(x, *self._copy_inputs(attn, enc))

    def init_state(self, enc: State) -> State:
        cross = [{} for _ in self.decoder.layers]
        for name, m in enc.items():
            for layer_kv, kv in zip(cross, self.decoder.project_memory(name, m["out"], m["out"])):
                layer_kv.update(kv)
        return {
            "memories": {n: {"tokens": m["tokens"], "pad": m["pad"]} for n, m in enc.items()},
            "cross_kv": cross,
            "self_kv": None,
        }

    def step(self, prev: Tensor, state: State) -> tuple[Tensor, State]:
        past = state["self_kv"]
        offset = 0 if past is None else past[0].size
        mem = state["memories"]
        x, new_kv, attn = self.decoder(
            prev[:, None],
            memories={n: {"pad": m["pad"]} for n, m in mem.items()},
            cross_kv=state["cross_kv"],
            past_kv=past,
            offset=offset,
            need_weights=self.head.needs_attention,
        )
        log_probs = self.head(x, *self._copy_inputs(attn, mem))[:, 0]
        return log_probs, {**state, "self_kv": new_kv}

    @torch.no_grad()
    def attention_statistics(self, inputs: Inputs, window: int = 40, layer: int | None = None) -> dict[str, float]:
        """The paper's Table 9 statistics of a sequential model's encoder self-attention over [S ; <sep> ; C],
        heads averaged, every layer averaged (or only `layer`, 1-based): the share of the source tokens'
        attention spent on context tokens (alpha S->C), the share of the context tokens' attention spent on
        source tokens (alpha C->S) and the share of every token's attention within a window of `window` tokens
        centred on it (alpha win: |i - j| <= window / 2; the paper's window: 40 tokens). Token-weighted means
        of this batch; the `n_*` counts let a caller pool batches."""
        if self.variant != "sequential":
            raise ValueError("encoder attention statistics need the sequential variant (one input S <sep> C)")
        layers = self.encoder.layers
        if layer is not None and not 1 <= layer <= len(layers):
            raise ValueError(f"layer {layer} outside 1..{len(layers)} (the encoder's layers)")
        src, ctx = inputs["src"], inputs["ctx"]
        tokens = join_sequential(src, ctx, self.sep, self.pad)
        pad = tokens.eq(self.pad)
        pos = torch.arange(tokens.shape[1], device=tokens.device)
        ls, lc = src.ne(self.pad).sum(1, keepdim=True), ctx.ne(self.pad).sum(1, keepdim=True)
        start = ls + (0 if self.sep is None else 1)
        is_src, is_ctx = pos < ls, (pos >= start) & (pos < start + lc)  # (B, T) each
        near = ((pos[:, None] - pos[None]).abs() <= window / 2).to(torch.float)  # (T, T)
        chosen = range(len(layers)) if layer is None else [layer - 1]
        s_c = c_s = win = 0.0
        x = self.encoder.embed(tokens)
        for i, enc_layer in enumerate(layers):
            if i in chosen:
                h = enc_layer.attn_block.norm(x) if enc_layer.attn_block.norm_first else x
                _, w, _ = enc_layer.self_attn(h, key_padding_mask=pad, need_weights=True)
                w = w.mean(1)  # (B, T queries, T keys)
                s_c += float((w * is_ctx[:, None]).sum(-1)[is_src].sum())
                c_s += float((w * is_src[:, None]).sum(-1)[is_ctx].sum())
                win += float((w * near).sum(-1)[~pad].sum())
            x = enc_layer(x, pad)
        n_src, n_ctx, n_tok = int(is_src.sum()), int(is_ctx.sum()), int((~pad).sum())
        k = len(chosen)
        return {
            "source_attention_on_context": s_c / max(k * n_src, 1),
            "context_attention_on_source": c_s / max(k * n_ctx, 1),
            "attention_in_window": win / max(k * n_tok, 1),
            "n_source_tokens": n_src,
            "n_context_tokens": n_ctx,
            "n_tokens": n_tok,
        }


def decoder_memories(cfg: ContextTransformerConfig) -> list[tuple[str, ...]]:
    """The memories each decoder layer cross-attends to, in order."""
    n = cfg.decoder_layers
    if cfg.decoder in ("sequential", "concatenate"):
        return [("source",)] * n
    if cfg.decoder in ("alternate", "doc-nmt"):
        return [("context", "source")] * n
    for key in ("source_layers", "context_layers"):
        bad = [i for i in getattr(cfg, key) if not 1 <= i <= n]
        if bad:
            raise ConfigError(f"'model.{key}': layers {bad} outside 1..{n} (model.decoder_layers)")
    out = []
    for i in range(1, n + 1):
        names = tuple(
            name for name, layers in (("context", cfg.context_layers), ("source", cfg.source_layers)) if i in layers
        )
        if not names:
            raise ConfigError(
                f"'model.source_layers' / 'model.context_layers': decoder layer {i} attends to "
                "neither the source nor the context"
            )
        out.append(names)
    return out


@register_arch("context-transformer", config=ContextTransformerConfig, tasks=("context-seq2seq",), attention=True)
def build_context_transformer(
    cfg: ContextTransformerConfig, vocabs: Mapping[str, Vocab], train_examples: Sequence | None = None
) -> ContextTransformer:
    focused = cfg.context_logit_scale != 1.0 or cfg.context_window
    if cfg.decoder == "sequential" and focused:
        raise ConfigError(
            "'model.context_logit_scale' / 'model.context_window' focus a separate context encoding; "
            "the sequential decoder has none (one input S <sep> C)"
        )
    src_vocab, tgt_vocab = vocabs["src"], vocabs["tgt"]
    sep = src_vocab.stoi.get(SEP)  # task context-seq2seq adds it; without it S's own </s> separates S and C
    src_embed, tgt_embed = embeddings(cfg, src_vocab, tgt_vocab)
    encoder = TransformerEncoder(
        src_embed, [EncoderLayer(**layer_args(cfg)) for _ in range(cfg.encoder_layers)], final_norm(cfg)
    )
    decoder, head = decoder_and_head(
        cfg, tgt_embed, src_vocab, tgt_vocab, train_examples, memories=decoder_memories(cfg)
    )
    source_context = (
        [
            ContextAttention(cfg.d_model, cfg.n_heads, cfg.dropout, cfg.attention_dropout, cfg.norm_first)
            for _ in range(cfg.encoder_layers)
        ]
        if cfg.decoder == "doc-nmt"
        else None
    )
    model = ContextTransformer(
        encoder, decoder, head, cfg.decoder, sep, cfg.context_logit_scale, cfg.context_window, source_context
    )
    return with_width(model, cfg.d_model)
