"""Transformer encoder-decoder (Vaswani et al. 2017): pre/post-norm, sinusoidal or relative positions.

Reads top to bottom: encoder stack, decoder stack, then the injected output head. Decoder
incremental state per layer: the self-attention (k, v) cache, which grows by one position a step,
and the cross-attention (k, v) projected once from the encoder output.
"""

from __future__ import annotations

from torch import Tensor, nn

from structseq.models.base import Seq2Seq, State
from structseq.nn.layers import DecoderLayer, EncoderLayer, TokenEmbedding


class TransformerEncoder(nn.Module):
    def __init__(self, embed: TokenEmbedding, layers: list[EncoderLayer], final_norm: nn.Module | None):
        super().__init__()
        self.embed, self.layers, self.final_norm = embed, nn.ModuleList(layers), final_norm

    def forward(self, src: Tensor, pad_mask: Tensor) -> Tensor:
        x = self.embed(src)  # (B, S, D)
        for layer in self.layers:
            x = layer(x, pad_mask)
        return self.final_norm(x) if self.final_norm is not None else x


class TransformerDecoder(nn.Module):
    """Decoder stack. `forward` handles both the teacher-forced pass (no cache) and incremental steps."""

    def __init__(self, embed: TokenEmbedding, layers: list[DecoderLayer], final_norm: nn.Module | None):
        super().__init__()
        self.embed, self.layers, self.final_norm = embed, nn.ModuleList(layers), final_norm

    def forward(self, tokens, *, memory_pad_mask, memory_keys=None, memory_values=None, cross_kv=None,
                past_kv=None, offset: int = 0, need_weights: bool = False, keep_last: int | None = None):
        """Returns features (B, T, D), new self-attention caches, last layer's head-averaged cross-attention.
        `keep_last`: the top layer computes (and returns) the last n positions only."""
        x = self.embed(tokens, offset)
        new_kv, weights = [], None
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            x, kv, w = layer(x, memory_pad_mask=memory_pad_mask, memory_keys=memory_keys, memory_values=memory_values,
                             cross_kv=None if cross_kv is None else cross_kv[i],
                             past_kv=None if past_kv is None else past_kv[i], need_weights=need_weights and i == last,
                             keep_last=keep_last if i == last else None)
            new_kv.append(kv)
            if w is not None:
                weights = w.mean(1)  # (B, T, S)
        if self.final_norm is not None:
            x = self.final_norm(x)
        return x, new_kv, weights


class TransformerSeq2Seq(Seq2Seq):
    def __init__(self, encoder: TransformerEncoder, decoder: TransformerDecoder, head: nn.Module):
        super().__init__()
        self.encoder, self.decoder, self.head = encoder, decoder, head

    def encode(self, src: Tensor) -> State:
        pad_mask = src.eq(self.pad)
        return {"src": src, "src_pad": pad_mask, "memory": self.encoder(src, pad_mask)}

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        enc = self.encode(src)
        x, _, attn = self.decoder(tgt_in, memory_pad_mask=enc["src_pad"], memory_keys=enc["memory"],
                                  memory_values=enc["memory"], need_weights=self.head.needs_attention)
        return self.head(x, attn, src)

    def init_state(self, enc: State) -> State:
        memory = enc["memory"]
        cross = [layer.cross_attn.project_kv(memory, memory) for layer in self.decoder.layers]
        return {"src": enc["src"], "src_pad": enc["src_pad"], "cross_kv": cross, "self_kv": None}

    def step(self, prev: Tensor, state: State) -> tuple[Tensor, State]:
        past = state["self_kv"]
        offset = 0 if past is None else past[0][0].shape[2]
        x, new_kv, attn = self.decoder(prev[:, None], memory_pad_mask=state["src_pad"], cross_kv=state["cross_kv"],
                                       past_kv=past, offset=offset, need_weights=self.head.needs_attention)
        log_probs = self.head(x, attn, state["src"])[:, 0]
        return log_probs, {**state, "self_kv": new_kv}
