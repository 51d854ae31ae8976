"""Transformer layers (pre- or post-norm), feed-forward blocks and embeddings."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from structseq.nn.attention import (
    GaussianWindowBias,
    KVCache,
    MultiheadAttention,
    RelativePositionBias,
    ScoreBiases,
    SegmentRelativeBias,
)
from structseq.nn.dropout import dropout


class FeedForward(nn.Module):
    def __init__(self, d_model: int, ffn_dim: int, activation_dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_model, ffn_dim), nn.Linear(ffn_dim, d_model)
        self.act = {"relu": F.relu, "gelu": F.gelu}[activation]
        self.activation_dropout = activation_dropout

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(dropout(self.act(self.fc1(x)), self.activation_dropout, self.training))


class Residual(nn.Module):
    """x + dropout(f(norm(x))) (pre-norm) or norm(x + dropout(f(x))) (post-norm)."""

    def __init__(self, d_model: int, dropout: float, norm_first: bool):
        super().__init__()
        self.norm, self.dropout, self.norm_first = nn.LayerNorm(d_model), dropout, norm_first

    def forward(self, x: Tensor, f, queries: slice | None = None) -> tuple[Tensor, object]:
        """`queries`: only these positions are updated (f sees all of x and returns outputs for them)."""
        y, *rest = f(self.norm(x) if self.norm_first else x)
        x = (x if queries is None else x[:, queries]) + dropout(y, self.dropout, self.training)
        return (x if self.norm_first else self.norm(x)), rest


def _relative(d_model: int, n_heads: int, max_relative: int | None, segments: bool = False):
    if not max_relative:
        return None
    return (SegmentRelativeBias if segments else RelativePositionBias)(d_model // n_heads, max_relative)


class EncoderLayer(nn.Module):
    """Bidirectional self-attention and FFN. `segment_relative`: relative positions per [source ; target]
    segment (Dangle's fusion layers; the caller passes `rel_index`). `window` (a Gaussian local window's
    width) and `logit_scale` focus the self-attention (Wang et al. 2019's context encoder)."""

    def __init__(
        self,
        d_model,
        n_heads,
        ffn_dim,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        norm_first=False,
        max_relative: int | None = None,
        segment_relative: bool = False,
        window: float | None = None,
        logit_scale: float = 1.0,
    ):
        super().__init__()
        bias = _relative(d_model, n_heads, max_relative, segment_relative)
        if window:
            bias = GaussianWindowBias(window) if bias is None else ScoreBiases([bias, GaussianWindowBias(window)])
        self.self_attn = MultiheadAttention(d_model, n_heads, attention_dropout, bias, logit_scale)
        self.ffn = FeedForward(d_model, ffn_dim, activation_dropout)
        self.attn_block = Residual(d_model, dropout, norm_first)
        self.ffn_block = Residual(d_model, dropout, norm_first)

    def forward(
        self,
        x: Tensor,
        pad_mask: Tensor | None,
        rel_index: Tensor | None = None,
        n_queries: int | None = None,
        *,
        attn_bias: Tensor | None = None,
        logit_scale: float | None = None,
        between=None,
    ) -> Tensor:
        """`n_queries`: compute outputs for the first n positions only (all positions still serve as keys).
        `attn_bias` / `logit_scale`: call-time focus of the self-attention (see `MultiheadAttention.forward`).
        `between`: a function of x applied between the self-attention and the FFN blocks (e.g. an attention to
        an encoded context, Zhang et al. 2018)."""
        if n_queries is None:
            x, _ = self.attn_block(
                x,
                lambda h: self.self_attn(
                    h, key_padding_mask=pad_mask, rel_index=rel_index, attn_bias=attn_bias, logit_scale=logit_scale
                ),
            )
        else:
            q = slice(0, n_queries)
            idx = rel_index[q] if rel_index is not None else None
            x, _ = self.attn_block(
                x,
                lambda h: self.self_attn(h[:, q], h, h, key_padding_mask=pad_mask, rel_index=idx, q_offset=0),
                queries=q,
            )
        if between is not None:
            x = between(x)
        x, _ = self.ffn_block(x, lambda h: (self.ffn(h),))
        return x


class DecoderLayer(nn.Module):
    """Causal self-attention, then one cross-attention block per named memory in `memories` (in that order;
    keys and values may come from different tensors), then the FFN. "Attend to one memory" is
    `("source",)`, "to two in turn" `("context", "source")`, "a different memory per layer" a different
    tuple per layer: builder choices."""

    def __init__(
        self,
        d_model,
        n_heads,
        ffn_dim,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        norm_first=False,
        max_relative: int | None = None,
        memories: Sequence[str] = ("source",),
    ):
        super().__init__()
        self.self_attn = MultiheadAttention(
            d_model, n_heads, attention_dropout, _relative(d_model, n_heads, max_relative)
        )
        self.memories = tuple(memories)
        # registration order (hence parameter order, which gradient clipping sums over) as before named memories
        self.cross_attn = nn.ModuleDict({m: MultiheadAttention(d_model, n_heads, attention_dropout) for m in memories})
        self.ffn = FeedForward(d_model, ffn_dim, activation_dropout)
        self.self_block = Residual(d_model, dropout, norm_first)
        self.cross_block = nn.ModuleDict({m: Residual(d_model, dropout, norm_first) for m in memories})
        self.ffn_block = Residual(d_model, dropout, norm_first)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # checkpoints before named memories: one `cross_attn` / `cross_block`, over the source
        for old in ("cross_attn.", "cross_block."):
            for key in [k for k in state_dict if k.startswith(prefix + old) and not self._named(k[len(prefix) :])]:
                state_dict[prefix + old + "source." + key[len(prefix + old) :]] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def _named(self, key: str) -> bool:
        return key.split(".")[1] in self.memories

    def forward(
        self,
        x,
        *,
        memories: Mapping[str, Mapping],
        cross_kv: Mapping | None = None,
        past_kv=None,
        need_weights=False,
        keep_last: int | None = None,
    ):
        """`memories`: name -> {"pad", "keys", "values"}; `cross_kv`: name -> this layer's cached (k, v).
        Returns (x, self-attention (k, v) for the cache, {memory: cross-attention weights} or None).
        `keep_last`: outputs for the last n positions only (all positions still give keys and values)."""
        causal = x.shape[1] > 1
        if keep_last is None or keep_last >= x.shape[1]:
            x, (_, self_kv) = self.self_block(x, lambda h: self.self_attn(h, causal=causal, past_kv=past_kv))
        else:
            assert past_kv is None, "keep_last is for passes over a whole prefix"
            q, first = slice(x.shape[1] - keep_last, None), x.shape[1] - keep_last
            x, (_, self_kv) = self.self_block(
                x, lambda h: self.self_attn(h[:, q], h, h, causal=True, q_offset=first), queries=q
            )
        weights = {} if need_weights else None
        for name in self.memories:
            memory, kv = memories[name], None if cross_kv is None else cross_kv.get(name)
            x, (w, _) = self.cross_block[name](
                x,
                lambda h: self.cross_attn[name](
                    h,
                    memory.get("keys"),
                    memory.get("values"),
                    key_padding_mask=memory["pad"],
                    static_kv=kv,
                    need_weights=need_weights,
                ),
            )
            if need_weights:
                weights[name] = w
        x, _ = self.ffn_block(x, lambda h: (self.ffn(h),))
        return x, self_kv if isinstance(self_kv, KVCache) else KVCache(*self_kv), weights


def sinusoidal_table(n_positions: int, dim: int) -> Tensor:
    """The fixed sin/cos position table of Vaswani et al. (sin half, then cos half, like fairseq)."""
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float) * -(math.log(10000.0) / max(half - 1, 1)))
    angles = torch.arange(n_positions, dtype=torch.float)[:, None] * freq[None, :]
    table = torch.cat([angles.sin(), angles.cos()], 1)
    return F.pad(table, (0, dim - 2 * half))


class TokenEmbedding(nn.Module):
    """Embedding scaled by sqrt(d), plus sinusoidal absolute positions unless disabled."""

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        padding_idx: int = 0,
        positions: bool = True,
        max_positions: int = 1024,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=padding_idx)
        nn.init.normal_(self.embed.weight, 0.0, dim**-0.5)
        nn.init.zeros_(self.embed.weight[padding_idx])
        self.scale, self.dropout = math.sqrt(dim), dropout
        self.register_buffer("positions", sinusoidal_table(max_positions, dim) if positions else None, persistent=False)

    def forward(self, tokens: Tensor, offset: int = 0, drop: bool = True) -> Tensor:
        """Embedded `tokens`, dropped out unless `drop` is False (a caller drawing its own masks: `self.drop`)."""
        x = self.embed(tokens) * self.scale
        if self.positions is not None:
            T = tokens.shape[1]
            if offset + T > self.positions.shape[0]:
                self.positions = sinusoidal_table(2 * (offset + T), x.shape[-1]).to(x.device)
            x = x + self.positions[offset : offset + T]
        return self.drop(x) if drop else x

    def drop(self, x: Tensor) -> Tensor:
        return dropout(x, self.dropout, self.training)
