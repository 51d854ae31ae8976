"""The per-step formulation of the LSTM seq2seq decoder, kept as a reference for tests and benchmarks.

`LSTMSeq2SeqReference` is `LSTMSeq2Seq` as it was before the decoder loop was restructured (issue 13): every
step runs `nn.LSTM` on a length-1 sequence of [embedding; previous combined vector], projects h_t with
`attn_proj` for the attention scores and applies `combine` to the concatenation. It shares the parameters
(same state dict), so `model.__class__ = LSTMSeq2SeqReference` or `load_state_dict` turns one into the other;
teacher-forced log-probs, decoding and seeded training agree with `LSTMSeq2Seq` up to floating-point rounding
(the dropout masks are drawn in the same order, tests/models/test_lstm.py).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from structseq.models.base import Inputs, State
from structseq.models.lstm import LSTMSeq2Seq
from structseq.nn.dropout import dropout


class LSTMSeq2SeqReference(LSTMSeq2Seq):
    def encode(self, inputs: Inputs) -> State:
        src = inputs["src"]
        pad_mask = src.eq(self.pad)
        lengths = (~pad_mask).sum(1)
        x = dropout(self.src_embed(src), self.dropout, self.training)
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
        emb = dropout(self.tgt_embed(prev), self.dropout, self.training)  # (B, E)
        inp = torch.cat([emb, state["feed"]], -1)
        hc = (state["h"].transpose(0, 1).contiguous(), state["c"].transpose(0, 1).contiguous())
        out, (h, c) = self.decoder(inp[:, None], hc)
        h_t = out[:, 0]
        scores = torch.bmm(state["memory"], self.attn_proj(h_t)[:, :, None])[:, :, 0]  # (B, S)
        alpha = scores.masked_fill(state["src_pad"], float("-inf")).softmax(-1)
        context = torch.bmm(alpha[:, None], state["memory"])[:, 0]
        comb = self.combine(torch.cat([inp if self.combine_feed else emb, h_t, context], -1))
        if self.combine_tanh:
            comb = torch.tanh(comb)
        comb_d = dropout(comb, self.dropout, self.training)
        comb_d = dropout(comb_d, self.high_dropout, self.training)  # reference --highdrop: head and feed share it
        feed = dropout(comb_d, self.feed_dropout, self.training)  # the next step's input dropout on the feed
        new_state = {**state, "h": h.transpose(0, 1), "c": c.transpose(0, 1), "feed": feed}
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
