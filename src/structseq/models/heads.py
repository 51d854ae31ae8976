"""Output heads: decoder features (+ attention over the source) -> log-probabilities.

Every head has one interface, `head(features (B,T,D), attn (B,T,S) or None, src (B,S)) -> (B,T,V)`
log-probabilities, and says whether it needs attention weights. The copy head is the special case
L = I (over tokens shared by both vocabularies) of the lexical translation head.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from structseq.data.vocab import Vocab

TINY = 1e-30  # floor for probabilities before log: keeps log(0) out of mixtures


class SoftmaxHead(nn.Module):
    needs_attention = False

    def __init__(self, d_model: int, vocab_size: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size, bias=bias)
        self.dropout = dropout

    def logits(self, features: Tensor) -> Tensor:
        return self.proj(F.dropout(features, self.dropout, self.training))

    def forward(self, features: Tensor, attn: Tensor | None = None, src: Tensor | None = None) -> Tensor:
        return self.logits(features).log_softmax(-1)


def mix_log_probs(log_write: Tensor, source_dist: Tensor, gate_logit: Tensor) -> Tensor:
    """log((1 - g) p_write + g p_source) with g = sigmoid(gate_logit), stable in log space."""
    log_g, log_1mg = F.logsigmoid(gate_logit), F.logsigmoid(-gate_logit)
    return torch.logaddexp(log_1mg + log_write, log_g + source_dist.clamp_min(TINY).log())


def shared_token_map(src_vocab: Vocab, tgt_vocab: Vocab) -> Tensor:
    """For each source id, the target id of the same string (</s> -> </s>); <unk> if none."""
    m = torch.full((len(src_vocab),), tgt_vocab.unk, dtype=torch.long)
    for i, tok in enumerate(src_vocab.itos):
        if tok in tgt_vocab:
            m[i] = tgt_vocab.stoi[tok]
    m[src_vocab.pad] = tgt_vocab.pad
    return m


class CopyHead(nn.Module):
    """Pointer-generator: p = (1 - g) softmax(W h) + g sum_j alpha_j [y = x_j], g = sigmoid(w.h)."""

    needs_attention = True

    def __init__(self, d_model: int, vocab_size: int, src_to_tgt: Tensor, dropout: float = 0.0):
        super().__init__()
        self.write = SoftmaxHead(d_model, vocab_size, dropout)
        self.gate = nn.Linear(d_model, 1)
        self.register_buffer("src_to_tgt", src_to_tgt)
        self.vocab_size = vocab_size

    def source_distribution(self, attn: Tensor, src: Tensor) -> Tensor:
        """Scatter attention mass onto the target ids of the attended source tokens: (B, T, V)."""
        B, T, S = attn.shape
        index = self.src_to_tgt[src][:, None, :].expand(B, T, S)
        return attn.new_zeros(B, T, self.vocab_size).scatter_add_(2, index, attn)

    def forward(self, features: Tensor, attn: Tensor, src: Tensor) -> Tensor:
        return mix_log_probs(self.write(features), self.source_distribution(attn, src), self.gate(features))


HEADS = {"softmax": SoftmaxHead, "copy": CopyHead}
