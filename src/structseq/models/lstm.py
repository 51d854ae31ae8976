"""LSTM encoder-decoder with attention, as in Akyürek & Andreas (2021).

Unidirectional multi-layer LSTM encoder; decoder initialised from the encoder's final state, with
input feeding (the previous combined vector is concatenated to the next input embedding), Luong
attention `score_j = <e_j, W h_t>`, and combined vector `comb = Linear([input; h_t; context])`
(no nonlinearity) handed to the output head with the attention weights. `input` is the target
embedding, or with `combine_feed` the whole decoder input [embedding; previous combined vector] as in
the reference code (on Colors, lexical translation generalises far more reliably with it). Input
feeding makes the decoder inherently sequential, so training loops over target positions; the head
runs once.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from structseq.models.base import Autoregressive, Inputs, State


class LSTMSeq2Seq(Autoregressive):
    def __init__(self, src_vocab_size: int, tgt_vocab_size: int, head: nn.Module, *, embed_dim: int = 512,
                 hidden_dim: int = 512, layers: int = 2, dropout: float = 0.4, combine_feed: bool = False):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab_size, embed_dim, padding_idx=self.pad)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, embed_dim, padding_idx=self.pad)
        lstm_dropout = dropout if layers > 1 else 0.0
        self.encoder = nn.LSTM(embed_dim, hidden_dim, layers, batch_first=True, dropout=lstm_dropout)
        self.decoder = nn.LSTM(embed_dim + hidden_dim, hidden_dim, layers, batch_first=True, dropout=lstm_dropout)
        self.attn_proj = nn.Linear(hidden_dim, hidden_dim, bias=False)  # W in <e_j, W h_t>
        self.combine = nn.Linear(embed_dim + (3 if combine_feed else 2) * hidden_dim, hidden_dim)
        self.head, self.dropout, self.hidden_dim, self.combine_feed = head, dropout, hidden_dim, combine_feed

    def encode(self, inputs: Inputs) -> State:
        src = inputs["src"]
        pad_mask = src.eq(self.pad)
        lengths = (~pad_mask).sum(1)
        x = F.dropout(self.src_embed(src), self.dropout, self.training)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, (h, c) = self.encoder(packed)
        memory, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])
        # states are stored batch-first so that map_state can reorder them along dim 0
        return {"src": src, "src_pad": pad_mask, "memory": memory, "h": h.transpose(0, 1), "c": c.transpose(0, 1)}

    def init_state(self, enc: State) -> State:
        B = enc["memory"].shape[0]
        return {**enc, "feed": enc["memory"].new_zeros(B, self.hidden_dim)}

    def _core(self, prev: Tensor, state: State) -> tuple[Tensor, Tensor, State]:
        """One decoder step without the head: (combined vector (B, H), attention (B, S), new state)."""
        emb = F.dropout(self.tgt_embed(prev), self.dropout, self.training)  # (B, E)
        inp = torch.cat([emb, state["feed"]], -1)
        hc = (state["h"].transpose(0, 1).contiguous(), state["c"].transpose(0, 1).contiguous())
        out, (h, c) = self.decoder(inp[:, None], hc)
        h_t = out[:, 0]
        scores = torch.bmm(state["memory"], self.attn_proj(h_t)[:, :, None])[:, :, 0]  # (B, S)
        alpha = scores.masked_fill(state["src_pad"], float("-inf")).softmax(-1)
        context = torch.bmm(alpha[:, None], state["memory"])[:, 0]
        comb = self.combine(torch.cat([inp if self.combine_feed else emb, h_t, context], -1))
        comb_d = F.dropout(comb, self.dropout, self.training)
        new_state = {**state, "h": h.transpose(0, 1), "c": c.transpose(0, 1), "feed": comb_d}
        return comb_d, alpha, new_state

    def step(self, prev: Tensor, state: State) -> tuple[Tensor, State]:
        comb, alpha, state = self._core(prev, state)
        return self.head(comb[:, None], alpha[:, None], state["src"])[:, 0], state

    def forward(self, batch: Inputs) -> Tensor:
        src, tgt_in = batch["src"], batch["tgt_in"]
        state = self.init_state(self.encode(batch))
        combs, alphas = [], []
        for t in range(tgt_in.shape[1]):
            comb, alpha, state = self._core(tgt_in[:, t], state)
            combs.append(comb)
            alphas.append(alpha)
        return self.head(torch.stack(combs, 1), torch.stack(alphas, 1), src)
