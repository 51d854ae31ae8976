"""Dangle and R-Dangle (Zheng & Lapata 2022, 2023): the source is re-encoded from the decoded prefix.

    value encoder (rdangle-sep only)  H^v = Encoder(x)                               once per batch
    key encoder   S   = PreFusion(embed(x))                                          once per batch (k0 layers)
                  C_t = [S + type_src ; embed(y_0..y_t) + type_tgt ; end]            at each re-encoding point
                  H_t = norm(PostFusion(Fusion(C_t)[:n]))                            k1 bidirectional + k2 layers
    decoder       a Transformer decoder whose cross-attention takes keys from H_t and values from H^v
                  (rdangle-sep) or from H_t (rdangle-shr; Dangle = rdangle-shr with interval 1)

Re-encoding points are the steps 0, o, 2o, ... (the paper's t_1 = 1, t_{i+1} = t_i + o); y_0 is <s>. At a
point the decoder re-runs over the whole prefix against the new encoding (its cache is rebuilt); between
points it decodes incrementally with the cached states, like a plain Transformer.

Training (`forward`) never loops over time steps. Outputs at steps p .. p+o-1 of the point p equal one
causal decoder pass over y_0 .. y_{p+o-1} against H_p, so a group of consecutive points is one batched
pass with a row per (point, sentence): the row's fusion input is its prefix, the end marker, then padding;
its decoder outputs at steps p .. p+o-1 are gathered. Rows whose point lies beyond the sentence's target
are skipped. Source-only work (the value encoder, its cross-attention value projections, the pre-fusion
layers) runs once per batch. `chunk_points` sets how many points share a pass; with `recompute_chunks`
each chunk's activations are recomputed in the backward pass instead of stored, so training memory is
that of one chunk (activation checkpointing, about a third more compute).

`source_dropout: per_batch` (default for dangle, rdangle-shr, rdangle-sep): as the reference code
(github:mswellhao/Dangle at 27223eb, fairseq/fairseq/models/transformer_rdangle_kv_sep.py and
transformer_rdangle_kv_shared.py), the source is embedded and dropped out once (kv_sep.py:492, kv_shared.py:417), the
bottom layers run once (kv_sep.py:528, 949) and their output is copied for every point (kv_sep.py:981,
kv_shared.py:892); the target embedding is dropped once before the loop over points (kv_sep.py:939,
kv_shared.py:870) and copied into each point's fusion prefix and decoder input (kv_sep.py:992, 1024). Here too: one
draw per batch whatever `chunk_points` is (before issue 55 the prefix and the decoder's input were drawn again per
chunk and row, and the default was per_point: seeded runs of these archs changed with the default). `per_point`
draws the key encoder's source (with the k0 layers) and prefix afresh for every (point, sentence) row, as
roberta_dangle.py:686 does for the pretrained model (`structseq.models.rdangle_pretrained`, whose default it is).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from structseq.errors import ConfigError
from structseq.fields import option
from structseq.models.base import Autoregressive, Inputs, State, Vocabs, with_width
from structseq.models.reencoding import (
    auto_chunk_points,
    gather_owned,
    is_reencoding_point,
    live_rows,
    reencoding_points,
    run_chunks,
    step_owners,
)
from structseq.models.transformer import (
    TransformerBlocksConfig,
    TransformerDecoder,
    decoder_and_head,
    embeddings,
    final_norm,
    layer_args,
)
from structseq.nn.accelerator import on_accelerator
from structseq.nn.layers import EncoderLayer, TokenEmbedding
from structseq.registry import COMPILES, register_arch

Heads = list[dict[str, tuple[Tensor, Tensor]]]  # per decoder layer: {"source": projected (k, v)}, (R, H, S, dh)


class ValueEncoder(nn.Module):
    """R-Dangle_sep's standard encoder. Its bottom `skip` layers may be the key encoder's pre-fusion layers:
    it then starts from their output instead of recomputing them."""

    def __init__(self, layers: list[EncoderLayer], final_norm: nn.Module | None, skip: int = 0):
        super().__init__()
        self.layers, self.final_norm, self.skip = nn.ModuleList(layers), final_norm, skip

    def forward(self, embedded: Tensor, pre_fused: Tensor, pad_mask: Tensor) -> Tensor:
        x = pre_fused if self.skip else embedded
        for layer in self.layers[self.skip :]:
            x = layer(x, pad_mask)
        return self.final_norm(x) if self.final_norm is not None else x


class AdaptiveKeyEncoder(nn.Module):
    """The adaptive encoder: k0 source-only layers, k1 fusion layers over [source ; prefix ; end marker]
    (bidirectional, padding mask only), then k2 layers over the source positions."""

    def __init__(
        self,
        d_model: int,
        pre: list[EncoderLayer],
        fusion: list[EncoderLayer],
        post: list[EncoderLayer],
        final_norm: nn.Module | None,
    ):
        super().__init__()
        self.pre, self.fusion, self.post = nn.ModuleList(pre), nn.ModuleList(fusion), nn.ModuleList(post)
        self.final_norm = final_norm
        self.type_src = nn.Parameter(torch.empty(d_model).normal_(0, d_model**-0.5))
        self.type_tgt = nn.Parameter(torch.empty(d_model).normal_(0, d_model**-0.5))
        self.end = nn.Parameter(torch.empty(d_model).normal_(0, d_model**-0.5))

    def pre_fuse(self, embedded: Tensor, pad_mask: Tensor) -> Tensor:
        x = embedded
        for layer in self.pre:
            x = layer(x, pad_mask)
        return x

    def forward(self, src_states: Tensor, src_pad: Tensor, tgt: Tensor, tgt_pad: Tensor | None) -> Tensor:
        """src_states (R, S, D) from `pre_fuse`; tgt (R, L, D): embedded prefix + type_tgt, the end marker,
        then padding (`tgt_pad` True there). Returns H (R, S, D)."""
        S, L = src_states.shape[1], tgt.shape[1]
        x = torch.cat([src_states + self.type_src, tgt], 1)
        pad = torch.cat([src_pad, tgt_pad if tgt_pad is not None else src_pad.new_zeros(tgt.shape[:2])], 1)
        rel = self.fusion[0].self_attn.score_bias if len(self.fusion) else None
        idx = rel.segment_index(S, L, x.device) if rel is not None else None
        for i, layer in enumerate(self.fusion):  # the last one only for the source queries: the rest is dropped
            x = layer(x, pad, rel_index=idx, n_queries=S if i == len(self.fusion) - 1 else None)
        h = x[:, :S]
        for layer in self.post:
            h = layer(h, src_pad)
        return self.final_norm(h) if self.final_norm is not None else h


class RDangleSeq2Seq(Autoregressive):
    sentence_state = frozenset({"src", "src_pad", "src_states", "values"})  # cross_kv follows the prefix

    AUTO_CHUNK_STEPS = 8  # measured best on COGS batches (benchmarks/bench_dangle.py): less padding per pass
    # on a GPU an update is bound by kernel launches, not arithmetic (results/gpu/2026-11-26-h200): fewer, larger
    # passes (a COGS batch of 160 steps in 5 passes instead of 20; about a fifth more padded work)
    AUTO_CHUNK_STEPS_ACCELERATOR = 32

    def __init__(
        self,
        src_embed: TokenEmbedding,
        key_encoder: AdaptiveKeyEncoder,
        value_encoder: ValueEncoder | None,
        decoder: TransformerDecoder,
        head: nn.Module,
        interval: int = 1,
        chunk_points: int = 0,
        recompute_chunks: bool = False,
        source_dropout: str = "per_batch",
    ):
        super().__init__()
        self.per_point = source_dropout == "per_point"
        if interval < 0 or chunk_points < 0:
            raise ValueError(f"interval ({interval}) and chunk_points ({chunk_points}) must be >= 0")
        self.src_embed, self.key_encoder, self.value_encoder = src_embed, key_encoder, value_encoder
        self.decoder, self.head = decoder, head
        self.interval, self.chunk_points = interval, chunk_points  # interval 0: one encoding, at step 0
        self.recompute_chunks = recompute_chunks  # activation checkpointing per chunk: memory of one chunk

    @property
    def separate(self) -> bool:
        return self.value_encoder is not None

    def points(self, length: int) -> list[int]:
        """Re-encoding steps (0-based) for a target of `length` decoder inputs."""
        return reencoding_points(length, self.interval)

    def is_point(self, step: int) -> bool:
        return is_reencoding_point(step, self.interval)

    # ------------------------------------------------------------------ source-only work, once per batch

    def encode(self, inputs: Inputs) -> State:
        src = inputs["src"]
        pad = src.eq(self.pad)
        embedded = self.src_embed(src)
        states = self.key_encoder.pre_fuse(embedded, pad)
        enc = {"src": src, "src_pad": pad, "src_states": states}
        if self.per_point and self.training:  # the key encoder's source is dropped out per row (`_chunk`)
            enc["src_clean"] = self.src_embed(src, drop=False)
        if self.separate:
            values = self.value_encoder(embedded, states, pad)
            enc["values"] = [layer.cross_attn["source"].project_values(values) for layer in self.decoder.layers]
        return enc

    # ------------------------------------------------------------------ pieces shared by training and decoding

    def prefix_segment(
        self,
        tgt_in: Tensor,
        points: Tensor,
        sents: Tensor | None = None,
        length: int | None = None,
        embedded: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Fusion inputs of R rows, row r being re-encoding point points[r] of sentence sents[r] (default: one
        row per sentence): embedded prefix y_0..y_p + type_tgt, the end marker at p + 1, then padding up to
        the longest row (or to `length`, known without reading the points); `embedded`: the batch's target
        embedding, dropped out once (`per_batch`). Returns (R, L, D) and the padding mask (R, L)."""
        if sents is None:
            sents = torch.arange(tgt_in.shape[0], device=tgt_in.device)
            points = points.expand(sents.shape[0])
        L = int(points.max()) + 2 if length is None else length
        rows = self.per_point and self.training  # dropout per row (`source_dropout`)
        if embedded is None:
            embedded = self.decoder.embed(tgt_in[:, : L - 1], drop=not rows)
        emb = embedded[:, : L - 1]  # (B, L-1, D)
        if rows:  # a fresh mask per (point, sentence) row
            emb = self.decoder.embed.drop(F.pad(emb, (0, 0, 0, 1)).index_select(0, sents)) + self.key_encoder.type_tgt
        else:  # type_tgt added before the rows are gathered: per_batch sums its gradient as before issue 44
            emb = F.pad(emb + self.key_encoder.type_tgt, (0, 0, 0, 1)).index_select(0, sents)  # (R, L, D)
        pos = torch.arange(L, device=tgt_in.device)
        in_prefix = pos[None, :] <= points[:, None]  # (R, L)
        at_end = pos[None, :] == points[:, None] + 1
        seg = torch.where(in_prefix[..., None], emb, 0.0)
        seg = torch.where(at_end[..., None], self.key_encoder.end, seg)
        return seg, ~(in_prefix | at_end)

    def cross_kv(self, keys: Tensor, enc: State, sents: Tensor | None = None) -> Heads:
        """Per decoder layer, (k, v): k projected from the adaptive encoding H (one row per re-encoding), v
        from the value encoding projected once per batch (sep; `sents` picks each row's sentence) or from H."""
        out = []
        for i, layer in enumerate(self.decoder.layers):
            attn = layer.cross_attn["source"]
            k = attn.project_keys(keys)
            if self.separate:
                v = enc["values"][i] if sents is None else enc["values"][i].index_select(0, sents)
            else:
                v = attn.project_values(keys)
            out.append({"source": (k, v)})
        return out

    # ------------------------------------------------------------------ training: all points, batched

    def forward(self, batch: Inputs) -> Tensor:
        """Teacher-forced log-probs (B, T, V). Rows (point, sentence) whose point lies beyond the sentence's
        target are never computed; the outputs at those padding positions come from zero features."""
        src, tgt_in = batch["src"], batch["tgt_in"]
        enc = self.encode(batch)
        if not (self.per_point and self.training):  # per_batch: the target embedding dropped out once
            enc["tgt_embedded"] = self.decoder.embed(tgt_in)
        B, T = tgt_in.shape
        lengths = tgt_in.ne(self.pad).sum(1)  # decoder inputs per sentence, <s> included
        steps = self.AUTO_CHUNK_STEPS_ACCELERATOR if on_accelerator(tgt_in) else self.AUTO_CHUNK_STEPS
        size = self.chunk_points or auto_chunk_points(self.interval, T, steps)
        if self.static_shapes:
            outputs = self._fixed_chunks(enc, tgt_in, size)
        else:
            outputs = run_chunks(
                self._chunk, (enc, tgt_in, lengths), lengths, self.interval, size, self.recompute_chunks
            )
        x = torch.cat([out[0] for out in outputs], 1)
        attn = torch.cat([out[1] for out in outputs], 1) if self.head.needs_attention else None
        if x.shape[1] < T:  # trailing all-padding columns: zero features
            x = F.pad(x, (0, 0, 0, T - x.shape[1]))
            attn = F.pad(attn, (0, 0, 0, T - attn.shape[1])) if attn is not None else None
        return self.head(x, attn, src)  # once per batch, not per chunk: fewer operators

    def _fixed_chunks(self, enc: State, tgt_in: Tensor, size: int) -> list[tuple[Tensor, Tensor | None]]:
        """`static_shapes`: every (point, sentence) row up to the padded length, sizes from the batch's shape alone
        (no host read: capturable); rows past a sentence's end compute on padding, which the loss masks."""
        (B, T), pts, outputs = tgt_in.shape, reencoding_points(tgt_in.shape[1], self.interval), []
        for i in range(0, len(pts), size):
            first, last = pts[i], pts[min(i + size, len(pts)) - 1]
            group = torch.arange(first, last + 1, self.interval or T, device=tgt_in.device)
            point_of = torch.arange(len(group), device=tgt_in.device).repeat_interleave(B)
            sent_of = torch.arange(B, device=tgt_in.device).repeat(len(group))
            args = (enc, tgt_in, group, point_of, sent_of, first, last + 2)
            if self.recompute_chunks and torch.is_grad_enabled():
                outputs.append(checkpoint(self._rows, *args, use_reentrant=False))
            else:
                outputs.append(self._rows(*args))
        return outputs

    def _chunk(self, enc: State, tgt_in: Tensor, lengths: Tensor, group: Tensor) -> tuple[Tensor, Tensor | None]:
        """Decoder features (B, n, D) and source attention (B, n, S) (None when the head takes none) of the steps
        owned by the consecutive re-encoding points `group`: the rows of the points within each sentence."""
        point_of, sent_of = live_rows(group, lengths)
        return self._rows(enc, tgt_in, group, point_of, sent_of, int(group[0]), None, int(group[-1]))

    def _rows(
        self,
        enc: State,
        tgt_in: Tensor,
        group: Tensor,
        point_of: Tensor,
        sent_of: Tensor,
        first: int,
        length: int | None,
        last: int | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """`_chunk`'s work for the given rows (point index in `group`, sentence); `first` / `last`: the group's
        first and last points, `length` the fusion inputs' padded length (None: the longest row's)."""
        B, T = tgt_in.shape
        o = self.interval or T
        last = length - 2 if last is None else last
        row_points, pad = group[point_of], enc["src_pad"].index_select(0, sent_of)
        emb = enc.get("tgt_embedded")
        seg, seg_pad = self.prefix_segment(tgt_in, row_points, sent_of, length, emb)
        if "src_clean" in enc:  # a fresh mask per (point, sentence) row
            states = self.key_encoder.pre_fuse(self.src_embed.drop(enc["src_clean"].index_select(0, sent_of)), pad)
        else:
            states = enc["src_states"].index_select(0, sent_of)
        keys = self.key_encoder(states, pad, seg, seg_pad)
        end = min(last + o, T)  # the top decoder layer only computes the steps of this group
        x, _, attn = self.decoder(
            tgt_in.index_select(0, sent_of)[:, :end],
            embedded=None if emb is None else emb.index_select(0, sent_of)[:, :end],
            memories={"source": {"pad": pad}},
            cross_kv=self.cross_kv(keys, enc, sent_of),
            need_weights=self.head.needs_attention,
            keep_last=end - first,
        )
        attn = attn and attn["source"]
        owners = step_owners(group, point_of, sent_of, B, end - first, o)
        x = gather_owned(x, owners)
        if attn is not None:
            attn = gather_owned(attn, owners)
        return x, attn

    # ------------------------------------------------------------------ incremental decoding

    def init_state(self, enc: State) -> State:
        B = enc["src"].shape[0]
        return {**enc, "prefix": enc["src"].new_empty(B, 0), "step": 0, "cross_kv": None, "self_kv": None}

    def step(self, prev: Tensor, state: State) -> tuple[Tensor, State]:
        t = state["step"]
        prefix = torch.cat([state["prefix"], prev[:, None]], 1)  # y_0 .. y_t
        need = self.head.needs_attention
        if self.is_point(t):  # re-encode the keys and rebuild the decoder's cache over the whole prefix
            seg, _ = self.prefix_segment(prefix, torch.tensor([t], device=prev.device))
            keys = self.key_encoder(state["src_states"], state["src_pad"], seg, None)
            cross = self.cross_kv(keys, state)
            x, self_kv, attn = self.decoder(
                prefix, memories={"source": {"pad": state["src_pad"]}}, cross_kv=cross, need_weights=need, keep_last=1
            )
        else:
            cross = state["cross_kv"]
            x, self_kv, attn = self.decoder(
                prev[:, None],
                memories={"source": {"pad": state["src_pad"]}},
                cross_kv=cross,
                past_kv=state["self_kv"],
                offset=t,
                need_weights=need,
            )
        log_probs = self.head(x, attn and attn["source"], state["src"])[:, 0]
        return log_probs, {**state, "prefix": prefix, "step": t + 1, "cross_kv": cross, "self_kv": self_kv}


# ---------------------------------------------------------------- schemas and builder


@dataclass
class DangleConfig(TransformerBlocksConfig):
    """Dangle (Zheng & Lapata 2022) and R-Dangle_shr (Zheng & Lapata 2023): the source is re-encoded from the
    decoded prefix, one adaptive encoding for keys and values. The key encoder is k0 + k1 + k2 layers."""

    arch: str = option("dangle", "dangle (= rdangle-shr with interval 1) | rdangle-shr | rdangle-sep")
    positions: str = option(
        "relative", "relative (the papers' setting) | sinusoidal", choices=("sinusoidal", "relative")
    )
    interval: int = option(1, "re-encoding interval o: points at steps 1, 1+o, 1+2o, ... (0 = only at step 1)", ge=0)
    pre_fusion_layers: int = option(
        0, "k0: source-only key-encoder layers before fusion (computed once per batch)", ge=0
    )
    fusion_layers: int = option(
        2,
        "k1: layers over [source; target prefix; end marker], bidirectional (without "
        "fusion the prefix never reaches the source)",
        ge=1,
    )
    post_fusion_layers: int = option(2, "k2: layers over the source positions after fusion", ge=0)
    chunk_points: int = option(
        0,
        "training: re-encoding points computed together in one batched pass (bounds "
        "memory and padding; 0 = auto, points covering about 8 target steps)",
        ge=0,
    )
    recompute_chunks: bool = option(
        False,
        "training: recompute each chunk's activations in the backward pass instead "
        "of storing them (peak memory of one chunk, about a third more compute)",
    )
    source_dropout: str = option(
        "per_batch",
        "training: dropout on the source and target embeddings, one draw per batch reused at every re-encoding "
        "point (per_batch, as the reference code) or fresh masks for the key encoder at every point (per_point)",
        choices=("per_point", "per_batch"),
    )


@dataclass
class RDangleSepConfig(DangleConfig):
    """R-Dangle_sep: values come from a standard encoder run once, keys are re-encoded."""

    arch: str = option("rdangle-sep", "rdangle-sep (values encoded once, keys re-encoded)")
    encoder_layers: int = option(2, "depth of the value encoder (a standard encoder run once)", ge=1)
    share_pre_fusion: bool = option(False, "the k0 pre-fusion layers are the value encoder's bottom layers")
    share_post_fusion: bool = option(
        False,
        "the k2 post-fusion layers are the value encoder's top layers (the paper's best: value 10, k1 2, k2 8, shared)",
    )


@register_arch("dangle", config=DangleConfig, attention=True, capabilities=(COMPILES,))
@register_arch("rdangle-shr", config=DangleConfig, attention=True, capabilities=(COMPILES,))
@register_arch("rdangle-sep", config=RDangleSepConfig, attention=True, capabilities=(COMPILES,))
def build_dangle(cfg: DangleConfig, vocabs: Vocabs, train_examples: Sequence | None = None) -> RDangleSeq2Seq:
    """dangle / rdangle-shr / rdangle-sep. Dangle is rdangle-shr with interval 1 (same modules, same weights)."""
    src_vocab, tgt_vocab = vocabs["src"], vocabs["tgt"]
    separate = isinstance(cfg, RDangleSepConfig)
    if cfg.arch == "dangle" and cfg.interval != 1:
        raise ConfigError(
            "'model.interval': dangle re-encodes at every step (interval 1); use arch rdangle-shr for other intervals"
        )
    args = layer_args(cfg)
    src_embed, tgt_embed = embeddings(cfg, src_vocab, tgt_vocab)
    pre = [EncoderLayer(**args) for _ in range(cfg.pre_fusion_layers)]
    fusion = [EncoderLayer(**args, segment_relative=True) for _ in range(cfg.fusion_layers)]
    post = [EncoderLayer(**args) for _ in range(cfg.post_fusion_layers)]
    value_encoder = None
    if separate:
        bottom = pre if cfg.share_pre_fusion else []
        top = post if cfg.share_post_fusion else []
        own = cfg.encoder_layers - len(bottom) - len(top)
        if own < 0:
            raise ConfigError(
                f"'model.encoder_layers' = {cfg.encoder_layers} is fewer than the value-encoder layers "
                f"shared with the key encoder ({len(bottom)} pre-fusion + {len(top)} post-fusion)"
            )
        value_encoder = ValueEncoder(
            bottom + [EncoderLayer(**args) for _ in range(own)] + top, final_norm(cfg), skip=len(bottom)
        )
    key_encoder = AdaptiveKeyEncoder(cfg.d_model, pre, fusion, post, final_norm(cfg))
    decoder, head = decoder_and_head(cfg, tgt_embed, src_vocab, tgt_vocab, train_examples)
    return with_width(
        RDangleSeq2Seq(
            src_embed,
            key_encoder,
            value_encoder,
            decoder,
            head,
            cfg.interval,
            cfg.chunk_points,
            cfg.recompute_chunks,
            cfg.source_dropout,
        ),
        cfg.d_model,
    )
