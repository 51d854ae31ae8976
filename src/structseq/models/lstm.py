"""LSTM encoder-decoder with attention, as in Akyürek & Andreas (2021).

Unidirectional multi-layer LSTM encoder; decoder initialised from the encoder's final state, with
input feeding (the previous combined vector is concatenated to the next input embedding), Luong
attention `score_j = <e_j, W h_t>`, and combined vector `comb = Linear([input; h_t; context])`
(no nonlinearity) handed to the output head with the attention weights. `input` is the target
embedding, or with `combine_feed` the whole decoder input [embedding; previous combined vector] as in
the reference code (on Colors, lexical translation generalises far more reliably with it). Input
feeding makes the decoder inherently sequential, so training loops over target positions; the head
runs once.

The decoder's parameters are an `nn.LSTM`'s (the state dict is the same as before), but the loop does not
call it one step at a time (issue 13; `models/lstm_reference.py` keeps that formulation for tests):
- the parts of layer 1's gates and of the combined vector that depend only on the target embedding
  are computed for all positions in one GEMM before the loop;
- the attention keys W^T e_j are projected once per batch (`<e_j, W h_t> = <W^T e_j, h_t>`);
- a step is one GEMM per layer ([input; h] times the layer's two weight matrices side by side), the
  attention, one GEMM for the combined vector and the LSTM cell's pointwise work (one autograd node);
- in training, the gradients of what all steps share (those weights, the attention keys and memory) are
  formed once per batch, in one large product over the steps' stashed operands (`_Tape`), instead of
  being accumulated step by step;
- rows are sorted by target length and a step runs only on the rows still inside their target (outputs
  at padding positions are zeros; no loss reads them).
Dropout masks are drawn in the order of the per-step formulation, so seeded training agrees with it up to
floating-point rounding (tests/test_lstm_fast.py).

`feed_dropout` / `high_dropout` (config `model.feed_dropout: true`) reproduce how the reference code drops the
fed-back vector: its decoder input [embedding; feed] is dropped as a whole (p = dropout) and the combined vector
gets a second mask (`--highdrop`, the head's dropout) that the head and the next step's feed share. Without them
only the combined vector's own mask reaches the feed, a far weaker penalty on the feed weights; with
`combine_feed` and a large learning rate the feedback can then grow without bound (RESULTS.md, around_right).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from structseq.data.limits import MAX_LENGTH
from structseq.fields import option
from structseq.models.base import Autoregressive, Inputs, State, Vocabs, with_width
from structseq.models.heads import build_head, head_option
from structseq.nn.dropout import dropout, dropout_noise
from structseq.registry import register_arch
from structseq.state import map_state


# ----------------------------------------------------------------------------------------------- step kernels

class _Tape:
    """Operands that the steps of one forward pass stash (`fwd[i]` in forward, `bwd[i]` in backward) so that
    the gradient of a tensor every step uses is formed once, by `grads`, after the last step's backward.

    The tape holds detached tensors only and is emptied once the gradients are formed: the autograd nodes
    hold the tape, so a stashed tensor with a grad_fn would close a reference cycle through C++ nodes that
    Python's garbage collector cannot see, and every training step's graph would stay alive (a leak of ~25 MB
    per update at 256 units, fixed with tests/test_lstm_fast.py::test_training_steps_do_not_keep_graphs)."""

    def __init__(self, grads):
        self.fwd: list[tuple[Tensor, ...]] = []
        self.bwd: dict[int, tuple[Tensor, ...]] = {}
        self._grads = grads

    def anchor(self, *shared: Tensor) -> Tensor:
        """An empty tensor that every taped step takes as input: its backward (computing the gradients of
        `shared`) runs only after all of theirs."""
        return _TapeSink.apply(self, *shared)

    def pairs(self) -> list[tuple[tuple[Tensor, ...], tuple[Tensor, ...]]]:
        return [(f, self.bwd[i]) for i, f in enumerate(self.fwd) if i in self.bwd]

    def grads(self) -> tuple[Tensor | None, ...]:
        out = self._grads(self)
        self.fwd, self.bwd = [], {}
        return out


class _TapeSink(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tape: _Tape, *shared: Tensor) -> Tensor:
        ctx.tape = tape
        return shared[0].new_empty(0)

    @staticmethod
    def backward(ctx, _):
        return (None, *ctx.tape.grads())


def _linear_grads(tape: _Tape) -> tuple[Tensor | None]:
    pairs = tape.pairs()
    if not pairs:
        return (None,)
    x = torch.cat([f[0] for f, _ in pairs])
    dy = torch.cat([b[0] for _, b in pairs])
    return (dy.t() @ x,)


class _StepLinear(torch.autograd.Function):
    """pre + x W^T, whose gradient for W the tape forms (one GEMM over all steps)."""

    @staticmethod
    def forward(ctx, pre: Tensor, x: Tensor, weight: Tensor, anchor: Tensor, tape: _Tape) -> Tensor:
        ctx.tape, ctx.index, ctx.bias = tape, len(tape.fwd), pre.dim() == 1
        tape.fwd.append((x.detach(),))
        ctx.save_for_backward(weight)
        return torch.addmm(pre, x, weight.t())

    @staticmethod
    def backward(ctx, dy: Tensor):
        (weight,) = ctx.saved_tensors
        ctx.tape.bwd[ctx.index] = (dy,)
        dpre = dy.sum(0) if ctx.bias else dy
        return dpre, dy @ weight, None, dy.new_zeros(0), None


class _Linear:
    """x -> pre + x W^T for one weight used at every step (W: (out, in), autograd-tracked)."""

    def __init__(self, weight: Tensor):
        self.weight = weight
        self.tape = None
        if torch.is_grad_enabled() and weight.requires_grad:
            self.tape = _Tape(_linear_grads)
            self.anchor, self.detached = self.tape.anchor(weight), weight.detach()

    def __call__(self, pre: Tensor, x: Tensor) -> Tensor:
        if self.tape is None:
            return torch.addmm(pre, x, self.weight.t())
        return _StepLinear.apply(pre, x, self.detached, self.anchor, self.tape)


def _attention_grads(tape: _Tape) -> tuple[Tensor | None, Tensor | None]:
    """d keys = sum_t d score_t (x) h_t, d memory = sum_t alpha_t (x) d context_t, as two batched products."""
    pairs = tape.pairs()
    if not pairs:
        return None, None
    B = tape.batch

    def stacked(ts: list[Tensor]) -> Tensor:  # steps (n_t, D) -> (B, steps, D), zero rows past n_t
        return torch.stack([F.pad(t, (0, 0, 0, B - t.shape[0])) for t in ts], 1)

    h, alpha = stacked([f[0] for f, _ in pairs]), stacked([f[1] for f, _ in pairs])
    d_score, d_context = stacked([b[0] for _, b in pairs]), stacked([b[1] for _, b in pairs])
    return d_score.transpose(1, 2) @ h, alpha.transpose(1, 2) @ d_context


class _StepAttention(torch.autograd.Function):
    """alpha = softmax(<keys_j, h> + bias_j), context = sum_j alpha_j memory_j; the gradients of the keys and
    the memory, shared by all steps, are formed by the tape."""

    @staticmethod
    def forward(ctx, h: Tensor, keys: Tensor, memory: Tensor, bias: Tensor, anchor: Tensor, tape: _Tape):
        alpha = torch.baddbmm(bias[:, None], h[:, None], keys.transpose(1, 2))[:, 0].softmax(-1)
        context = torch.bmm(alpha[:, None], memory)[:, 0]
        ctx.tape, ctx.index = tape, len(tape.fwd)
        tape.fwd.append((h.detach(), alpha.detach()))
        ctx.save_for_backward(keys, memory, alpha)
        return alpha, context

    @staticmethod
    def backward(ctx, d_alpha: Tensor, d_context: Tensor):
        keys, memory, alpha = ctx.saved_tensors
        d_alpha = torch.baddbmm(d_alpha[:, None], d_context[:, None], memory.transpose(1, 2))[:, 0]
        d_score = alpha * (d_alpha - (d_alpha * alpha).sum(-1, keepdim=True))
        ctx.tape.bwd[ctx.index] = (d_score, d_context)
        return torch.bmm(d_score[:, None], keys)[:, 0], None, None, None, d_alpha.new_zeros(0), None


class _Attention:
    """Luong attention of one batch (keys, memory (B, S, H), additive mask bias (B, S)); a step may run on
    the first n rows."""

    def __init__(self, keys: Tensor, memory: Tensor, bias: Tensor):
        self.keys, self.memory, self.bias, self.tape = keys, memory, bias, None
        if torch.is_grad_enabled() and (keys.requires_grad or memory.requires_grad):
            self.tape = _Tape(_attention_grads)
            self.tape.batch = keys.shape[0]
            self.anchor = self.tape.anchor(keys, memory)
            self.keys, self.memory = keys.detach(), memory.detach()

    def __call__(self, h: Tensor) -> tuple[Tensor, Tensor]:
        n = h.shape[0]
        keys, memory, bias = self.keys[:n], self.memory[:n], self.bias[:n]
        if self.tape is None:
            alpha = torch.baddbmm(bias[:, None], h[:, None], keys.transpose(1, 2))[:, 0].softmax(-1)
            return alpha, torch.bmm(alpha[:, None], memory)[:, 0]
        return _StepAttention.apply(h, keys, memory, bias, self.anchor, self.tape)


def _cell_forward(gates: Tensor, c0: Tensor) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
    """torch's LSTM cell on precomputed gates (B, 4H) in torch's order i, f, g, o: h, c and what backward needs."""
    H = c0.shape[1]
    s = gates.sigmoid()
    g = gates[:, 2 * H:3 * H].tanh()
    c = torch.addcmul(s[:, H:2 * H] * c0, s[:, :H], g)
    tc = c.tanh()
    return s[:, 3 * H:] * tc, c, (s, g, c0, tc)


class _LSTMCell(torch.autograd.Function):
    """The cell as one autograd node."""

    @staticmethod
    def forward(ctx, gates: Tensor, c0: Tensor) -> tuple[Tensor, Tensor]:
        h, c, saved = _cell_forward(gates, c0)
        ctx.save_for_backward(*saved)
        return h, c

    @staticmethod
    def backward(ctx, dh: Tensor, dc: Tensor):
        s, g, c0, tc = ctx.saved_tensors
        i, f, _, o = s.chunk(4, 1)
        dc = dc + dh * o * (1 - tc * tc)
        d_gates = torch.cat([dc * g * i * (1 - i), dc * c0 * f * (1 - f), dc * i * (1 - g * g), dh * tc * o * (1 - o)],
                            1)
        return d_gates, dc * f


def _lstm_cell(gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    if torch.is_grad_enabled() and (gates.requires_grad or c.requires_grad):
        return _LSTMCell.apply(gates, c)
    return _cell_forward(gates, c)[:2]


# ----------------------------------------------------------------------------------------------- the model

class _Weights(NamedTuple):
    """The decoder's parameters arranged for the loop (derived from the parameters, autograd-tracked)."""
    emb_gates: Tensor            # (4H, E): the embedding part of layer 1's input weights
    emb_gates_bias: Tensor       # (4H,): layer 1's two biases, summed
    layers: list[tuple[_Linear, Tensor | None]]  # per layer: [input; h] -> gates, and the summed biases (k > 1)
    emb_comb: Tensor             # (H, E): the embedding part of `combine`
    rest_comb: _Linear           # [[feed;] h_t; context] -> combined vector
    comb_bias: Tensor
    tables: tuple[Tensor, Tensor] | None = None  # without autograd: _embed's two outputs for every target token


class _Noise(NamedTuple):
    """One step's dropout noise (mask / (1 - p)): target embedding, between decoder layers, combined vector; with
    the reference's feed dropout also the mask shared by the head and the feed (`high`) and the feed's own."""
    emb: Tensor | None
    between: list[Tensor]
    comb: Tensor | None
    high: Tensor | None = None
    feed: Tensor | None = None


def _dropout_noise(like: Tensor, shape: tuple[int, ...], p: float) -> Tensor | None:
    """The noise `structseq.nn.dropout.dropout(x, p)` multiplies x by (same random draws), or None if p == 0."""
    if p <= 0:
        return None
    if p >= 1:
        return like.new_zeros(shape)
    return dropout_noise(like, shape, p)


def _bernoulli_noise(like: Tensor, shape: tuple[int, ...], p: float) -> Tensor | None:
    """The noise `nn.LSTM` multiplies the input of its upper layers by (`F.dropout`'s draws), or None if p == 0."""
    if p <= 0:
        return None
    if p >= 1:
        return like.new_zeros(shape)
    return like.new_empty(shape).bernoulli_(1 - p).div_(1 - p)


class LSTMSeq2Seq(Autoregressive):
    sentence_state = frozenset({"src", "src_pad", "memory", "keys", "attn_bias"})

    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, head: nn.Module, *, embed_dim: int = 512,
                 hidden_dim: int = 512, layers: int = 2, dropout: float = 0.4, combine_feed: bool = False,
                 feed_dropout: float = 0.0, high_dropout: float = 0.0, combine_activation: str = "none"):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab_size, embed_dim, padding_idx=self.pad)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, embed_dim, padding_idx=self.pad)
        lstm_dropout = dropout if layers > 1 else 0.0
        self.encoder = nn.LSTM(embed_dim, hidden_dim, layers, batch_first=True, dropout=lstm_dropout)
        self.decoder = nn.LSTM(embed_dim + hidden_dim, hidden_dim, layers, batch_first=True, dropout=lstm_dropout)
        self.attn_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)  # W in <e_j, W h_t>
        self.combine = nn.Linear(embed_dim + (3 if combine_feed else 2) * hidden_dim, hidden_dim)
        self.head, self.dropout, self.hidden_dim, self.combine_feed = head, dropout, hidden_dim, combine_feed
        self.feed_dropout, self.high_dropout = feed_dropout, high_dropout
        if combine_activation not in ("none", "tanh"):
            raise ValueError(f"combine_activation must be 'none' or 'tanh', got {combine_activation!r}")
        self.combine_tanh = combine_activation == "tanh"
        self._inference_weights: tuple[tuple, _Weights] | None = None

    def encode(self, inputs: Inputs) -> State:
        src = inputs["src"]
        pad_mask = src.eq(self.pad)
        lengths = (~pad_mask).sum(1)
        x = dropout(self.src_embed(src), self.dropout, self.training)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, (h, c) = self.encoder(packed)
        memory, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        keys = F.linear(memory, self.attn_proj.weight.t())  # W^T e_j: scores are <keys_j, h_t>
        attn_bias = torch.zeros_like(pad_mask, dtype=memory.dtype).masked_fill_(pad_mask, float("-inf"))
        # states are batch-first (one tensor per layer) so that map_state can reorder them along dim 0
        return {"src": src, "src_pad": pad_mask, "memory": memory, "keys": keys, "attn_bias": attn_bias,
                "h": list(h.unbind(0)), "c": list(c.unbind(0))}

    def init_state(self, enc: State) -> State:
        B = enc["memory"].shape[0]
        return {**enc, "feed": enc["memory"].new_zeros(B, self.hidden_dim)}

    def train(self, mode: bool = True):
        self._inference_weights = None  # a mode switch is where training and evaluation alternate
        return super().train(mode)

    def _weights(self) -> _Weights:
        """The loop's weights; without autograd (decoding) cached until a parameter changes."""
        params = [*self.decoder.parameters(), *self.combine.parameters()]
        if torch.is_grad_enabled() and any(p.requires_grad for p in params):
            return self._arrange_weights()
        key = tuple((p.data_ptr(), p._version) for p in params)
        if self._inference_weights is None or self._inference_weights[0] != key:
            with torch.no_grad():
                w = self._arrange_weights()
                self._inference_weights = key, w._replace(tables=self._embed(None, w, None))
        return self._inference_weights[1]

    def _arrange_weights(self) -> _Weights:
        lstm, E = self.decoder, self.tgt_embed.embedding_dim
        layers = []
        for k in range(lstm.num_layers):
            w_ih, w_hh = getattr(lstm, f"weight_ih_l{k}"), getattr(lstm, f"weight_hh_l{k}")
            bias = None if k == 0 else getattr(lstm, f"bias_ih_l{k}") + getattr(lstm, f"bias_hh_l{k}")
            layers.append((_Linear(torch.cat([w_ih[:, E:] if k == 0 else w_ih, w_hh], 1)), bias))
        w_c = self.combine.weight
        return _Weights(lstm.weight_ih_l0[:, :E], lstm.bias_ih_l0 + lstm.bias_hh_l0, layers,
                        w_c[:, :E], _Linear(w_c[:, E:]), self.combine.bias)

    def _noise(self, like: Tensor, B: int) -> _Noise | None:
        """One step's dropout noise, drawn in the per-step formulation's order (embedding, nn.LSTM between its
        layers, combined vector)."""
        if not self.training:
            return None
        H, E = self.hidden_dim, self.tgt_embed.embedding_dim
        emb = _dropout_noise(like, (B, E), self.dropout)
        between = [_bernoulli_noise(like, (B, H), self.decoder.dropout) for _ in range(self.decoder.num_layers - 1)]
        comb = _dropout_noise(like, (B, H), self.dropout)
        high = _dropout_noise(like, (B, H), self.high_dropout)
        return _Noise(emb, [n for n in between if n is not None], comb, high,
                      _dropout_noise(like, (B, H), self.feed_dropout))

    def _core(self, gates0: Tensor, comb0: Tensor, state: State, w: _Weights, attention: _Attention,
              noise: _Noise | None) -> tuple[Tensor, Tensor, State]:
        """One decoder step given the embedding's parts of layer 1's gates (B, 4H) and of the combined vector
        (B, H): (combined vector (B, H), attention (B, S), new state)."""
        feed, hs, cs = state["feed"], [], []
        x = feed
        for k, (linear, bias) in enumerate(w.layers):
            if k > 0 and noise is not None and noise.between:
                x = x * noise.between[k - 1]
            gates = linear(gates0 if k == 0 else bias, torch.cat([x, state["h"][k]], 1))
            x, c = _lstm_cell(gates, state["c"][k])
            hs.append(x)
            cs.append(c)
        alpha, context = attention(x)
        comb = w.rest_comb(comb0, torch.cat([feed, x, context] if self.combine_feed else [x, context], 1))
        if self.combine_tanh:
            comb = torch.tanh(comb)
        for mask in (noise.comb, noise.high) if noise is not None else ():
            if mask is not None:
                comb = comb * mask
        # the next step's input dropout on the feed, drawn with this step's masks
        new_feed = comb if noise is None or noise.feed is None else comb * noise.feed
        return comb, alpha, {**state, "h": hs, "c": cs, "feed": new_feed}

    def _embed(self, tokens: Tensor | None, w: _Weights, noise: Tensor | None) -> tuple[Tensor, Tensor]:
        """The embedding's parts of layer 1's gates and of the combined vector, for tokens of any shape (None:
        the whole vocabulary); without dropout looked up in tables when `w` has them."""
        if w.tables is not None and noise is None and tokens is not None:
            return w.tables[0][tokens], w.tables[1][tokens]
        emb = self.tgt_embed.weight if tokens is None else self.tgt_embed(tokens)
        if noise is not None:
            emb = emb * noise
        return F.linear(emb, w.emb_gates, w.emb_gates_bias), F.linear(emb, w.emb_comb, w.comb_bias)

    def step(self, prev: Tensor, state: State) -> tuple[Tensor, State]:
        w, noise = self._weights(), self._noise(state["feed"], prev.shape[0])
        gates0, comb0 = self._embed(prev, w, noise and noise.emb)
        attention = _Attention(state["keys"], state["memory"], state["attn_bias"])
        comb, alpha, state = self._core(gates0, comb0, state, w, attention, noise)
        return self.head(comb[:, None], alpha[:, None], state["src"])[:, 0], state

    def forward(self, batch: Inputs) -> Tensor:
        src, tgt_in = batch["src"], batch["tgt_in"]
        enc = self.encode(batch)
        (B, T), w = tgt_in.shape, self._weights()
        noise = [self._noise(enc["memory"], B) for _ in range(T)]  # drawn for every row, as the reference does
        # Rows sorted by target length, longest first: at step t the rows still inside their target are a prefix
        # and the step runs on that prefix only.
        lengths, order = tgt_in.ne(self.pad).sum(1).sort(descending=True, stable=True)
        active = (lengths[None, :] > torch.arange(T, device=lengths.device)[:, None]).sum(1).tolist()
        state = map_state(self.init_state(enc), lambda x: x.index_select(0, order))
        attention = _Attention(state.pop("keys"), state.pop("memory"), state.pop("attn_bias"))
        emb_noise = None
        if noise and noise[0] is not None and noise[0].emb is not None:
            emb_noise = torch.stack([n.emb for n in noise]).index_select(1, order)
        gates0, comb0 = self._embed(tgt_in.index_select(0, order).t(), w, emb_noise)  # (T, B, 4H), (T, B, H)
        gates0, comb0 = gates0.unbind(0), comb0.unbind(0)  # (indexing [t] would give each step's backward a
        # zero-filled gradient of the whole tensor)
        state = {"h": state["h"], "c": state["c"], "feed": state["feed"]}
        combs, alphas, rows = [], [], B
        for t, n in enumerate(active):
            if n < rows:
                rows, state = n, map_state(state, lambda x: x[:n])
            step_noise = None
            if noise[t] is not None:
                pick = lambda x: x.index_select(0, order[:n])  # noqa: E731
                opt = lambda x: None if x is None else pick(x)  # noqa: E731
                step_noise = _Noise(None, [pick(b) for b in noise[t].between], opt(noise[t].comb),
                                    opt(noise[t].high), opt(noise[t].feed))
            comb, alpha, state = self._core(gates0[t][:n], comb0[t][:n], state, w, attention, step_noise)
            combs.append(F.pad(comb, (0, 0, 0, B - n)))
            alphas.append(F.pad(alpha, (0, 0, 0, B - n)))
        unsort = order.argsort()
        comb, alpha = torch.stack(combs, 1).index_select(0, unsort), torch.stack(alphas, 1).index_select(0, unsort)
        return self.head(comb, alpha, src)


# ---------------------------------------------------------------- schema and builder (`arch: lstm`)

@dataclass
class LSTMConfig:
    arch: str = option("lstm", "model family")
    embed_dim: int = option(512, "embedding width", ge=1)
    hidden_dim: int = option(512, "LSTM width", ge=1)
    layers: int = option(2, "LSTM depth (encoder and decoder)", ge=1)
    dropout: float = option(0.4, "dropout on embeddings, between layers and on the combined vector", ge=0, lt=1)
    combine_feed: bool = option(False, "combined vector from [embedding; previous combined vector; h; context] "
                                   "(the reference code of Akyürek & Andreas 2021) instead of [embedding; h; context]")
    feed_dropout: bool = option(False, "drop the fed-back combined vector as the reference code does: the next step's "
                                   "input [embedding; feed] with p = dropout, and the head's dropout mask on the "
                                   "combined vector, shared by the head and the feed (its --highdrop)")
    combine_activation: str = option("none", "nonlinearity on the combined vector: none (the reference code of "
                                         "Akyürek & Andreas 2021: with combine_feed a linear feedback) or tanh "
                                         "(Luong et al. 2015's attentional vector, which bounds the feedback)",
                                 choices=("none", "tanh"))
    max_length: int = option(MAX_LENGTH, "longest source or target (tokens) the model takes: longer input is "
                                         "refused naming its line (training: skipped, see data.too_long)", ge=1)
    head: Any = head_option()


@register_arch("lstm", config=LSTMConfig, attention=True)
def build_lstm(cfg: LSTMConfig, vocabs: Vocabs, train_examples: Sequence | None = None) -> LSTMSeq2Seq:
    src_vocab, tgt_vocab = vocabs["src"], vocabs["tgt"]
    head_cfg, high = cfg.head, 0.0
    if cfg.feed_dropout:  # the head's dropout becomes the model's mask on the combined vector, shared with the feed
        head_cfg, high = dataclasses.replace(cfg.head, dropout=0.0), cfg.head.dropout
    head = build_head(head_cfg, cfg.hidden_dim, src_vocab, tgt_vocab, train_examples)
    return with_width(LSTMSeq2Seq(len(src_vocab), len(tgt_vocab), head, embed_dim=cfg.embed_dim,
                                  hidden_dim=cfg.hidden_dim, layers=cfg.layers, dropout=cfg.dropout,
                                  combine_feed=cfg.combine_feed, feed_dropout=cfg.dropout if cfg.feed_dropout else 0.0,
                                  high_dropout=high, combine_activation=cfg.combine_activation), cfg.hidden_dim)
