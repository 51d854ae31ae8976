"""R-Dangle_shr on BART, the per-step reference formulation: a plain loop over sentences and target steps, each
step re-encoding at the point that owns it and running the whole decoder over the prefix, one sentence at a
time (no padding, no batching, no caches). It reads only the weights of an `RDanglePretrained` (its backbone
`hf` and its type vectors and end marker), not its batched code, so the two can be compared."""

from __future__ import annotations

import torch
from torch import Tensor


def _layer(layer, x: Tensor) -> Tensor:
    out = layer(x, None)
    return out[0] if isinstance(out, tuple) else out


def _encoding(model, src: Tensor, prefix: Tensor) -> Tensor:
    """H (1, n, D) of one sentence's source `src` (n,) after fusing with `prefix` (p + 1,)."""
    enc, dec = model.hf.get_encoder(), model.hf.get_decoder()
    tokens = torch.cat(
        [
            enc.embed_tokens(src[None])[0] + model.type_src,
            dec.embed_tokens(prefix[None])[0] + model.type_tgt,
            model.end[None],
        ]
    )
    positions = torch.arange(tokens.shape[0]) + enc.embed_positions.offset  # one text: source, prefix, end
    x = enc.layernorm_embedding(tokens + enc.embed_positions.weight[positions])[None]
    for layer in enc.layers[: model.k1]:
        x = _layer(layer, x)
    h = x[:, : src.shape[0]]
    for layer in enc.layers[model.k1 :]:
        h = _layer(layer, h)
    norm = getattr(enc, "layer_norm", None)
    return norm(h) if norm is not None else h


@torch.no_grad()
def per_step_log_probs(model, src: Tensor, tgt_in: Tensor) -> list[Tensor]:
    """Log-probs (m_b, V) of each sentence b's m_b decoder inputs (padding removed)."""
    out = []
    o = model.interval
    for b in range(src.shape[0]):
        x = src[b][src[b].ne(model.pad)]
        y = tgt_in[b][: 1 + int(tgt_in[b, 1:].ne(model.pad).sum())]
        rows = []
        for t in range(y.shape[0]):
            point = t - t % o if o else 0
            h = _encoding(model, x, y[: point + 1])
            states = model.hf.get_decoder()(input_ids=y[None, : t + 1], encoder_hidden_states=h).last_hidden_state
            logits = model.hf.lm_head(states[0, -1]) + model.hf.final_logits_bias[0]
            rows.append(logits.log_softmax(-1))
        out.append(torch.stack(rows))
    return out
