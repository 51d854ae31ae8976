"""The authors' training formulations of Dangle / R-Dangle, kept as references for tests and benchmarks.

Both compute the same teacher-forced log-probabilities as `RDangleSeq2Seq.forward`, the slow way:
- `per_step_log_probs`: Dangle's reference training, a Python loop over target positions, each
  re-running the whole model (source encoding included) on the prefix and keeping its last output;
- `batch_copy_log_probs`: R-Dangle's reference training, one copy of the batch per re-encoding point,
  each re-running everything on full-length targets and keeping the outputs of its own steps.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from structseq.models.dangle import RDangleSeq2Seq


def _decode_at(
    model: RDangleSeq2Seq, enc: dict, tgt_in: Tensor, point: int, length: int, full_width: bool = False
) -> tuple[Tensor, Tensor]:
    """Re-encode at `point` and decode y_0 .. y_{length-1} against it: features and attention (B, length, .).
    `full_width`: the fusion input is padded to the whole target, as in a batch of copies."""
    seg, seg_pad = model.prefix_segment(tgt_in, torch.tensor([point], device=tgt_in.device))
    if full_width:
        extra = tgt_in.shape[1] + 1 - seg.shape[1]
        seg, seg_pad = F.pad(seg, (0, 0, 0, extra)), F.pad(seg_pad, (0, extra), value=True)
    keys = model.key_encoder(enc["src_states"], enc["src_pad"], seg, seg_pad)
    x, _, attn = model.decoder(
        tgt_in[:, :length],
        memories={"source": {"pad": enc["src_pad"]}},
        cross_kv=model.cross_kv(keys, enc),
        need_weights=model.head.needs_attention,
    )
    return x, attn and attn["source"]


def per_step_log_probs(model: RDangleSeq2Seq, src: Tensor, tgt_in: Tensor) -> Tensor:
    out = []
    for t in range(tgt_in.shape[1]):
        point = max(p for p in model.points(t + 1) if p <= t)
        x, attn = _decode_at(model, model.encode({"src": src}), tgt_in, point, t + 1)
        out.append(model.head(x[:, -1:], None if attn is None else attn[:, -1:], src))
    return torch.cat(out, 1)


def batch_copy_log_probs(model: RDangleSeq2Seq, src: Tensor, tgt_in: Tensor) -> Tensor:
    T = tgt_in.shape[1]
    o = model.interval or T
    out = []
    for point in model.points(T):
        x, attn = _decode_at(model, model.encode({"src": src}), tgt_in, point, T, full_width=True)
        keep = slice(point, min(point + o, T))
        out.append(model.head(x[:, keep], None if attn is None else attn[:, keep], src))
    return torch.cat(out, 1)
