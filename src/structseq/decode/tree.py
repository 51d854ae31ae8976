"""Search over category trees: greedy and k-best decoding of the constructive tree supertagger
(`structseq.models.supertagger.TreeSupertagger`), all words of all sentences at once, depth by depth; the
strategies `tree-greedy` and `tree-beam` run them (`structseq.decode.strategies.tagging`).

The model (`search_interface` "tree") provides its word states `encoder(batch)` -> (h, mask) and one
depth's work: `step(h, mask, prev)` (node feedback, state feedback, feed-forward),
`node_logits(h, rows, paths)`, `node_embedding(paths, symbols)`, `allowed(blank_slot, at_max_depth)` (the
well-formed choices: BLANK exactly in the right slot of a unary modality, leaves at the deepest level), the
path table `paths.table(depth)`, the symbol flags `binary` and `unary`, and `cfg.max_depth`.

Tree positions: the root is 1, the children of k are 2k (left) and 2k+1 (right). The next fringe holds the
children of every binary symbol; the right child of a unary modality is the blank's slot.
"""

from __future__ import annotations

import torch
from torch import Tensor

NEG = -1e9  # a forbidden symbol's logit (finite, so that sums of forbidden scores stay comparable)


def _children(pos: Tensor, sym: Tensor, binary: Tensor, unary: Tensor) -> tuple[Tensor, Tensor]:
    """Positions (..., 2) of the children of nodes at `pos` with symbols `sym` (0 where the node has none),
    and whether each child is the blank's slot (the right child of a unary modality)."""
    child = torch.stack([2 * pos, 2 * pos + 1], -1).masked_fill(~binary[..., None], 0)
    blank = torch.stack([torch.zeros_like(binary), binary & unary[sym]], -1)
    return child, blank


@torch.no_grad()
def greedy_trees(model, h: Tensor, mask: Tensor, max_depth: int | None = None) -> dict[str, Tensor]:
    """Greedy well-formed trees of every word from word states h (B, W, d) and mask (B, W): nodes as flat rows
    word (B*W index), pos, sym, score (log-prob under the well-formedness mask), and `repaired` (M,): the
    unconstrained argmax was ill-formed there. `max_depth`: default `model.cfg.max_depth`."""
    D = model.cfg.max_depth if max_depth is None else max_depth
    table = model.paths.table(D)
    word = mask.reshape(-1).nonzero()[:, 0]
    pos = torch.ones_like(word)
    blank_slot = torch.zeros_like(word, dtype=torch.bool)
    rec = {k: [] for k in ("word", "pos", "sym", "score", "repaired")}
    prev = None
    for t in range(D + 1):
        if word.numel() == 0:
            break
        h = model.step(h, mask, prev)
        logits = model.node_logits(h, word, table[pos])
        ok = model.allowed(blank_slot, t == D)
        lp = logits.masked_fill(~ok, NEG).log_softmax(-1)
        score, sym = lp.max(-1)
        free = logits.clone()
        free[:, :4] = NEG
        for k, v in (
            ("word", word),
            ("pos", pos),
            ("sym", sym),
            ("score", score),
            ("repaired", free.argmax(-1).ne(sym)),
        ):
            rec[k].append(v)
        prev = (word, model.node_embedding(table[pos], sym))
        binary = model.binary[sym]
        word = word[binary].repeat_interleave(2)
        pos, blank_slot = (x.reshape(-1) for x in _children(pos[binary], sym[binary], binary[binary], model.unary))
    return {k: torch.cat(v) for k, v in rec.items()}


def _fringe_log_probs(model, h: Tensor, fpos: Tensor, fblank: Tensor, table: Tensor, at_max_depth: bool) -> Tensor:
    """Log-probs (rows, n, S) of every fringe slot of every lane word (-inf: forbidden); an empty slot
    (position 0) has one choice, symbol 0 with score 0."""
    active = fpos.gt(0)
    rows, slots = active.nonzero(as_tuple=True)
    p = fpos[rows, slots]
    logits = model.node_logits(h, rows, table[p])
    lp = logits.masked_fill(~model.allowed(fblank[rows, slots], at_max_depth), NEG).log_softmax(-1)
    lp = lp.masked_fill(lp < NEG / 2, float("-inf"))
    dense = torch.full((*fpos.shape, lp.shape[1]), float("-inf"), device=h.device)
    dense[..., 0] = torch.where(active, float("-inf"), 0.0)
    dense[rows, slots] = lp
    return dense


def _next_fringe(model, pos_t: Tensor, sym: Tensor) -> tuple[Tensor, Tensor]:
    """The children of the live binary nodes of each row, live ones first, as (rows, width) positions and
    blank-slot flags (width at least 1)."""
    rows = pos_t.shape[0]
    binary = pos_t.gt(0) & model.binary[sym]
    child, cblank = (x.reshape(rows, -1) for x in _children(pos_t, sym, binary, model.unary))
    order = child.eq(0).to(torch.int8).argsort(dim=1, stable=True)  # compact: live children first
    width = max(int(child.gt(0).sum(1).max()) if child.numel() else 0, 1)
    return child.gather(1, order)[:, :width], cblank.gather(1, order)[:, :width]


@torch.no_grad()
def kbest_trees(model, h: Tensor, mask: Tensor, k: int, max_depth: int | None = None) -> dict[str, Tensor]:
    """The k best complete well-formed trees of every word (a tree's score: the sum of its nodes' log-probs),
    expanding the fringe depth by depth and keeping each word's k best partial trees.

    Lanes: the sentence is copied k times; lane j holds every word's j-th best partial tree, and state
    feedback runs within a lane (so a word sees its neighbours' j-th hypotheses: an approximation that is
    exact for k = 1, where this is greedy search). Returns pos/sym (B, W, k, n_nodes) with pos 0 for
    absent nodes, score (B, W, k) sorted (-inf: fewer than k trees exist)."""
    D = model.cfg.max_depth if max_depth is None else max_depth
    table = model.paths.table(D)
    B, W, d = h.shape
    L, dev = B * k, h.device
    h = h[:, None].expand(B, k, W, d).reshape(L, W, d)
    lmask = mask[:, None].expand(B, k, W).reshape(L, W)
    score = torch.full((B, k, W), float("-inf"), device=dev)
    score[:, 0] = 0.0
    score = score.masked_fill(~mask[:, None], 0.0)
    fpos = lmask.reshape(-1, 1).long()  # (L*W, n): fringe positions, 0 = empty slot
    fblank = torch.zeros_like(fpos, dtype=torch.bool)
    hist_pos, hist_sym = [], []
    prev = None
    for t in range(D + 1):
        if not fpos.gt(0).any():
            break
        h = model.step(h, lmask, prev)
        a_score, a_sym = kbest_assignments(_fringe_log_probs(model, h, fpos, fblank, table, t == D), k)
        # candidates per word: k source lanes x k assignments
        cand = score.permute(0, 2, 1)[..., None] + a_score.view(B, k, W, k).permute(0, 2, 1, 3)  # (B, W, k, k)
        best, flat = cand.reshape(B, W, k * k).topk(k, -1)  # (B, W, k)
        src, choice = flat // k, flat % k  # source lane, assignment
        score = best.permute(0, 2, 1).contiguous()  # (B, k, W)
        gather = (torch.arange(B, device=dev)[:, None, None] * k + src) * W + torch.arange(W, device=dev)[None, :, None]
        gather = gather.permute(0, 2, 1).reshape(-1)  # new row (b, lane, w) <- old row
        sym = a_sym[gather, choice.permute(0, 2, 1).reshape(-1)]  # (L*W, n)
        pos_t = fpos[gather]
        hist_pos = [x[gather] for x in hist_pos] + [pos_t]
        hist_sym = [x[gather] for x in hist_sym] + [sym]
        h = h.reshape(L * W, d)[gather].view(L, W, d)
        r2, s2 = pos_t.gt(0).nonzero(as_tuple=True)
        prev = (r2, model.node_embedding(table[pos_t[r2, s2]], sym[r2, s2]))
        fpos, fblank = _next_fringe(model, pos_t, sym)
    pos = torch.cat(hist_pos, 1).view(B, k, W, -1).permute(0, 2, 1, 3)
    sym = torch.cat(hist_sym, 1).view(B, k, W, -1).permute(0, 2, 1, 3)
    return {"pos": pos, "sym": sym, "score": score.permute(0, 2, 1)}


def kbest_assignments(lp: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """The k best joint choices of independent slots: lp (R, n, S) log-probs per slot -> scores (R, k) sorted
    and symbols (R, k, n). Slots are merged pairwise (log2 n rounds), keeping k best combinations each time."""
    R, n, S = lp.shape
    kk = min(k, S)
    s, i = lp.topk(kk, -1)  # (R, n, kk)
    if kk < k:
        s = torch.cat([s, s.new_full((R, n, k - kk), float("-inf"))], -1)
        i = torch.cat([i, i.new_zeros((R, n, k - kk))], -1)
    sym = i[..., None]  # (R, g, k, size)
    while s.shape[1] > 1:
        g = s.shape[1]
        if g % 2:  # pad with a neutral slot: one choice of score 0
            pad_s = s.new_full((R, 1, k), float("-inf"))
            pad_s[..., 0] = 0.0
            s = torch.cat([s, pad_s], 1)
            sym = torch.cat([sym, sym.new_zeros((R, 1, k, sym.shape[-1]))], 1)
            g += 1
        a, b = s[:, 0::2], s[:, 1::2]  # (R, g/2, k)
        comb = (a[..., :, None] + b[..., None, :]).reshape(R, g // 2, k * k)
        best, flat = comb.topk(k, -1)
        ia, ib = flat // k, flat % k
        size = sym.shape[-1]
        sa = sym[:, 0::2].gather(2, ia[..., None].expand(-1, -1, -1, size))
        sb = sym[:, 1::2].gather(2, ib[..., None].expand(-1, -1, -1, size))
        s, sym = best, torch.cat([sa, sb], -1)
    return s[:, 0], sym[:, 0, :, :n]
