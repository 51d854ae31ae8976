"""Plain-loop references of the constructive tree supertagger (`structseq.models.supertagger`), one word, one
node and one head at a time, to check the batched model against: node feedback (segment softmax over a word's
previous-depth nodes and its self-loop, per head), state feedback (attention within +-max_distance, per word
and head), teacher-forced node log-probabilities, and greedy well-formed tree decoding (with the blank of a
unary modality in its right slot). They read the model's parameters but none of its batched code paths
(segment ops, unfold windows, path tables, fringe tensors, the well-formedness mask).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from structseq.data.categories import BLANK, is_binary, is_unary

SPECIALS = 4  # <pad> <s> </s> <unk>: never predicted


def rms_norm(x: Tensor, norm) -> Tensor:
    """RMSNorm of one vector x with the gain and epsilon of module `norm`."""
    return x / math.sqrt(float((x * x).mean()) + norm.eps) * norm.weight


def _softmax(scores: list[float]) -> list[float]:
    top = max(scores)
    e = [math.exp(s - top) for s in scores]
    return [x / sum(e) for x in e]


def node_feedback(nf, h: Tensor, node_word: list[int], node_emb: Tensor) -> Tensor:
    """`NodeFeedback` (eval mode): h (N, d) word states, node m belongs to word node_word[m]."""
    N, d = h.shape
    H = nf.heads
    dh = d // H
    out = torch.zeros(N, d)
    for i in range(N):
        mine = [m for m, w in enumerate(node_word) if w == i]
        s_state = nf.score_state(nf.bottleneck(h[i]))  # (H,)
        for j in range(H):
            scores = [F.leaky_relu(s_state[j], 0.2).item()]
            scores += [F.leaky_relu(s_state[j] + nf.score_node(node_emb[m])[j], 0.2).item() for m in mine]
            a = _softmax(scores)
            part = a[0] * h[i, j * dh : (j + 1) * dh]
            for q, m in enumerate(mine):
                part = part + a[q + 1] * nf.message(node_emb[m])[j * dh : (j + 1) * dh]
            out[i, j * dh : (j + 1) * dh] = part
        out[i] = rms_norm(out[i], nf.norm)
    return out


def state_feedback(sf, h: Tensor, mask: Tensor) -> Tensor:
    """`StateFeedback` (eval mode): h (B, W, d), mask (B, W); rows of padding words are left zero."""
    B, W, d = h.shape
    H, D = sf.heads, sf.delta
    dh = d // H
    out = torch.zeros(B, W, d)
    for b in range(B):
        qkv = [sf.qkv(h[b, i]) for i in range(W)]
        for i in range(W):
            if not mask[b, i]:
                continue
            q = qkv[i][:d]
            o = torch.zeros(d)
            for j in range(H):
                sl = slice(j * dh, (j + 1) * dh)
                near = [n for n in range(W) if abs(n - i) <= D and mask[b, n]]
                scores = [
                    float((q[sl] * qkv[n][d : 2 * d][sl] * sf.rel[n - i + D][sl]).sum()) / math.sqrt(dh) for n in near
                ]
                for a, n in zip(_softmax(scores), near):
                    o[sl] = o[sl] + a * qkv[n][2 * d :][sl]
            out[b, i] = rms_norm(h[b, i] + sf.out(o), sf.norm)
    return out


def step(model, h: Tensor, mask: Tensor, prev: tuple[list[int], Tensor] | None) -> Tensor:
    """One depth of `TreeSupertagger.step`: node feedback (prev = (flat word rows, node embeddings)), state
    feedback, SwiGLU feed-forward with residual and RMSNorm; padding rows zeroed."""
    B, W, d = h.shape
    if model.node_fb is not None and prev is not None:
        h = node_feedback(model.node_fb, h.reshape(B * W, d), *prev).view(B, W, d)
    if model.state_fb is not None:
        h = state_feedback(model.state_fb, h, mask)
    out = torch.zeros(B, W, d)
    ffn = model.ffn
    for b in range(B):
        for i in range(W):
            if mask[b, i]:
                x = h[b, i]
                f = ffn.w2(F.silu(ffn.w1(x)) * ffn.w3(x))
                out[b, i] = rms_norm(x + f, model.ffn_norm)
    return out


def path(model, k: int) -> Tensor:
    """p(k): the orthogonal matrices of the branches from the root to position k applied to rho0 (the first
    branch applied last)."""
    w = model.paths.matrices()
    p = model.paths.rho0.clone()
    for bit in reversed(bin(k)[3:]):
        p = w[int(bit)] @ p
    return p


def node_logits(model, h_word: Tensor, k: int) -> Tensor:
    """Logits (S,) of the node at position k of a word with state h_word."""
    return (model.to_node(h_word) * path(model, k)) @ model.symbols.weight.T


def allowed(symbols: list[str], blank_slot: bool, at_max_depth: bool) -> list[int]:
    """Ids of the well-formed choices at one node, from the symbol names: the blank exactly in the right slot
    of a unary modality, no special symbol, no connective at the deepest level."""
    if blank_slot:
        return [symbols.index(BLANK)]
    return [
        s
        for s, name in enumerate(symbols)
        if s >= SPECIALS and name != BLANK and not (at_max_depth and is_binary(name))
    ]


def teacher_forced(
    model, h: Tensor, mask: Tensor, trees: dict[tuple[int, int], dict[int, int]]
) -> dict[tuple[int, int, int], Tensor]:
    """Log-probabilities (S,) of every gold node: trees[(b, w)] = {position: symbol id}; keys (b, w, pos)."""
    B, W, _ = h.shape
    out, prev = {}, None
    deepest = max(k.bit_length() - 1 for t in trees.values() for k in t)
    for t in range(deepest + 1):
        h = step(model, h, mask, prev)
        rows, embs = [], []
        for (b, w), tree in trees.items():
            for k, s in tree.items():
                if k.bit_length() - 1 == t:
                    out[b, w, k] = node_logits(model, h[b, w], k).log_softmax(-1)
                    rows.append(b * W + w)
                    embs.append(path(model, k) * model.symbols.weight[s])
        prev = (rows, torch.stack(embs)) if embs else None
    return out


def greedy(
    model, h: Tensor, mask: Tensor, symbols: list[str], max_depth: int
) -> dict[tuple[int, int], dict[int, tuple[int, float]]]:
    """Greedy well-formed trees: {(b, w): {position: (symbol id, log-prob among the allowed choices)}}."""
    B, W, _ = h.shape
    fringe = {(b, w): [(1, False)] for b in range(B) for w in range(W) if mask[b, w]}
    trees: dict[tuple[int, int], dict[int, tuple[int, float]]] = {key: {} for key in fringe}
    prev = None
    for t in range(max_depth + 1):
        if not any(fringe.values()):
            break
        h = step(model, h, mask, prev)
        rows, embs, nxt = [], [], {}
        for (b, w), slots in fringe.items():
            nxt[b, w] = []
            for k, blank_slot in slots:
                logits = node_logits(model, h[b, w], k)
                ok = allowed(symbols, blank_slot, t == max_depth)
                lp = logits[ok].log_softmax(-1)
                best = int(lp.argmax())
                s = ok[best]
                trees[b, w][k] = (s, float(lp[best]))
                rows.append(b * W + w)
                embs.append(path(model, k) * model.symbols.weight[s])
                if is_binary(symbols[s]):
                    nxt[b, w] += [(2 * k, False), (2 * k + 1, is_unary(symbols[s]))]
        fringe, prev = nxt, (rows, torch.stack(embs))
    return trees
