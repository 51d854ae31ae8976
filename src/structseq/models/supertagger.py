"""Supertaggers: a token classifier and the constructive tree tagger of Kogkalidis & Moortgat (2023).

Both read a sentence with the same encoder (`WordEncoder`: words + a character CNN + BiLSTM, trained from
scratch; or `PretrainedEncoder`: a local Hugging Face checkpoint with attention pooling over each word's
subword pieces) and produce word states h (B, W, d).

`SupertagClassifier`: one softmax over the training set's categories per word (cannot produce unseen ones).

`TreeSupertagger`: builds each word's category tree depth by depth, all words and sentences at once.
Nodes sit at positions (root 1, children 2k, 2k+1); a node's embedding is p(k) * E[symbol], where p(k) =
W_{b1} ... W_{bn} rho0 applies two orthogonal matrices (matrix exponentials of skew-symmetric parameters)
along the path b1..bn from the root to k to a fixed seed vector rho0. One step, shared by all depths:

    node feedback   each word state attends to its tree's nodes of the previous depth (GAT-style scores
                    w_a . [W_b h ; N], a self-loop scored w_a . [W_b h ; 0]; messages W_m N), then RMSNorm
    state feedback  words of a sentence attend to each other, scores sum(q_i * k_j * r_{j-i}) / sqrt(d_head)
                    for |j - i| <= max_distance (farther edges dropped), residual, RMSNorm
    feed-forward    SwiGLU, residual, RMSNorm
    prediction      logits of fringe node k of word i = ((W_o h_i) * p(k)) E^T (tied with the symbol table)

The next fringe holds the children of every binary symbol. The only Python loop is over depth (and, in
k-best search, over log2(fringe width) merge rounds); words and nodes are tensor rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from structseq.config import _f
from structseq.data.categories import BLANK, is_binary, is_unary
from structseq.data.vocab import Vocab
from structseq.nn.dropout import Dropout, dropout

NEG = -1e9  # a forbidden symbol's logit (finite, so that sums of forbidden scores stay comparable)


# ---------------------------------------------------------------- configs

@dataclass
class SupertagEncoderConfig:
    pretrained: str | None = _f(None, "a local Hugging Face encoder directory (model + tokenizer); null: train "
                                      "the word + character BiLSTM encoder from scratch")
    lr_scale: float = _f(0.1, "learning-rate factor of the pretrained encoder's parameters (paper: 1e-5 / 1e-4)")
    pooling: str = _f("attention", "pooling of a word's subword pieces: attention | first | mean")
    word_dim: int = _f(128, "word embedding width (from-scratch encoder)")
    char_dim: int = _f(32, "character embedding width (0: no character component)")
    char_filters: int = _f(64, "character CNN filters (width-3 convolution, max over the word)")
    max_chars: int = _f(24, "characters of a word the CNN reads (the first ones)")
    hidden: int = _f(128, "BiLSTM width per direction")
    layers: int = _f(2, "BiLSTM layers")
    word_dropout: float = _f(0.1, "training: a word id replaced by <unk> with this probability (teaches the "
                                  "unknown-word path)")


def _encoder():
    return field(default_factory=SupertagEncoderConfig, metadata={"help": "the sentence encoder"})


@dataclass
class SupertagClassifierConfig:
    arch: str = _f("supertag-classifier", "supertag-classifier | supertag-tree")
    d_model: int = _f(256, "word state width d_w")
    dropout: float = _f(0.2, "dropout on encoder outputs and inside the decoder")
    encoder: SupertagEncoderConfig = _encoder()


@dataclass
class SupertagTreeConfig(SupertagClassifierConfig):
    arch: str = _f("supertag-tree", "supertag-classifier | supertag-tree")
    node_dim: int = _f(128, "node (symbol and path) embedding width d_n")
    node_heads: int = _f(4, "heads of node feedback")
    state_heads: int = _f(8, "heads of state feedback")
    max_distance: int = _f(6, "state feedback: words farther apart than this do not attend to each other")
    node_feedback: bool = _f(True, "node feedback (false: the paper's -nf ablation)")
    state_feedback: bool = _f(True, "state feedback (false: the paper's -sf ablation)")
    edge_dropout: float = _f(0.2, "training: dropout on node-feedback attention coefficients")
    max_depth: int = _f(8, "decoding: deepest tree level (the root is depth 0); deeper nodes are forced to be leaves")


# ---------------------------------------------------------------- encoders

class WordEncoder(nn.Module):
    """Words + character CNN -> BiLSTM -> d_model. Reads batch["words"] (B, W) and batch["chars"] (B, W, C)."""

    def __init__(self, cfg: SupertagEncoderConfig, n_words: int, n_chars: int, d_model: int, dropout: float):
        super().__init__()
        self.cfg = cfg
        self.words = nn.Embedding(n_words, cfg.word_dim, padding_idx=Vocab.pad)
        width = cfg.word_dim
        if cfg.char_dim > 0:
            self.chars = nn.Embedding(n_chars, cfg.char_dim, padding_idx=Vocab.pad)
            self.conv = nn.Conv1d(cfg.char_dim, cfg.char_filters, 3, padding=1)
            width += cfg.char_filters
        self.lstm = nn.LSTM(width, cfg.hidden, cfg.layers, batch_first=True, bidirectional=True,
                            dropout=dropout if cfg.layers > 1 else 0.0)
        self.out = nn.Linear(2 * cfg.hidden, d_model)
        self.drop = Dropout(dropout)

    def forward(self, batch) -> tuple[Tensor, Tensor]:
        words = batch["words"]
        B, W = words.shape
        mask = words.ne(Vocab.pad)
        if self.training and self.cfg.word_dropout > 0:
            drop = torch.rand(words.shape, device=words.device) < self.cfg.word_dropout
            words = words.masked_fill(drop & mask, Vocab.unk)
        x = [self.words(words)]
        if self.cfg.char_dim > 0:
            c = batch["chars"]  # (B, W, C)
            C = c.shape[2]
            e = self.chars(c.view(B * W, C)).transpose(1, 2)  # (BW, dc, C)
            f = self.conv(e).masked_fill(c.view(B * W, 1, C).eq(Vocab.pad), -1e4).amax(-1)
            x.append(f.clamp_min(-1.0).view(B, W, -1) * mask[..., None])
        x = self.drop(torch.cat(x, -1))
        lengths = mask.sum(1).clamp_min(1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=W)
        return self.drop(self.out(h)) * mask[..., None], mask


class PretrainedEncoder(nn.Module):
    """A local Hugging Face encoder; a word's state pools its pieces. Reads batch["pieces"] (B, P) and
    batch["piece_word"] (B, P): the word index of each piece, -1 for special tokens and padding."""

    def __init__(self, cfg: SupertagEncoderConfig, d_model: int, dropout: float):
        super().__init__()
        from transformers import AutoModel

        self.cfg = cfg
        self.model = AutoModel.from_pretrained(cfg.pretrained)
        width = self.model.config.hidden_size
        self.score = nn.Linear(width, 1)
        self.out = nn.Linear(width, d_model)
        self.drop = Dropout(dropout)

    def forward(self, batch) -> tuple[Tensor, Tensor]:
        pieces, pw = batch["pieces"], batch["piece_word"]
        hp = self.model(input_ids=pieces, attention_mask=batch["piece_mask"].long()).last_hidden_state  # (B, P, H)
        W = batch["word_mask"].shape[1]
        member = pw[:, None, :].eq(torch.arange(W, device=pw.device)[None, :, None])  # (B, W, P)
        if self.cfg.pooling == "attention":
            s = self.score(hp)[..., 0][:, None, :].masked_fill(~member, float("-inf"))
        elif self.cfg.pooling == "mean":
            s = torch.zeros_like(member, dtype=hp.dtype).masked_fill(~member, float("-inf"))
        elif self.cfg.pooling == "first":
            first = member & (member.cumsum(-1) == 1)
            s = torch.zeros_like(member, dtype=hp.dtype).masked_fill(~first, float("-inf"))
        else:
            raise ValueError(f"unknown pooling {self.cfg.pooling!r}; choices: attention, first, mean")
        mask = member.any(-1)
        a = torch.softmax(s.masked_fill(~mask[..., None], 0.0), -1) * mask[..., None]
        return self.drop(self.out(a @ hp)) * mask[..., None], mask

    def lr_scaled(self) -> list[nn.Parameter]:
        return list(self.model.parameters())


def build_encoder(cfg, vocabs) -> nn.Module:
    e = cfg.encoder
    if e.pretrained:
        return PretrainedEncoder(e, cfg.d_model, cfg.dropout)
    return WordEncoder(e, len(vocabs["words"]), len(vocabs["chars"]), cfg.d_model, cfg.dropout)


class _Tagger(nn.Module):
    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def param_groups(self) -> list[dict]:
        """Parameter groups for the optimiser: a pretrained encoder's weights get `encoder.lr_scale`."""
        scaled = self.encoder.lr_scaled() if hasattr(self.encoder, "lr_scaled") else []
        ids = {id(p) for p in scaled}
        rest = [p for p in self.parameters() if id(p) not in ids]
        groups = [{"params": rest, "lr_scale": 1.0}]
        if scaled:
            groups.append({"params": scaled, "lr_scale": self.cfg.encoder.lr_scale})
        return groups


# ---------------------------------------------------------------- the token classifier

class SupertagClassifier(_Tagger):
    def __init__(self, cfg: SupertagClassifierConfig, vocabs):
        super().__init__()
        self.cfg, self.width = cfg, cfg.d_model
        self.encoder = build_encoder(cfg, vocabs)
        self.out = nn.Linear(cfg.d_model, len(vocabs["cat"]))

    def forward(self, batch) -> Tensor:
        """Log-probabilities (B, W, C) over the category vocabulary (specials never predicted)."""
        h, _ = self.encoder(batch)
        logits = self.out(h)
        # <pad> <s> </s> <unk> get a constant -1e9: never predicted, and no gradient flows to their logits
        special = torch.arange(logits.shape[-1], device=logits.device) < 4
        return logits.masked_fill(special, NEG).log_softmax(-1)

    @torch.no_grad()
    def kbest(self, batch, k: int) -> tuple[Tensor, Tensor]:
        """(scores (B, W, k) sorted, category ids (B, W, k))."""
        lp = self.forward(batch)
        return lp.topk(min(k, lp.shape[-1]), -1)


# ---------------------------------------------------------------- the constructive tree tagger

class PathEmbedding(nn.Module):
    """p(k) = W_{b1} W_{b2} ... W_{bn} rho0 for the path b1..bn from the root to position k; W_0, W_1 are
    orthogonal (matrix_exp of skew-symmetric parameters) and rho0 a fixed random unit-norm vector."""

    def __init__(self, dim: int):
        super().__init__()
        self.skew = nn.Parameter(torch.randn(2, dim, dim) * (0.5 / math.sqrt(dim)))
        g = torch.Generator().manual_seed(0)
        rho = torch.randn(dim, generator=g)
        self.register_buffer("rho0", rho / rho.norm() * math.sqrt(dim), persistent=True)

    def matrices(self) -> Tensor:
        a = self.skew - self.skew.transpose(1, 2)
        return torch.linalg.matrix_exp(a)  # (2, d, d), orthogonal

    def table(self, max_depth: int) -> Tensor:
        """(2^(max_depth+1), d): row k = p(k) (row 0 unused). Depth t: P_t = [P_{t-1} W_0^T ; P_{t-1} W_1^T]
        over positions 2^t .. 2^(t+1)-1 (the first branch b1 splits the level in halves)."""
        w = self.matrices()
        rows, level = [torch.zeros_like(self.rho0)[None], self.rho0[None]], self.rho0[None]
        for _ in range(max_depth):
            level = torch.cat([level @ w[0].T, level @ w[1].T], 0)
            rows.append(level)
        return torch.cat(rows, 0)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x: Tensor) -> Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class SwiGLU(nn.Module):
    def __init__(self, dim: int, dropout: float):
        super().__init__()
        hidden = int(8 * dim / 3)
        self.w1, self.w3, self.w2 = nn.Linear(dim, hidden), nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        self.drop = Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return self.w2(self.drop(F.silu(self.w1(x)) * self.w3(x)))


def segment_softmax(scores: Tensor, segment: Tensor, n: int) -> Tensor:
    """Softmax of scores (E, H) within each segment id (E,) in [0, n)."""
    idx = segment[:, None].expand_as(scores)
    top = torch.full((n, scores.shape[1]), float("-inf"), device=scores.device, dtype=scores.dtype)
    top = top.scatter_reduce(0, idx, scores, "amax", include_self=True)
    e = (scores - top[segment]).exp()
    total = torch.zeros_like(top).index_add_(0, segment, e)
    return e / total[segment]


class NodeFeedback(nn.Module):
    """Heterogeneous GAT-style attention from a word's previous-depth nodes (and a self-loop) to its state."""

    def __init__(self, d_w: int, d_n: int, heads: int, edge_dropout: float):
        super().__init__()
        self.heads = heads
        self.bottleneck = nn.Linear(d_w, d_n)  # W_b
        self.score_state = nn.Linear(d_n, heads, bias=False)  # w_a, state half
        self.score_node = nn.Linear(d_n, heads, bias=False)  # w_a, node half
        self.message = nn.Sequential(nn.Linear(d_n, d_w), nn.GELU(), nn.Linear(d_w, d_w))  # W_m
        self.drop = edge_dropout
        self.norm = RMSNorm(d_w)

    def forward(self, h: Tensor, node_word: Tensor, node_emb: Tensor) -> Tensor:
        """h (N, d_w) flat word states; node_word (M,) rows of h; node_emb (M, d_n)."""
        N, d = h.shape
        H = self.heads
        s_state = self.score_state(self.bottleneck(h))  # (N, H)
        s_self = F.leaky_relu(s_state, 0.2)
        s_node = F.leaky_relu(s_state[node_word] + self.score_node(node_emb), 0.2)  # (M, H)
        seg = torch.cat([torch.arange(N, device=h.device), node_word])
        a = segment_softmax(torch.cat([s_self, s_node]), seg, N)
        a_self, a_node = a[:N], a[N:]
        if self.training and self.drop > 0:
            a_node = dropout(a_node, self.drop)
        msg = self.message(node_emb).view(-1, H, d // H) * a_node[..., None]
        out = h.view(N, H, d // H) * a_self[..., None]
        out = out.index_add(0, node_word, msg)
        return self.norm(out.reshape(N, d))


class StateFeedback(nn.Module):
    """Relative-distance-weighted attention between the words of a sentence within +-max_distance."""

    def __init__(self, d_w: int, heads: int, max_distance: int, dropout: float):
        super().__init__()
        self.heads, self.delta = heads, max_distance
        self.qkv = nn.Linear(d_w, 3 * d_w)
        self.rel = nn.Parameter(torch.randn(2 * max_distance + 1, d_w) * 0.1 + 1.0)  # W_r
        self.out = nn.Linear(d_w, d_w)
        self.drop = Dropout(dropout)
        self.norm = RMSNorm(d_w)

    def forward(self, h: Tensor, mask: Tensor) -> Tensor:
        """h (B, W, d), mask (B, W) -> (B, W, d)."""
        B, W, d = h.shape
        H, D = self.heads, self.delta
        q, k, v = self.qkv(h).chunk(3, -1)
        win = 2 * D + 1
        k = F.pad(k, (0, 0, D, D)).unfold(1, win, 1)  # (B, W, d, win): keys of words i-D .. i+D
        v = F.pad(v, (0, 0, D, D)).unfold(1, win, 1)
        valid = F.pad(mask, (D, D)).unfold(1, win, 1)  # (B, W, win)
        r = self.rel.T  # (d, win)
        s = (q[..., None] * k * r).view(B, W, H, d // H, win).sum(3) / math.sqrt(d // H)  # (B, W, H, win)
        s = s.masked_fill(~valid[:, :, None, :], float("-inf"))
        a = torch.softmax(s, -1).nan_to_num(0.0)
        o = (v.view(B, W, H, d // H, win) * self.drop(a)[:, :, :, None, :]).sum(-1).reshape(B, W, d)
        return self.norm(h + self.drop(self.out(o)))


class TreeSupertagger(_Tagger):
    def __init__(self, cfg: SupertagTreeConfig, vocabs):
        super().__init__()
        self.cfg, self.width = cfg, cfg.d_model
        sym = vocabs["sym"].itos
        self.register_buffer("binary", torch.tensor([is_binary(s) for s in sym]), persistent=False)
        self.register_buffer("unary", torch.tensor([is_unary(s) for s in sym]), persistent=False)
        self.blank = vocabs["sym"].stoi.get(BLANK, -1)
        self.encoder = build_encoder(cfg, vocabs)
        d, dn = cfg.d_model, cfg.node_dim
        self.paths = PathEmbedding(dn)
        self.symbols = nn.Embedding(len(sym), dn)
        nn.init.normal_(self.symbols.weight, std=dn ** -0.5)  # logits of unit scale at initialisation
        self.node_fb = NodeFeedback(d, dn, cfg.node_heads, cfg.edge_dropout) if cfg.node_feedback else None
        self.state_fb = StateFeedback(d, cfg.state_heads, cfg.max_distance, cfg.dropout) if cfg.state_feedback else None
        self.ffn, self.ffn_norm = SwiGLU(d, cfg.dropout), RMSNorm(d)
        self.to_node = nn.Linear(d, dn)
        self.drop = Dropout(cfg.dropout)

    # ------------------------------------------------------------ one depth
    def step(self, h: Tensor, mask: Tensor, prev: tuple[Tensor, Tensor] | None) -> Tensor:
        """Update word states h (B, W, d) with the previous depth's nodes prev = (flat word rows (M,),
        node embeddings (M, d_n)) or None at depth 0."""
        B, W, d = h.shape
        if self.node_fb is not None and prev is not None:
            h = self.node_fb(h.reshape(B * W, d), *prev).view(B, W, d)
        if self.state_fb is not None:
            h = self.state_fb(h, mask)
        h = self.ffn_norm(h + self.drop(self.ffn(h)))
        return h * mask[..., None]

    def node_logits(self, h: Tensor, node_word: Tensor, path: Tensor) -> Tensor:
        """Logits (M, S) of nodes with path embeddings path (M, d_n) of words at flat rows node_word."""
        x = self.to_node(h.reshape(-1, h.shape[-1]))[node_word] * path
        return x @ self.symbols.weight.T

    def node_embedding(self, path: Tensor, sym: Tensor) -> Tensor:
        return path * self.symbols(sym)

    def allowed(self, sym_parent_unary_right: Tensor, at_max_depth: bool) -> Tensor:
        """(M, S) bool: well-formed choices. BLANK exactly in the right slot of a unary modality; no
        specials; leaves only at the maximum depth."""
        S = self.binary.numel()
        ok = torch.ones(sym_parent_unary_right.shape[0], S, dtype=torch.bool, device=self.binary.device)
        ok[:, :4] = False
        if at_max_depth:
            ok &= ~self.binary
        if self.blank >= 0:
            ok[:, self.blank] = False
            ok[sym_parent_unary_right] = False
            ok[sym_parent_unary_right, self.blank] = True
        return ok

    # ------------------------------------------------------------ training
    def forward(self, batch, max_depth: int | None = None) -> Tensor:
        """Teacher forcing: log-probabilities (N, S) of the batch's gold nodes (batch order: by depth).
        `max_depth`: stop after that depth (the rows of deeper nodes are absent)."""
        h, mask = self.encoder(batch)
        word, pos, sym, counts = batch["node_word"], batch["node_pos"], batch["node_sym"], batch["depth_counts"]
        depths = len(counts) - 1 if max_depth is None else min(max_depth, len(counts) - 1)
        table = self.paths.table(depths)
        out, prev, start = [], None, 0
        for t, n in enumerate(counts.tolist()[: depths + 1]):
            w, p, s = word[start: start + n], table[pos[start: start + n]], sym[start: start + n]
            h = self.step(h, mask, prev)
            out.append(self.node_logits(h, w, p).log_softmax(-1))
            prev, start = (w, self.node_embedding(p, s)), start + n
        return torch.cat(out)

    # ------------------------------------------------------------ greedy decoding
    @torch.no_grad()
    def greedy(self, h: Tensor, mask: Tensor, max_depth: int | None = None) -> dict[str, Tensor]:
        """Greedy well-formed trees of every word: nodes as flat rows word (B*W index), pos, sym, score
        (log-prob, masked softmax), and `repaired` (M,): the unconstrained argmax was ill-formed there."""
        D = self.cfg.max_depth if max_depth is None else max_depth
        table = self.paths.table(D)
        B, W, _ = h.shape
        word = mask.reshape(-1).nonzero()[:, 0]
        pos = torch.ones_like(word)
        blank_slot = torch.zeros_like(word, dtype=torch.bool)
        rec = {k: [] for k in ("word", "pos", "sym", "score", "repaired")}
        prev = None
        for t in range(D + 1):
            if word.numel() == 0:
                break
            h = self.step(h, mask, prev)
            logits = self.node_logits(h, word, table[pos])
            ok = self.allowed(blank_slot, t == D)
            lp = logits.masked_fill(~ok, NEG).log_softmax(-1)
            score, sym = lp.max(-1)
            free = logits.clone()
            free[:, :4] = NEG
            for k, v in (("word", word), ("pos", pos), ("sym", sym), ("score", score),
                         ("repaired", free.argmax(-1).ne(sym))):
                rec[k].append(v)
            prev = (word, self.node_embedding(table[pos], sym))
            binary = self.binary[sym]
            word = word[binary].repeat_interleave(2)
            parent = pos[binary]
            pos = torch.stack([2 * parent, 2 * parent + 1], 1).reshape(-1)
            blank_slot = torch.stack([torch.zeros_like(parent, dtype=torch.bool), self.unary[sym[binary]]], 1).reshape(-1)
        return {k: torch.cat(v) for k, v in rec.items()}

    # ------------------------------------------------------------ k-best search
    @torch.no_grad()
    def beam(self, h: Tensor, mask: Tensor, k: int, max_depth: int | None = None) -> dict[str, Tensor]:
        """The k best complete well-formed trees of every word (a tree's score: the sum of its nodes'
        log-probs), expanding the fringe depth by depth and keeping each word's k best partial trees.

        Lanes: the sentence is copied k times; lane j holds every word's j-th best partial tree, and state
        feedback runs within a lane (so a word sees its neighbours' j-th hypotheses: an approximation that is
        exact for k = 1, where this is greedy search). Returns pos/sym (B, W, k, n_nodes) with pos 0 for
        absent nodes, score (B, W, k) sorted (-inf: fewer than k trees exist)."""
        D = self.cfg.max_depth if max_depth is None else max_depth
        table = self.paths.table(D)
        B, W, d = h.shape
        L = B * k
        dev = h.device
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
            active = fpos.gt(0)
            if not active.any():
                break
            h = self.step(h, lmask, prev)
            rows, slots = active.nonzero(as_tuple=True)
            p = fpos[rows, slots]
            logits = self.node_logits(h, rows, table[p])
            lp = logits.masked_fill(~self.allowed(fblank[rows, slots], t == D), NEG).log_softmax(-1)
            lp = lp.masked_fill(lp < NEG / 2, float("-inf"))
            n, S = fpos.shape[1], lp.shape[1]
            dense = torch.full((L * W, n, S), float("-inf"), device=dev)
            dense[..., 0] = torch.where(active, float("-inf"), 0.0)  # an empty slot: symbol 0, score 0
            dense[rows, slots] = lp
            a_score, a_sym = kbest_assignments(dense, k)  # (L*W, k), (L*W, k, n)
            # candidates per word: k source lanes x k assignments
            cand = (score.permute(0, 2, 1)[..., None] + a_score.view(B, k, W, k).permute(0, 2, 1, 3))  # (B, W, k, k)
            best, flat = cand.reshape(B, W, k * k).topk(k, -1)  # (B, W, k)
            src, choice = flat // k, flat % k  # source lane, assignment
            score = best.permute(0, 2, 1).contiguous()  # (B, k, W)
            gather = (torch.arange(B, device=dev)[:, None, None] * k + src) * W + torch.arange(W, device=dev)[None, :, None]
            gather = gather.permute(0, 2, 1).reshape(-1)  # new row (b, lane, w) <- old row
            choice = choice.permute(0, 2, 1).reshape(-1)
            sym = a_sym[gather, choice]  # (L*W, n)
            pos_t = fpos[gather]
            hist_pos = [x[gather] for x in hist_pos] + [pos_t]
            hist_sym = [x[gather] for x in hist_sym] + [sym]
            h = h.reshape(L * W, d)[gather].view(L, W, d)
            live = pos_t.gt(0)
            r2, s2 = live.nonzero(as_tuple=True)
            prev = (r2, self.node_embedding(table[pos_t[r2, s2]], sym[r2, s2]))
            binary = live & self.binary[sym]
            child = torch.stack([2 * pos_t, 2 * pos_t + 1], -1).masked_fill(~binary[..., None], 0).reshape(L * W, -1)
            cblank = torch.stack([torch.zeros_like(binary), binary & self.unary[sym]], -1).reshape(L * W, -1)
            order = child.eq(0).to(torch.int8).argsort(dim=1, stable=True)  # compact: live children first
            width = int(child.gt(0).sum(1).max()) if child.numel() else 0
            fpos, fblank = child.gather(1, order)[:, :max(width, 1)], cblank.gather(1, order)[:, :max(width, 1)]
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


# ---------------------------------------------------------------- builders (registered in models/registry.py)

def _named(vocabs) -> dict[str, Vocab]:
    """The supertagging vocabularies (words, chars, cat, sym); one that is absent (a generic build, e.g. the
    config tests' {src, tgt}) holds only the special symbols."""
    return {name: vocabs.get(name) or Vocab.build([]) for name in ("words", "chars", "cat", "sym")}


def build_supertag_classifier(cfg, vocabs, train_examples=None) -> nn.Module:
    return SupertagClassifier(cfg, _named(vocabs))


def build_supertag_tree(cfg, vocabs, train_examples=None) -> nn.Module:
    return TreeSupertagger(cfg, _named(vocabs))
