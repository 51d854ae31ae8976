"""`arch: rdangle-pretrained`: R-Dangle_shr on a pretrained BART (Zheng & Lapata 2023, section 5 and Appendix C:
"We used BART's encoder and decoder to instantiate the adaptive encoder and decoder", k1 = 2, k2 = 10 on
BART-large; R-Dangle_sep "is not compatible with BART").

    fused input   C_t = LN_emb([E(x) + P(0..n-1) + type_src ; E(y_0..y_t) + P(n..n+t) + type_tgt ; end + P(n+t+1)])
    adaptive enc  H_t = the encoder's top k2 layers over the source positions of its bottom k1 layers (the
                  fusion layers: bidirectional over C_t, padding mask only) applied to C_t
    decoder       BART's decoder, cross-attending to H_t (keys and values: R-Dangle_shr)

E is BART's (shared, scaled) token embedding, the encoder's for the source and the decoder's for the prefix;
P its learned absolute positions; LN_emb the encoder's `layernorm_embedding`; mBART's final encoder norm is
applied after the k2 layers. New parameters: `type_src`, `type_tgt` (zero at the start, so the first
re-encoding is BART reading the source and the prefix as one text) and the end marker (BART's embedding of
</s> at the start). k1 + k2 must be the encoder's layers, so every encoder weight is BART's.

Positions (the paper is silent): the fused sequence is numbered as one text, source token i at i, prefix token
y_j at n + j, the end marker at n + t + 1, n being the sentence's own source length (not the padded width, so a
sentence's encoding does not depend on its batch). BART's encoder was pretrained on single texts numbered from
0, never on two segments sharing positions; numbering the prefix after the source keeps the fused input in
that form (the type vectors then only have to tell the segments apart). The cost: n + t + 2 must fit in
BART's position table (1,024 for the released checkpoints).

Re-encoding points, the batched training path (one row per (point, sentence), points grouped in chunks) and
incremental decoding that rebuilds the decoder's cache at points follow `rdangle-shr` exactly, with the point
and chunk functions of `structseq.models.reencoding`. BART's `encoder_layerdrop` is not applied in the fused path.

Dropout on the source part of the fused input (`source_dropout`): the reference trains on one copy of the batch
per re-encoding point, each embedding the source again, so each point draws its own mask (`per_point`, the
default: the source embedding is computed once per batch and dropped out per (point, sentence) row);
`per_batch` draws one mask per batch and reuses it at every point (structseq before issue 44).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from structseq.errors import ConfigError, DataError
from structseq.fields import option
from structseq.models.base import Inputs, State, Vocabs, with_width
from structseq.models.hf_checkpoint import (
    RowCache,
    SpecialIds,
    cache_keyword,
    load_config,
    load_seq2seq,
    output_cache,
    special_ids,
)
from structseq.models.hf_seq2seq import HFSeq2SeqConfig, PretrainedSeq2Seq, model_width
from structseq.models.reencoding import (
    auto_chunk_points,
    gather_owned,
    is_reencoding_point,
    live_rows,
    run_chunks,
    step_owners,
)
from structseq.nn.attention import without_cudnn_attention
from structseq.registry import register_arch

FAMILY = ("bart", "mbart")
SOURCE_DROPOUT = ("per_point", "per_batch")


def additive_mask(keep: Tensor, dtype: torch.dtype) -> Tensor:
    """A (R, L) keep-mask as the additive (R, 1, L, L) attention mask transformers' layers take."""
    R, L = keep.shape
    mask = torch.zeros(R, 1, 1, L, dtype=dtype, device=keep.device)
    return mask.masked_fill(~keep[:, None, None, :], torch.finfo(dtype).min).expand(R, 1, L, L)


def run_layer(layer: nn.Module, x: Tensor, mask: Tensor) -> Tensor:
    """One encoder layer of transformers 4.x (returns a tuple, takes `layer_head_mask`) or 5.x."""
    kw = {"layer_head_mask": None} if "layer_head_mask" in inspect.signature(layer.forward).parameters else {}
    out = layer(x, mask, **kw)
    return out[0] if isinstance(out, tuple) else out


class RDanglePretrained(PretrainedSeq2Seq):
    sentence_state = frozenset({"src", "src_mask", "src_len", "src_x"})  # H and the cache follow the prefix
    AUTO_CHUNK_STEPS = 8

    def __init__(
        self,
        hf,
        ids: SpecialIds,
        fusion_layers: int,
        interval: int = 1,
        chunk_points: int = 0,
        recompute_chunks: bool = False,
        lr_scale: float = 1.0,
        source_dropout: str = "per_point",
    ):
        super().__init__(hf, ids, lr_scale)
        if source_dropout not in SOURCE_DROPOUT:
            raise ValueError(f"source_dropout must be one of {SOURCE_DROPOUT}, got {source_dropout!r}")
        self.per_point = source_dropout == "per_point"
        d = model_width(hf.config)
        self.k1, self.interval, self.chunk_points, self.recompute_chunks = (
            fusion_layers,
            interval,
            chunk_points,
            recompute_chunks,
        )
        self.type_src = nn.Parameter(torch.zeros(d))
        self.type_tgt = nn.Parameter(torch.zeros(d))
        with torch.no_grad():
            self.end = nn.Parameter(self.encoder.embed_tokens(torch.tensor([ids.eos]))[0].detach().clone())
        self._cache_key = cache_keyword(self.decoder)

    @property
    def encoder(self) -> nn.Module:
        return self.hf.get_encoder()

    @property
    def decoder(self) -> nn.Module:
        return self.hf.get_decoder()

    # ------------------------------------------------------------------ the fused input and the adaptive encoder
    def _dropout(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.hf.config.dropout, self.training)

    def _embed(self, x: Tensor, positions: Tensor, drop: bool = True) -> Tensor:
        """Token vectors + BART's learned positions, then layernorm_embedding and (with `drop`) dropout."""
        table = self.encoder.embed_positions
        pos = F.embedding(positions + getattr(table, "offset", 0), table.weight)
        x = self.encoder.layernorm_embedding(x + pos)
        return self._dropout(x) if drop else x

    def output_limit(self, inputs: Inputs) -> Tensor | None:
        """The decoder's limit, and the fused input's: [source ; y_0..y_p ; end marker] within the encoder's
        positions, so at most positions - |x| - 2 output tokens."""
        table = self.encoder.embed_positions
        most = table.weight.shape[0] - getattr(table, "offset", 0)
        fused = most - inputs["src"].ne(self.pad).sum(1).cpu() - 2
        own = super().output_limit(inputs)
        return fused if own is None else torch.minimum(own, fused)

    def encode(self, inputs: Inputs) -> State:
        """Source-only work, once per batch: the source part of the fused input (dropped out here with
        `source_dropout: per_batch`, else per row in `fuse`)."""
        src = inputs["src"]
        mask = src.ne(self.pad)
        pos = torch.arange(src.shape[1], device=src.device).expand_as(src)
        src_x = self._embed(self.encoder.embed_tokens(src) + self.type_src, pos, drop=not self.per_point)
        return {"src": src, "src_mask": mask, "src_len": mask.sum(1), "src_x": src_x}

    def prefix_segment(
        self, tgt_in: Tensor, points: Tensor, src_len: Tensor, sents: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """Fused-input rows after the source, row r being point points[r] of sentence sents[r] (default: one
        row per sentence): y_0..y_p, the end marker, then padding. Returns (R, L, D) and a keep-mask (R, L)."""
        if sents is None:
            sents = torch.arange(tgt_in.shape[0], device=tgt_in.device)
            points = points.expand(sents.shape[0])
        L = int(points.max()) + 2
        emb = self.decoder.embed_tokens(tgt_in[:, : L - 1]) + self.type_tgt
        emb = F.pad(emb, (0, 0, 0, 1)).index_select(0, sents)  # (R, L, D)
        steps = torch.arange(L, device=tgt_in.device)
        in_prefix, at_end = steps[None, :] <= points[:, None], steps[None, :] == points[:, None] + 1
        seg = torch.where(at_end[..., None], self.end, torch.where(in_prefix[..., None], emb, 0.0))
        keep = in_prefix | at_end
        # padding slots (a row whose point is before the batch's last) read position 0: masked out, they must
        # not push a long source's row past the table
        positions = (src_len.index_select(0, sents)[:, None] + steps[None, :]).masked_fill(~keep, 0)
        most = self.encoder.embed_positions.weight.shape[0] - getattr(self.encoder.embed_positions, "offset", 0)
        if int(positions.max()) >= most:
            raise DataError(  # readers skip or refuse such examples (fused_extra) and decoding clamps its limit
                f"the fused input (source + target prefix + end marker) needs {int(positions.max()) + 1}"
                f" positions, more than the backbone's {most}; shorten the examples (data.max_length)"
            )
        return self._embed(seg, positions), keep

    def fuse(self, src_x: Tensor, src_mask: Tensor, seg: Tensor, seg_keep: Tensor) -> Tensor:
        """H (R, S, D): k1 fusion layers over [source ; segment], then k2 layers over the source positions.
        The source rows get their dropout here with `source_dropout: per_point` (a fresh mask per row)."""
        S = src_x.shape[1]
        x = torch.cat([self._dropout(src_x) if self.per_point else src_x, seg], 1)
        layers = self.encoder.layers
        mask = additive_mask(torch.cat([src_mask, seg_keep], 1), x.dtype)
        for layer in layers[: self.k1]:
            x = run_layer(layer, x, mask)
        h, mask = x[:, :S], additive_mask(src_mask, x.dtype)
        for layer in layers[self.k1 :]:
            h = run_layer(layer, h, mask)
        norm = getattr(self.encoder, "layer_norm", None)  # mBART: a final encoder norm
        return norm(h) if norm is not None else h

    # ------------------------------------------------------------------ decoder and output layer
    def _decode(self, tokens: Tensor, keys: Tensor, src_mask: Tensor, cache=None, use_cache: bool = False):
        out = self.decoder(
            input_ids=tokens,
            encoder_hidden_states=keys,
            encoder_attention_mask=src_mask.long(),
            use_cache=use_cache,
            **{self._cache_key: cache},
        )
        return out.last_hidden_state, output_cache(out)

    def log_probs(self, h: Tensor) -> Tensor:
        logits = self.hf.lm_head(h)
        bias = getattr(self.hf, "final_logits_bias", None)
        return (logits + bias if bias is not None else logits).float().log_softmax(-1)

    # ------------------------------------------------------------------ training: all points, batched
    @without_cudnn_attention
    def forward(self, batch: Inputs) -> Tensor:
        """Teacher-forced log-probs (B, T, V); outputs at padding positions come from zero features."""
        tgt_in = batch["tgt_in"]
        enc = self.encode(batch)
        B, T = tgt_in.shape
        present = tgt_in.ne(self.pad)
        present[:, 0] = True  # the decoder start may be the pad id (T5-style)
        lengths = present.sum(1)
        size = self.chunk_points or auto_chunk_points(self.interval, T, self.AUTO_CHUNK_STEPS)
        outputs = run_chunks(self._chunk, (enc, tgt_in, lengths), lengths, self.interval, size, self.recompute_chunks)
        done = sum(out.shape[1] for out in outputs)
        if done < T:
            outputs.append(self.log_probs(enc["src_x"].new_zeros(B, T - done, enc["src_x"].shape[-1])))
        return torch.cat(outputs, 1)

    @without_cudnn_attention  # also where `recompute_chunks` runs it again, in the backward pass
    def _chunk(self, enc: State, tgt_in: Tensor, lengths: Tensor, group: Tensor) -> Tensor:
        """Log-probs (B, n, V) of the steps owned by the consecutive re-encoding points `group`."""
        B, T = tgt_in.shape
        o = self.interval or T
        point_of, sent_of = live_rows(group, lengths)
        seg, keep = self.prefix_segment(tgt_in, group[point_of], enc["src_len"], sent_of)
        src_mask = enc["src_mask"].index_select(0, sent_of)
        keys = self.fuse(enc["src_x"].index_select(0, sent_of), src_mask, seg, keep)
        first, end = int(group[0]), min(int(group[-1]) + o, T)
        h, _ = self._decode(tgt_in.index_select(0, sent_of)[:, :end], keys, src_mask)
        x = gather_owned(h[:, first:end], step_owners(group, point_of, sent_of, B, end - first, o))
        return self.log_probs(x)

    # ------------------------------------------------------------------ incremental decoding
    def init_state(self, enc: State) -> State:
        B = enc["src"].shape[0]
        return {**enc, "prefix": enc["src"].new_empty(B, 0), "step": 0, "keys": None, "cache": RowCache(None)}

    @without_cudnn_attention
    def step(self, prev: Tensor, state: State) -> tuple[Tensor, State]:
        t = state["step"]
        prev = self.first_input(prev, t)
        prefix = torch.cat([state["prefix"], prev[:, None]], 1)  # y_0 .. y_t
        if is_reencoding_point(t, self.interval):  # re-encode, rebuild the decoder's cache over the whole prefix
            seg, keep = self.prefix_segment(prefix, torch.tensor([t], device=prev.device), state["src_len"])
            keys = self.fuse(state["src_x"], state["src_mask"], seg, keep)
            h, cache = self._decode(prefix, keys, state["src_mask"], use_cache=True)
        else:
            keys = state["keys"]
            h, cache = self._decode(prev[:, None], keys, state["src_mask"], state["cache"].cache, use_cache=True)
        return self.log_probs(h[:, -1]), {
            **state,
            "prefix": prefix,
            "step": t + 1,
            "keys": keys,
            "cache": RowCache(cache),
        }


# ---------------------------------------------------------------- schema and builder


@dataclass
class RDanglePretrainedConfig(HFSeq2SeqConfig):
    """R-Dangle_shr on a local BART-family checkpoint: its encoder's bottom k1 layers fuse the source with the
    target prefix, its top k2 layers re-encode the source, its decoder cross-attends to the result."""

    #: [source ; y_0..y_p ; end marker]: at the last point p = T - 1 of T decoder inputs (one per target piece)
    fused_extra: ClassVar[int | None] = 1
    arch: str = option("rdangle-pretrained", "R-Dangle_shr on a local BART-family checkpoint")
    interval: int = option(
        1,
        "re-encoding interval o: points at steps 1, 1+o, 1+2o, ... (0 = only at step 1; the paper: 6 on SMCalFlow-CS)",
        ge=0,
        le=100_000,
    )
    fusion_layers: int = option(
        2,
        "k1: the encoder's bottom layers, over [source; target prefix; end marker], bidirectional (the paper: 2)",
        ge=1,
        le=1000,
    )
    post_fusion_layers: int = option(
        10,
        "k2: the encoder's remaining layers, over the source positions; k1 + k2 = "
        "the encoder's layers (the paper, BART-large: 10)",
        ge=0,
        le=1000,
    )
    chunk_points: int = option(
        0,
        "training: re-encoding points computed together in one batched pass (0 = auto, "
        "points covering about 8 target steps)",
        ge=0,
        le=100_000,
    )
    recompute_chunks: bool = option(
        False,
        "training: recompute each chunk's activations in the backward pass "
        "(peak memory of one chunk, about a third more compute)",
    )
    source_dropout: str = option(
        "per_point",
        "training: dropout on the source embedding, a fresh mask at every re-encoding point (per_point, as the "
        "reference's copy of the batch per point) or one mask per batch reused at every point (per_batch)",
        choices=SOURCE_DROPOUT,
    )


def check_backbone(cfg: RDanglePretrainedConfig, config) -> None:
    """A BART-family encoder-decoder whose encoder has k1 + k2 layers, or a ConfigError naming the keys."""
    if config.model_type not in FAMILY:
        raise ConfigError(
            f"'model.pretrained': rdangle-pretrained runs on the BART family ({', '.join(FAMILY)}); "
            f"{cfg.pretrained!r} holds a {config.model_type} model (use arch hf-seq2seq for it)"
        )
    n = config.encoder_layers
    if cfg.fusion_layers + cfg.post_fusion_layers != n:
        raise ConfigError(
            f"'model.fusion_layers' ({cfg.fusion_layers}) + 'model.post_fusion_layers' "
            f"({cfg.post_fusion_layers}) must equal the encoder's {n} layers in {cfg.pretrained!r}"
        )


@register_arch("rdangle-pretrained", config=RDanglePretrainedConfig, tasks=("hf-seq2seq",))
def build_rdangle_pretrained(
    cfg: RDanglePretrainedConfig, vocabs: Vocabs, train_examples: Sequence | None = None
) -> RDanglePretrained:
    check_backbone(cfg, load_config(cfg.pretrained))
    ids = special_ids(cfg.pretrained)
    hf = load_seq2seq(cfg.pretrained)
    model = RDanglePretrained(
        hf,
        ids,
        cfg.fusion_layers,
        cfg.interval,
        cfg.chunk_points,
        cfg.recompute_chunks,
        cfg.lr_scale,
        source_dropout=cfg.source_dropout,
    )
    return with_width(model, model_width(hf.config))
