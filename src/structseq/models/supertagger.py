"""Supertaggers: a token classifier and the constructive tree tagger of Kogkalidis & Moortgat (2023); their
config schemas and registered builders.

Both read a sentence with the same encoder (`structseq.models.supertag_encoders`: words + a character CNN +
BiLSTM trained from scratch, or a local Hugging Face checkpoint pooling each word's subword pieces) and
produce word states h (B, W, d).

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

The next fringe holds the children of every binary symbol. The only Python loop is over depth; words and
nodes are tensor rows. The model gives one depth's step, logits and well-formedness mask; the greedy and
k-best searches over trees that drive them are in `structseq.decode.tree`, run as the strategies
`tree-greedy` and `tree-beam` (`structseq.decode.strategies.tagging`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from structseq.data.categories import BLANK, MAX_DEPTH, is_binary, is_unary
from structseq.data.vocab import Vocab
from structseq.errors import ConfigError
from structseq.fields import option
from structseq.models.base import Model
from structseq.models.supertag_encoders import SupertagEncoderConfig, build_encoder
from structseq.nn.dropout import Dropout, dropout
from structseq.nn.norms import RMSNorm
from structseq.nn.segment import segment_softmax
from structseq.nn.swiglu import SwiGLU
from structseq.registry import TREES, register_arch

NEG = -1e9  # a forbidden symbol's logit (finite, so that sums of forbidden scores stay comparable)


# ---------------------------------------------------------------- configs


def _encoder():
    return field(default_factory=SupertagEncoderConfig, metadata={"help": "the sentence encoder"})


@dataclass
class SupertagClassifierConfig:
    arch: str = option("supertag-classifier", "supertag-classifier | supertag-tree")
    d_model: int = option(256, "word state width d_w", ge=1, role="width")
    dropout: float = option(0.2, "dropout on encoder outputs and inside the decoder", ge=0.0, lt=1.0)
    encoder: SupertagEncoderConfig = _encoder()


@dataclass
class SupertagTreeConfig(SupertagClassifierConfig):
    arch: str = option("supertag-tree", "supertag-classifier | supertag-tree")
    node_dim: int = option(128, "node (symbol and path) embedding width d_n", ge=1, role="width")
    node_heads: int = option(4, "heads of node feedback (they divide d_model)", ge=1, role="heads")
    state_heads: int = option(8, "heads of state feedback (they divide d_model)", ge=1, role="heads")
    max_distance: int = option(6, "state feedback: words farther apart than this do not attend to each other", ge=0)
    node_feedback: bool = option(True, "node feedback (false: the paper's -nf ablation)")
    state_feedback: bool = option(True, "state feedback (false: the paper's -sf ablation)")
    edge_dropout: float = option(0.2, "training: dropout on node-feedback attention coefficients", ge=0.0, lt=1.0)
    max_depth: int = option(
        8,
        "decoding: deepest tree level (the root is depth 0); deeper nodes are forced to be "
        f"leaves (at most {MAX_DEPTH}, the deepest category read)",
        ge=0,
        le=MAX_DEPTH,
    )

    def __post_init__(self):
        for name, on in (("node_heads", self.node_feedback), ("state_heads", self.state_feedback)):
            heads = getattr(self, name)
            if on and isinstance(heads, int) and heads > 0 and self.d_model % heads:
                raise ConfigError(f"'model.{name}' ({heads}) must divide 'model.d_model' ({self.d_model})")


class _Tagger(Model):
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
    search_interface = "tags"  # per-word label scores (`kbest`): the `tag-kbest` strategy

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
        out = out.index_add(0, node_word, msg.to(out.dtype))
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
    search_interface = "tree"  # the protocol of structseq.decode.tree: `tree-greedy`, `tree-beam`

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
        nn.init.normal_(self.symbols.weight, std=dn**-0.5)  # logits of unit scale at initialisation
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
            w, p, s = word[start : start + n], table[pos[start : start + n]], sym[start : start + n]
            h = self.step(h, mask, prev)
            out.append(self.node_logits(h, w, p).log_softmax(-1))
            prev, start = (w, self.node_embedding(p, s)), start + n
        return torch.cat(out)


# ---------------------------------------------------------------- builders


def _named(vocabs) -> dict[str, Vocab]:
    """The supertagging vocabularies (words, chars, cat, sym); one that is absent (a generic build, e.g. the
    config tests' {src, tgt}) holds only the special symbols."""
    return {name: vocabs.get(name) or Vocab.build([]) for name in ("words", "chars", "cat", "sym")}


@register_arch("supertag-classifier", config=SupertagClassifierConfig, tasks=("supertag",))
def build_supertag_classifier(cfg, vocabs, train_examples=None) -> nn.Module:
    return SupertagClassifier(cfg, _named(vocabs))


@register_arch("supertag-tree", config=SupertagTreeConfig, tasks=("supertag",), capabilities=(TREES,))
def build_supertag_tree(cfg, vocabs, train_examples=None) -> nn.Module:
    return TreeSupertagger(cfg, _named(vocabs))
