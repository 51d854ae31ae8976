"""Multi-head attention with separate key and value inputs, additive score biases, a logit scale and KV caches.

A *score bias* is a module `bias(q, k, q_pos, k_pos, index) -> (B or 1, H or 1, Tq, Tk)` added to the
attention logits: relative positions (Huang et al. 2020), Dangle's segment table and a Gaussian local
window are instances. Its `scaled` attribute says whether the logit scale multiplies it too (content
terms) or not (penalties that must keep their size)."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from structseq.nn.accelerator import on_accelerator
from structseq.nn.dropout import dropout


def sdpa_without_cudnn(q: Tensor, k: Tensor, v: Tensor, **kwargs) -> Tensor:
    """`F.scaled_dot_product_attention` with cuDNN's kernel left out on CUDA: it builds a graph for every new
    shape (hundreds of ms) and batches of sentences change shape every update. On an H200
    (results/gpu/2026-11-26-h200) the 6+6 d512 Transformer took 0.80 s an update in bf16 with it, 0.05 s in fp32,
    which cuDNN does not serve. The flag is flipped around the call (1.5 us; `sdpa_kernel` costs 22 us); it is
    process-wide, so another thread's SDPA during the call skips cuDNN too. Hugging Face backbones call SDPA
    themselves: their callers use `without_cudnn_attention`.

    Under `torch.compile` it is plain SDPA: asking the flag there broke the graph at every attention call (31
    graphs an update for the COGS Transformer, issue 53); the compiled step turns cuDNN's attention off once,
    outside the model, before it is traced (`structseq.train.compiled.compile_model`)."""
    if torch.compiler.is_compiling() or not (on_accelerator(q) and torch.backends.cuda.cudnn_sdp_enabled()):
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        return F.scaled_dot_product_attention(q, k, v, **kwargs)
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)


@contextmanager
def cudnn_attention_off(on_cuda: bool) -> Iterator[None]:
    """The cuDNN-SDPA flag off for a block that runs on CUDA, and as it was after (see `sdpa_without_cudnn`)."""
    if not (on_cuda and torch.backends.cuda.cudnn_sdp_enabled()):
        yield
        return
    torch.backends.cuda.enable_cudnn_sdp(False)
    try:
        yield
    finally:
        torch.backends.cuda.enable_cudnn_sdp(True)


def module_on_cuda(module: nn.Module) -> bool:
    """Whether the module's weights are on a CUDA device (its first parameter's; `structseq.nn.accelerator`)."""
    first = next(module.parameters(), None)
    return first is not None and on_accelerator(first)


def without_cudnn_attention(method):
    """Runs a module's method with cuDNN's attention left out when the module is on CUDA: for the methods that
    call a Hugging Face backbone, whose attention calls SDPA itself. Nested calls keep the flag off. The flag is
    process-wide: two such calls on overlapping threads could turn it back on under each other (nothing in
    structseq runs models on several threads)."""

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with cudnn_attention_off(module_on_cuda(self)):
            return method(self, *args, **kwargs)

    return run


class RelativePositionBias(nn.Module):
    """Relative positions in the key+query form of Huang et al. (2020), as used by Dangle.

    logits_ij = (q_i.k_j + q_i.r_ij + k_j.r_ij) / sqrt(d_head), r_ij = E[clip(i - j, -(M-1), M-1)].
    One (2M-1, d_head) table per attention module, shared by its heads, initialised at zero like the
    reference code; no relative term on the values. `bias` returns the two extra terms (unscaled).
    """

    scaled = True

    def __init__(self, d_head: int, max_distance: int = 16):
        super().__init__()
        self.max_distance = max_distance
        self.table = nn.Parameter(torch.zeros(2 * max_distance - 1, d_head))

    def forward(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor, index: Tensor | None = None) -> Tensor:
        """The scaled score term; `index`: a (Tq, Tk) matrix of table rows (default: from the positions)."""
        idx = index if index is not None else self.index(q_pos, k_pos)
        return self.bias_at(q, k, idx) / math.sqrt(self.table.shape[1])

    def index(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        m = self.max_distance - 1
        return (q_pos[:, None] - k_pos[None, :]).clamp(-m, m) + m  # (Tq, Tk)

    def bias(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        return self.bias_at(q, k, self.index(q_pos, k_pos))

    def bias_at(self, q: Tensor, k: Tensor, idx: Tensor) -> Tensor:
        """q_i.r_ij + k_j.r_ij for a (Tq, Tk) matrix of table rows `idx`."""
        B, H, Tq, _ = q.shape
        Tk = k.shape[2]
        idx = idx.expand(B, H, Tq, Tk)
        q_term = (q @ self.table.t()).gather(-1, idx)  # q_i . r_ij
        k_term = (k @ self.table.t()).transpose(-1, -2).gather(-2, idx)  # k_j . r_ij
        return q_term + k_term


class SegmentRelativeBias(RelativePositionBias):
    """Relative positions over a [source ; target] sequence (Dangle's fusion layers): one distance table
    for source-source pairs, one for target-target pairs, and one learned vector for every source->target
    pair and one for every target->source pair. Pass `segment_index(n_src, n_tgt)` as `rel_index`."""

    def __init__(self, d_head: int, max_distance: int = 16):
        super().__init__(d_head, max_distance)
        n = 2 * max_distance - 1
        self.table = nn.Parameter(torch.zeros(2 * n + 2, d_head))

    def segment_index(self, n_src: int, n_tgt: int, device=None) -> Tensor:
        n = 2 * self.max_distance - 1
        src, tgt = torch.arange(n_src, device=device), torch.arange(n_tgt, device=device)
        top = torch.cat([self.index(src, src), torch.full((n_src, n_tgt), 2 * n, device=device)], 1)
        bottom = torch.cat([torch.full((n_tgt, n_src), 2 * n + 1, device=device), self.index(tgt, tgt) + n], 1)
        return torch.cat([top, bottom], 0)  # (S + T, S + T)


class GaussianWindowBias(nn.Module):
    """A soft local window (Luong et al. 2015's Gaussian, as in Wang et al. 2019's focused context attention):
    the penalty -(i - j)^2 / (2 sigma^2), sigma = width / 2, so a token mostly attends within `width`
    positions of itself. Not multiplied by the logit scale."""

    scaled = False

    def __init__(self, width: float):
        super().__init__()
        if width <= 0:
            raise ValueError(f"window width must be > 0, got {width}")
        self.width = float(width)

    def forward(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor, index: Tensor | None = None) -> Tensor:
        d = (q_pos[:, None] - k_pos[None, :]).to(q.dtype)
        return -(d * d) / (2 * (self.width / 2) ** 2)


class ScoreBiases(nn.ModuleList):
    """Several score biases, summed (e.g. relative positions and a local window)."""

    scaled = None  # each member says for itself


#: a handed-over cache whose rows mostly stay copies only the rows that move, in place (`KVCache.extend`); off:
#: every reorder gathers (switched with `structseq.decode.speedups`' stable_slots)
IN_PLACE_REORDER = [True]


class KVCache(NamedTuple):
    """A self-attention cache: keys and values (N, H, capacity, dh) whose first `size` positions are filled,
    with its beam reordering deferred (the logical cache is `(k[rows, :, :size], v[rows, :, :size])`).
    `map_state` applies a search's row selection to `rows` only (composing reorders; an identity selection
    keeps `rows` None). Extending a cache whose rows are unchanged writes the new step into spare capacity, no
    copy (greedy decoding, beams that keep their rows); otherwise the rows are gathered straight into the
    extended cache, one copy per step instead of a reorder and a concatenation. `filled` (shared by the caches
    of one buffer) makes a second extension of the same cache copy instead of overwriting the first.

    Buffers are recycled when the caller hands a cache over (`map_state(..., owned=True)`: beam search, which
    never reads a state again after reordering it): the gather then writes into the buffer an earlier gather
    left behind (`pool`, shared along one cache's lineage) and leaves its own old buffer there in turn. Fresh
    buffers of tens of MB cost page faults on every first write, which made them most of beam search's time.
    Where at most half the rows of a handed-over cache move (beam search with stable slots: a hypothesis keeps
    its parent's row where it can), only those are copied, within the buffer (`_moved_in_place`)."""

    k: Tensor
    v: Tensor
    rows: Tensor | None = None  # None: the identity
    length: int | None = None  # filled positions (None: all of k)
    filled: list | None = None  # [positions of the buffer written so far], shared
    pool: list | None = None  # [(k, v) buffers free for the next gather, or None], shared along the lineage
    owned: bool = False  # handed over by its caller: its buffers may be reused once it is extended

    @property
    def size(self) -> int:
        return self.k.shape[2] if self.length is None else self.length

    def map_rows(self, fn, owned: bool = False) -> KVCache:
        current = self.rows if self.rows is not None else torch.arange(self.k.shape[0], device=self.k.device)
        rows = fn(current)
        if self.rows is None and rows.shape == current.shape and torch.equal(rows, current):
            return self
        return self._replace(rows=rows, owned=owned)

    def _spare(self, like: Tensor, capacity: int) -> tuple[Tensor, Tensor] | None:
        """Take the pool's buffers if this cache was handed over and they fit (`like`: N, H, _, dh)."""
        if not self.owned or self.pool is None or self.pool[0] is None:
            return None
        k, v = self.pool[0]
        N, H, _, dh = like.shape
        if (
            k.shape[0] < N
            or k.shape[1] != H
            or k.shape[2] < capacity
            or k.shape[3] != dh
            or k.dtype != like.dtype
            or k.device != like.device
        ):
            return None
        self.pool[0] = None
        return k[:N], v[:N]

    def extend(self, k: Tensor, v: Tensor) -> KVCache:
        """The cache with `k`, `v` (N, H, T', dh) appended along time; read it with `keys()` / `values()`."""
        t, n = self.size, k.shape[2]
        if torch.is_grad_enabled() and (self.k.requires_grad or k.requires_grad):
            old_k, old_v = (
                (self.k[:, :, :t], self.v[:, :, :t])
                if self.rows is None
                else (self.k[:, :, :t].index_select(0, self.rows), self.v[:, :, :t].index_select(0, self.rows))
            )
            return KVCache(torch.cat([old_k, k], 2), torch.cat([old_v, v], 2))
        filled = self.filled[0] if self.filled is not None else self.k.shape[2]
        spare = filled == t and t + n <= self.k.shape[2]
        if spare and (self.rows is None or self._moved_in_place(t)):  # spare capacity: write in place
            self.k[:, :, t : t + n] = k
            self.v[:, :, t : t + n] = v
            self.filled[0] = t + n
            return KVCache(self.k, self.v, None, t + n, self.filled, self.pool)
        bufs = self._spare(k, t + n)
        if bufs is None:
            cap = max(2 * (t + n), 16)  # spare room costs no copy: only written pages are touched
            bufs = tuple(new.new_empty(new.shape[0], new.shape[1], cap, new.shape[3]) for new in (k, v))
        for x, old, new in zip(bufs, (self.k, self.v), (k, v)):
            if self.rows is None:
                x[:, :, :t] = old[:, :, :t]
            else:
                torch.index_select(old if old.shape[2] == t else old[:, :, :t], 0, self.rows, out=x[:, :, :t])
            x[:, :, t : t + n] = new
        pool = self.pool if self.pool is not None else [None]
        if self.owned and self.pool is not None:  # our own buffer, and nobody reads this cache again
            pool[0] = tuple(b if b._base is None else b._base for b in (self.k, self.v))
        return KVCache(bufs[0], bufs[1], None, t + n, [t + n], pool)

    def _moved_in_place(self, t: int) -> bool:
        """Reorder the first `t` positions within the buffer where the cache was handed over, keeps its rows'
        number and at most half of them move (only those are copied); False (nothing done) otherwise."""
        N = self.k.shape[0]
        if not (IN_PLACE_REORDER[0] and self.owned and self.rows.shape[0] == N):
            return False
        moved = (self.rows != torch.arange(N, device=self.rows.device)).nonzero()[:, 0]
        if 2 * moved.numel() > N:
            return False
        src = self.rows.index_select(0, moved)
        for buf in (self.k, self.v):
            old = buf[:, :, :t]
            old.index_copy_(0, moved, old.index_select(0, src))  # sources are read before any row is written
        return True

    def keys(self) -> Tensor:
        return self.k if self.length is None or self.length == self.k.shape[2] else self.k[:, :, : self.length]

    def values(self) -> Tensor:
        return self.v if self.length is None or self.length == self.v.shape[2] else self.v[:, :, : self.length]


class MultiheadAttention(nn.Module):
    """Scaled dot-product attention over `query` with keys from `key` and values from `value`.

    Keys and values are projected from their own inputs (R-Dangle_sep needs K and V from different
    tensors). `past_kv` holds already-projected keys/values of earlier steps (self-attention cache);
    `static_kv` replaces projecting `key`/`value` altogether (cross-attention cache). The projected
    (k, v) actually used are returned so the caller can cache them. `score_bias` (see the module
    docstring) is added to the logits; `logit_scale` multiplies them (1 / temperature: > 1 is peakier).
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        dropout: float = 0.0,
        score_bias: nn.Module | None = None,
        logit_scale: float = 1.0,
    ):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model {d_model} is not divisible by n_heads {n_heads}")
        if logit_scale <= 0:
            raise ValueError(f"logit_scale must be > 0, got {logit_scale}")
        self.n_heads, self.d_head, self.dropout = n_heads, d_model // n_heads, dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.score_bias, self.logit_scale = score_bias, logit_scale

    def _heads(self, x: Tensor) -> Tensor:  # (B, T, D) -> (B, H, T, dh)
        B, T, _ = x.shape
        return x.view(B, T, self.n_heads, self.d_head).transpose(1, 2)

    def project_keys(self, key: Tensor) -> Tensor:
        """(B, T, D) -> projected keys (B, H, T, dh), e.g. to cache a memory's keys."""
        return self._heads(self.k_proj(key))

    def project_values(self, value: Tensor) -> Tensor:
        """(B, T, D) -> projected values (B, H, T, dh)."""
        return self._heads(self.v_proj(value))

    def project_kv(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        return self.project_keys(key), self.project_values(value)

    def _biases(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor, index: Tensor | None, logit_scale: float):
        members = self.score_bias if isinstance(self.score_bias, ScoreBiases) else [self.score_bias]
        for b in members:
            term = b(q, k, q_pos, k_pos, index)
            yield term * logit_scale if b.scaled and logit_scale != 1.0 else term

    def _fused_qkv(self) -> tuple[Tensor, Tensor]:
        """The (3D, D) weight and (3D,) bias of q, k, v; without autograd cached until a parameter changes (an
        incremental step would otherwise copy them once per layer and token)."""
        params = (
            self.q_proj.weight,
            self.k_proj.weight,
            self.v_proj.weight,
            self.q_proj.bias,
            self.k_proj.bias,
            self.v_proj.bias,
        )
        if torch.is_grad_enabled() and any(p.requires_grad for p in params):
            return torch.cat(params[:3]), torch.cat(params[3:])
        key = tuple((p.data_ptr(), p._version, p.device, p.dtype) for p in params)
        cached = self.__dict__.get("_qkv_cache")
        if cached is None or cached[0] != key:
            cached = key, (torch.cat(params[:3]), torch.cat(params[3:]))
            self.__dict__["_qkv_cache"] = cached
        return cached[1]

    def train(self, mode: bool = True):
        self.__dict__.pop("_qkv_cache", None)  # a mode switch is where training and evaluation alternate
        return super().train(mode)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        old = prefix + "relative.table"  # checkpoints before the generic score bias
        if old in state_dict:
            state_dict[prefix + "score_bias.table"] = state_dict.pop(old)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        key_padding_mask: Tensor | None = None,  # (B, Tk) True where padded
        causal: bool = False,
        past_kv: tuple[Tensor, Tensor] | None = None,
        static_kv: tuple[Tensor, Tensor] | None = None,
        need_weights: bool = False,
        rel_index: Tensor | None = None,  # (Tq, Tk) rows of a relative table (the score bias's `index`)
        q_offset: int | None = None,  # position of the first query (default: after the cached keys)
        attn_bias: Tensor | None = None,  # call-time additive term (broadcast to (B, H, Tq, Tk)), never scaled
        logit_scale: float | None = None,  # call-time logit scale (default: the module's `logit_scale`)
    ) -> tuple[Tensor, Tensor | None, tuple[Tensor, Tensor]]:
        """`attn_bias` and `logit_scale` focus one call without changing the module (e.g. a shared encoder
        whose context pass alone is focused, Wang et al. 2019)."""
        B, Tq, D = query.shape
        logit_scale = self.logit_scale if logit_scale is None else logit_scale
        if logit_scale <= 0:
            raise ValueError(f"logit_scale must be > 0, got {logit_scale}")
        if static_kv is None and key is None and value is None:
            # self-attention: one (D, 3D) GEMM instead of three (D, D) ones, same result
            q, k, v = (self._heads(t) for t in F.linear(query, *self._fused_qkv()).chunk(3, dim=-1))
        else:
            q = self._heads(self.q_proj(query))  # (B, H, Tq, dh)
            k, v = static_kv if static_kv is not None else self.project_kv(key, value)
        cache = None
        if past_kv is not None:
            cache = (past_kv if isinstance(past_kv, KVCache) else KVCache(*past_kv)).extend(k, v)
            k, v = cache.keys(), cache.values()
        Tk = k.shape[2]
        if q_offset is not None:
            offset = q_offset
        else:  # absolute position of the first query
            offset = Tk - Tq if past_kv is not None else 0

        mask = None  # additive float mask (B or 1, 1 or H, Tq, Tk)
        plain_causal = (
            causal
            and self.score_bias is None
            and key_padding_mask is None
            and attn_bias is None
            and offset == 0
            and Tq == Tk
        )
        if plain_causal and not need_weights:
            causal = False  # handled by SDPA's is_causal fast path below
        if self.score_bias is not None or causal or key_padding_mask is not None or attn_bias is not None:
            mask = torch.zeros(1, 1, Tq, Tk, dtype=q.dtype, device=q.device)
            q_pos = torch.arange(offset, offset + Tq, device=q.device)
            k_pos = torch.arange(Tk, device=q.device)
            if self.score_bias is not None:
                for term in self._biases(q, k, q_pos, k_pos, rel_index, logit_scale):
                    mask = mask + term
            if attn_bias is not None:
                mask = mask + attn_bias.to(q.dtype)
            if causal:
                mask = mask.masked_fill(k_pos[None, :] > q_pos[:, None], float("-inf"))
            if key_padding_mask is not None:
                mask = mask.masked_fill(key_padding_mask[:, None, None, :], float("-inf"))
        p = self.dropout if self.training else 0.0
        scale = None if logit_scale == 1.0 else logit_scale / math.sqrt(self.d_head)
        if need_weights:
            logits = (q @ k.transpose(-1, -2)) * scale if scale else (q @ k.transpose(-1, -2)) / math.sqrt(self.d_head)
            if mask is not None:
                logits = logits + mask
            weights = logits.softmax(-1)
            out = dropout(weights, p, self.training) @ v
        else:
            weights = None
            out = sdpa_without_cudnn(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=plain_causal and mask is None, scale=scale
            )
        out = out.transpose(1, 2).reshape(B, Tq, D)
        return self.out_proj(out), weights, (k, v) if cache is None else cache
