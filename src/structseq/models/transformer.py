"""Transformer encoder-decoder (Vaswani et al. 2017): pre/post-norm, sinusoidal or relative positions.

Reads top to bottom: encoder stack, decoder stack, then the injected output head. Decoder
incremental state per layer: the self-attention (k, v) cache, which grows by one position a step,
and the cross-attention (k, v) projected once from the encoder output.
"""

from __future__ import annotations

from collections.abc import Mapping

from torch import Tensor, nn

from structseq.models.base import Autoregressive, Inputs, State
from structseq.nn.layers import DecoderLayer, EncoderLayer, TokenEmbedding


class TransformerEncoder(nn.Module):
    def __init__(self, embed: TokenEmbedding, layers: list[EncoderLayer], final_norm: nn.Module | None):
        super().__init__()
        self.embed, self.layers, self.final_norm = embed, nn.ModuleList(layers), final_norm

    def forward(self, src: Tensor, pad_mask: Tensor, *, attn_bias: Tensor | None = None,
                logit_scale: float | None = None, between=None) -> Tensor:
        """`attn_bias` / `logit_scale`: call-time focus of every self-attention layer (a context pass);
        `between`: per layer, a function applied between its self-attention and FFN (`EncoderLayer`)."""
        x = self.embed(src)  # (B, S, D)
        for i, layer in enumerate(self.layers):
            x = layer(x, pad_mask, attn_bias=attn_bias, logit_scale=logit_scale,
                      between=None if between is None else between[i])
        return self.final_norm(x) if self.final_norm is not None else x


class TransformerDecoder(nn.Module):
    """Decoder stack. `forward` handles both the teacher-forced pass (no cache) and incremental steps."""

    def __init__(self, embed: TokenEmbedding, layers: list[DecoderLayer], final_norm: nn.Module | None):
        super().__init__()
        self.embed, self.layers, self.final_norm = embed, nn.ModuleList(layers), final_norm

    def project_memory(self, name: str, keys: Tensor, values: Tensor) -> list[dict[str, tuple[Tensor, Tensor]]]:
        """Per layer, {name: projected (k, v)} of a memory for the layers that attend to it (a cache)."""
        return [{name: layer.cross_attn[name].project_kv(keys, values)} if name in layer.cross_attn else {}
                for layer in self.layers]

    def forward(self, tokens, *, memories: Mapping[str, Mapping], cross_kv: list[Mapping] | None = None,
                past_kv=None, offset: int = 0, need_weights: bool = False, keep_last: int | None = None):
        """`memories`: name -> {"pad": (B, S) mask, "keys"/"values": (B, S, D)}; `cross_kv`: per layer, name ->
        cached projected (k, v) (then only "pad" is needed). Returns features (B, T, D), new self-attention
        caches and, per memory, the head-averaged cross-attention {memory: (B, T, S)} of the topmost layer that
        attends to it (the top layer when every layer attends to every memory; None unless asked).
        `keep_last`: the top layer computes (and returns) the last n positions only."""
        x = self.embed(tokens, offset)
        new_kv, weights = [], None
        last = len(self.layers) - 1
        top = {name: i for i, layer in enumerate(self.layers) for name in layer.memories}  # memory -> its top layer
        for i, layer in enumerate(self.layers):
            x, kv, w = layer(x, memories=memories, cross_kv=None if cross_kv is None else cross_kv[i],
                             past_kv=None if past_kv is None else past_kv[i],
                             need_weights=need_weights and i in top.values(),
                             keep_last=keep_last if i == last else None)
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
        x, new_kv, attn = self.decoder(prev[:, None], memories={"source": {"pad": state["src_pad"]}},
                                       cross_kv=state["cross_kv"], past_kv=past, offset=offset,
                                       need_weights=self.head.needs_attention)
        log_probs = self.head(x, attn and attn["source"], state["src"])[:, 0]
        return log_probs, {**state, "self_kv": new_kv}
