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
call it one step at a time (`structseq/testing/oracles/lstm_reference.py` keeps that formulation for tests; the kernels are in `nn/step_kernels.py`):
- the parts of layer 1's gates and of the combined vector that depend only on the target embedding
  are computed for all positions in one GEMM before the loop;
- the attention keys W^T e_j are projected once per batch (`<e_j, W h_t> = <W^T e_j, h_t>`);
- a step is one GEMM per layer ([input; h] times the layer's two weight matrices side by side), the
  attention, one GEMM for the combined vector and the LSTM cell's pointwise work (one autograd node);
- in training, the gradients of what all steps share (those weights, the attention keys and memory) are
  formed once per batch, in one large product over the steps' stashed operands (`Tape`), instead of
  being accumulated step by step;
- rows are sorted by target length and a step runs only on the rows still inside their target (outputs
  at padding positions are zeros; no loss reads them).
Dropout masks are drawn in the order of the per-step formulation, so seeded training agrees with it up to
floating-point rounding (tests/models/test_lstm.py).

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
from structseq.nn.step_kernels import TapedAttention, TapedLinear, lstm_cell
from structseq.registry import register_arch
from structseq.state import map_state

# ----------------------------------------------------------------------------------------------- the model


class _Weights(NamedTuple):
    """The decoder's parameters arranged for the loop (derived from the parameters, autograd-tracked)."""

    emb_gates: Tensor  # (4H, E): the embedding part of layer 1's input weights
    emb_gates_bias: Tensor  # (4H,): layer 1's two biases, summed
    layers: list[tuple[TapedLinear, Tensor | None]]  # per layer: [input; h] -> gates, and the summed biases (k > 1)
    emb_comb: Tensor  # (H, E): the embedding part of `combine`
    rest_comb: TapedLinear  # [[feed;] h_t; context] -> combined vector
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

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        head: nn.Module,
        *,
        embed_dim: int = 512,
        hidden_dim: int = 512,
        layers: int = 2,
        dropout: float = 0.4,
        combine_feed: bool = False,
        feed_dropout: float = 0.0,
        high_dropout: float = 0.0,
        combine_activation: str = "none",
        attention_bias: bool = False,
    ):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab_size, embed_dim, padding_idx=self.pad)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, embed_dim, padding_idx=self.pad)
        lstm_dropout = dropout if layers > 1 else 0.0
        self.encoder = nn.LSTM(embed_dim, hidden_dim, layers, batch_first=True, dropout=lstm_dropout)
        self.decoder = nn.LSTM(embed_dim + hidden_dim, hidden_dim, layers, batch_first=True, dropout=lstm_dropout)
        self.attn_proj = nn.Linear(hidden_dim, hidden_dim, bias=attention_bias)  # W, b in <e_j, W h_t + b>
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
        if self.attn_proj.bias is None:
            attn_bias = torch.zeros_like(pad_mask, dtype=memory.dtype).masked_fill_(pad_mask, float("-inf"))
        else:  # the query bias's part of the scores, <e_j, b>, is the same at every step
            attn_bias = (memory @ self.attn_proj.bias).masked_fill(pad_mask, float("-inf"))
        # states are batch-first (one tensor per layer) so that map_state can reorder them along dim 0
        return {
            "src": src,
            "src_pad": pad_mask,
            "memory": memory,
            "keys": keys,
            "attn_bias": attn_bias,
            "h": list(h.unbind(0)),
            "c": list(c.unbind(0)),
        }

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
            layers.append((TapedLinear(torch.cat([w_ih[:, E:] if k == 0 else w_ih, w_hh], 1)), bias))
        w_c = self.combine.weight
        return _Weights(
            lstm.weight_ih_l0[:, :E],
            lstm.bias_ih_l0 + lstm.bias_hh_l0,
            layers,
            w_c[:, :E],
            TapedLinear(w_c[:, E:]),
            self.combine.bias,
        )

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
        return _Noise(
            emb, [n for n in between if n is not None], comb, high, _dropout_noise(like, (B, H), self.feed_dropout)
        )

    def _core(
        self, gates0: Tensor, comb0: Tensor, state: State, w: _Weights, attention: TapedAttention, noise: _Noise | None
    ) -> tuple[Tensor, Tensor, State]:
        """One decoder step given the embedding's parts of layer 1's gates (B, 4H) and of the combined vector
        (B, H): (combined vector (B, H), attention (B, S), new state)."""
        feed, hs, cs = state["feed"], [], []
        x = feed
        for k, (linear, bias) in enumerate(w.layers):
            if k > 0 and noise is not None and noise.between:
                x = x * noise.between[k - 1]
            gates = linear(gates0 if k == 0 else bias, torch.cat([x, state["h"][k]], 1))
            x, c = lstm_cell(gates, state["c"][k])
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
        attention = TapedAttention(state["keys"], state["memory"], state["attn_bias"])
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
        attention = TapedAttention(state.pop("keys"), state.pop("memory"), state.pop("attn_bias"))
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
                step_noise = _Noise(
                    None,
                    [pick(b) for b in noise[t].between],
                    opt(noise[t].comb),
                    opt(noise[t].high),
                    opt(noise[t].feed),
                )
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
    embed_dim: int = option(512, "embedding width", ge=1, role="width")
    hidden_dim: int = option(512, "LSTM width", ge=1, role="width")
    layers: int = option(2, "LSTM depth (encoder and decoder)", ge=1)
    dropout: float = option(0.4, "dropout on embeddings, between layers and on the combined vector", ge=0, lt=1)
    combine_feed: bool = option(
        False,
        "combined vector from [embedding; previous combined vector; h; context] "
        "(the reference code of Akyürek & Andreas 2021) instead of [embedding; h; context]",
    )
    feed_dropout: bool = option(
        False,
        "drop the fed-back combined vector as the reference code does: the next step's "
        "input [embedding; feed] with p = dropout, and the head's dropout mask on the "
        "combined vector, shared by the head and the feed (its --highdrop)",
    )
    combine_activation: str = option(
        "none",
        "nonlinearity on the combined vector: none (the reference code of "
        "Akyürek & Andreas 2021: with combine_feed a linear feedback) or tanh "
        "(Luong et al. 2015's attentional vector, which bounds the feedback)",
        choices=("none", "tanh"),
    )
    attention_bias: bool = option(
        False,
        "a bias on the attention query, score_j = <e_j, W h_t + b> (the reference code of "
        "Akyürek & Andreas 2021 projects the query with a biased linear layer)",
    )
    max_length: int = option(
        MAX_LENGTH,
        "longest source or target (tokens) the model takes: longer input is "
        "refused naming its line (training: skipped, see data.too_long)",
        ge=1,
        role="max_length",
    )
    head: Any = head_option()


@register_arch("lstm", config=LSTMConfig, attention=True)
def build_lstm(cfg: LSTMConfig, vocabs: Vocabs, train_examples: Sequence | None = None) -> LSTMSeq2Seq:
    src_vocab, tgt_vocab = vocabs["src"], vocabs["tgt"]
    head_cfg, high = cfg.head, 0.0
    if cfg.feed_dropout:  # the head's dropout becomes the model's mask on the combined vector, shared with the feed
        head_cfg, high = dataclasses.replace(cfg.head, dropout=0.0), cfg.head.dropout
    head = build_head(head_cfg, cfg.hidden_dim, src_vocab, tgt_vocab, train_examples)
    return with_width(
        LSTMSeq2Seq(
            len(src_vocab),
            len(tgt_vocab),
            head,
            embed_dim=cfg.embed_dim,
            hidden_dim=cfg.hidden_dim,
            layers=cfg.layers,
            dropout=cfg.dropout,
            combine_feed=cfg.combine_feed,
            feed_dropout=cfg.dropout if cfg.feed_dropout else 0.0,
            high_dropout=high,
            combine_activation=cfg.combine_activation,
            attention_bias=cfg.attention_bias,
        ),
        cfg.hidden_dim,
    )
