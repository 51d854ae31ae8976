"""Output heads: decoder features (+ attention over the source) -> log-probabilities.

Every head has one interface, `head(features (B,T,D), attn (B,T,S) or None, src (B,S)) -> (B,T,V)`
log-probabilities, and says whether it needs attention weights. The copy head is the special case
L = I (over tokens shared by both vocabularies) of the lexical translation head.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from structseq.data.vocab import Vocab
from structseq.errors import ConfigError
from structseq.fields import option
from structseq.lexicon import learn
from structseq.lexicon.lexicon import Lexicon
from structseq.models.lexical import TIE_RULES, LexiconRows, lexicon_rows, tie_order
from structseq.nn.dropout import dropout
from structseq.registry import HEADS, LEARNERS, register_head

TINY = 1e-30  # floor for probabilities before log: keeps log(0) out of mixtures
MASKED = -1e5  # what `mask_special` adds to a special token's log-probability (the reference code's -99999)
SPECIAL_OUTPUTS = (Vocab.pad, Vocab.bos, Vocab.unk)  # what `mask_special` takes out (</s> stays)


def without_specials(log_probs: Tensor) -> Tensor:
    """Log-probs renormalised over the outputs other than <pad>, <s> and <unk>, which keep ~0 probability.
    The reference code of Akyürek & Andreas 2021 does this at every step, in training too, so no probability
    is spent on tokens no target holds; a finite penalty (as there) keeps a target <unk> finite."""
    penalty = torch.zeros(log_probs.shape[-1], dtype=log_probs.dtype, device=log_probs.device)
    penalty[list(SPECIAL_OUTPUTS)] = MASKED
    return (log_probs + penalty).log_softmax(-1)


def masked_targets(log_probs: Tensor, target: Tensor) -> Tensor:
    """Where a target is an output `mask_special` takes out (<s>, <unk>; a <pad> target is padding, no target)
    scored below MASKED / 2: a word outside the target vocabulary, which such a head can never emit on purpose
    (the reference's -99999), so its -1e5 says nothing about how well the model does. `score` skips these in its
    blow-up check, validation's loss leaves them out (`Seq2SeqTask.validation_nll`)."""
    ids = [i for i in SPECIAL_OUTPUTS if i != Vocab.pad]
    special = torch.isin(target, torch.tensor(ids, device=target.device))
    return special & (log_probs.gather(-1, target[..., None])[..., 0] < MASKED / 2)


class SoftmaxHead(nn.Module):
    needs_attention = False

    def __init__(
        self, d_model: int, vocab_size: int, dropout: float = 0.0, bias: bool = True, mask_special: bool = False
    ):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size, bias=bias)
        self.dropout, self.mask_special = dropout, mask_special

    def logits(self, features: Tensor) -> Tensor:
        return self.proj(dropout(features, self.dropout, self.training))

    def forward(self, features: Tensor, attn: Tensor | None = None, src: Tensor | None = None) -> Tensor:
        log_probs = self.logits(features).log_softmax(-1)
        return without_specials(log_probs) if self.mask_special else log_probs


def mix_log_probs(log_write: Tensor, source_dist: Tensor, gate_logit: Tensor) -> Tensor:
    """log((1 - g) p_write + g p_source) with g = sigmoid(gate_logit), stable in log space."""
    log_g, log_1mg = F.logsigmoid(gate_logit), F.logsigmoid(-gate_logit)
    return torch.logaddexp(log_1mg + log_write, log_g + source_dist.clamp_min(TINY).log())


def shared_token_map(src_vocab: Vocab, tgt_vocab: Vocab) -> Tensor:
    """For each source id, the target id of the same string (</s> -> </s>); `len(tgt_vocab)` (the lexical
    head's "no translation" column) if none."""
    m = torch.full((len(src_vocab),), len(tgt_vocab), dtype=torch.long)
    for i, tok in enumerate(src_vocab.itos):
        if tok in tgt_vocab:
            m[i] = tgt_vocab.stoi[tok]
    return m


GATES = ("learned", "copy_token")
INITS = ("frozen", "soft", "learned", "uniform")
EPS = 1e-7  # floor of a learned lexicon's initial probabilities (as in the reference code): keeps log finite


class LexicalHead(nn.Module):
    """Lexical translation (Akyürek & Andreas 2021): p(w) = (1 - g) p_write(w) + g sum_j alpha_j L[x_j, w].

    `rows` gives L (see `structseq.models.lexical`) with one extra column, "no translation": the mass
    g sum_j alpha_j L[x_j, none] is dropped and the rest renormalised, so attending to a token without a
    translation defers to p_write (the reference code does the same by sending such rows to <pad> and
    masking <pad> out of the output). `learn=False` keeps L as buffers (in the state dict, no gradient);
    `learn=True` makes it a dense parameter of log-probabilities, softmaxed per row.
    The gate: "learned" is the paper's g = sigmoid(w . h); "copy_token" is the reference code's reserved
    <copy> output whose softmax probability is g and is then removed: here one extra logit c . h beside
    the V output logits (a separate row, so those can still be tied to the embeddings), i.e.
    g = softmax([W h; c . h])[V], gate logit c . h - logsumexp(W h).
    """

    needs_attention = True

    def __init__(
        self,
        d_model: int,
        vocab_size: int,
        rows: LexiconRows,
        *,
        gate: str = "learned",
        learn: bool = False,
        dropout: float = 0.0,
        mask_special: bool = False,
    ):
        super().__init__()
        if gate not in GATES:
            raise ValueError(f"gate must be one of {', '.join(GATES)}, not {gate!r}")
        self.write = SoftmaxHead(d_model, vocab_size, dropout)
        self.gate = nn.Linear(d_model, 1)
        self.gate_type, self.vocab_size, self.mask_special = gate, vocab_size, mask_special
        if learn:
            self.log_table = nn.Parameter(rows.dense().clamp_min(EPS).log())
        else:
            self.register_buffer("index", rows.index)
            self.register_buffer("weight", rows.weight)
            self.register_buffer("me_row", rows.me_row)
            self.register_buffer("me_dist", rows.me_dist)

    @property
    def trainable_lexicon(self) -> bool:
        return hasattr(self, "log_table")

    def matrix(self) -> Tensor:
        """The dense L (V_x, V_y + 1), rows summing to 1; the last column is "no translation"."""
        if self.trainable_lexicon:
            return self.log_table.softmax(-1)
        return LexiconRows(self.index, self.weight, self.me_row, self.me_dist).dense()

    def source_distribution(self, attn: Tensor, src: Tensor) -> Tensor:
        """sum_j alpha_tj L[x_j]: (B, T, V + 1), the last column the mass of untranslatable positions."""
        if self.trainable_lexicon:
            return torch.bmm(attn, self.log_table.softmax(-1)[src])
        B, T, S = attn.shape
        K = self.index.shape[1]
        index = self.index[src][:, None].expand(B, T, S, K).reshape(B, T, S * K)
        values = (attn[..., None] * self.weight[src][:, None]).reshape(B, T, S * K)
        out = attn.new_zeros(B, T, self.vocab_size + 1).scatter_add_(2, index, values)
        return out + (attn * self.me_row[src][:, None]).sum(-1, keepdim=True) * self.me_dist

    def forward(self, features: Tensor, attn: Tensor, src: Tensor) -> Tensor:
        h = dropout(features, self.write.dropout, self.training)
        logits = self.write.proj(h)
        # both gates see the dropped-out features, as in the reference code, where the gate is one logit of the
        # output layer after its dropout
        if self.gate_type == "copy_token":
            gate_logit = self.gate(h) - logits.logsumexp(-1, keepdim=True)
        else:
            gate_logit = self.gate(h)
        lex = self.source_distribution(attn, src)[..., :-1]
        mixed = mix_log_probs(logits.log_softmax(-1), lex, gate_logit)
        # drop the untranslatable mass g * L[., none] and renormalise: divide by (1 - g) + g * sum(lex)
        translated = lex.sum(-1, keepdim=True).clamp_min(TINY).log()
        kept = torch.logaddexp(F.logsigmoid(-gate_logit), F.logsigmoid(gate_logit) + translated)
        return without_specials(mixed - kept) if self.mask_special else mixed - kept

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # K (targets per row) depends on the lexicon, which a model built only to load a checkpoint lacks.
        for name in ("index", "weight"):
            saved = state_dict.get(prefix + name)
            if saved is not None and name in self._buffers and saved.shape != self._buffers[name].shape:
                self._buffers[name] = torch.empty_like(saved)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class CopyHead(LexicalHead):
    """Pointer-generator: the lexical head with L = I over the tokens both vocabularies share (an empty
    lexicon without mutual exclusivity); attention on other source tokens defers to p_write."""

    def __init__(self, d_model: int, vocab_size: int, src_to_tgt: Tensor, **options):
        """`options`: the lexical head's `gate`, `dropout` and `mask_special`."""
        super().__init__(d_model, vocab_size, LexiconRows.from_map(src_to_tgt, vocab_size), **options)


# ---------------------------------------------------------------- schemas and builders (`model.head.type`)


@dataclass
class SoftmaxHeadConfig:
    type: str = option(
        "softmax",
        "output head: softmax | copy | lexical (lexical translation, Akyürek & "
        "Andreas 2021), or a registered plugin head",
    )
    dropout: float = option(0.0, "dropout on the features entering the output layer", ge=0, lt=1)
    mask_special: bool = option(
        False,
        "renormalise every step's output distribution without <pad>, <s> and <unk>, in training as in "
        "decoding (the reference code of Akyürek & Andreas 2021); refused when a training target holds "
        "<unk> (data.min_freq); validation's loss leaves out a reference word outside the vocabulary (its <unk> "
        "is scored -1e5 on purpose)",
    )


@dataclass
class CopyHeadConfig(SoftmaxHeadConfig):
    type: str = option("copy", "output head: softmax | copy | lexical")
    gate: str = option(
        "learned",
        "gate: learned (paper: sigmoid(w.h)) | copy_token (reference code: the softmax "
        "probability of an extra <copy> output)",
        choices=GATES,
    )


@dataclass
class LexicalHeadConfig(CopyHeadConfig):
    type: str = option("lexical", "output head: softmax | copy | lexical")
    lexicon: str | None = option(
        None,
        "a learner (simple | pmi | ibm1 | ibm2 | bayesian), learned from the "
        "training data, or a lexicon JSON file; null = no entries (copy + mutual "
        "exclusivity)",
    )
    lexicon_settings: dict = option({}, "keyword arguments of the lexicon learner, e.g. {epsilon: 3}")
    tau: float = option(0.0, "0 = hard rows (argmax), > 0 = softmax(score / tau)", ge=0)
    init: str = option(
        "frozen",
        "frozen (fixed, tau = 0) | soft (fixed, tau > 0) | learned (trainable, "
        "initialised from the lexicon) | uniform (trainable, every row uniform)",
        choices=INITS,
    )
    mutual_exclusivity: bool = option(True, "rows without entries spread over the targets no row maps to")
    ties: str = option(
        "alphabetical",
        "hard rows' tie rule: alphabetical | first_seen (first in the training "
        "pairs, source then target: the reference's COGS and SCAN order) | "
        "frequent (most frequent target: its Tatoeba order)",
        choices=TIE_RULES,
    )


def head_option(help: str = "output head: {type: softmax | copy | lexical, ...}; each type has its own keys"):
    """The `head` key of a model schema: a section whose schema is picked by its `type` (role `head`: the config
    checks find it by the role, whatever a schema calls it)."""
    return field(default_factory=SoftmaxHeadConfig, metadata={"help": help, "choose": ("type", "head"), "role": "head"})


def build_head(
    cfg, d_model: int, src_vocab: Vocab, tgt_vocab: Vocab, train_examples: Sequence | None = None
) -> nn.Module:
    """The head `cfg.type` names. `train_examples` (the training pairs) resolve a lexical head's lexicon;
    without them (loading a checkpoint, or checking a config) L is a placeholder of the right shape that
    `load_state_dict` fills."""
    return HEADS.get(cfg.type).build(cfg, d_model, src_vocab, tgt_vocab, train_examples)


def check_mask_special(cfg, tgt_vocab: Vocab, train_examples: Sequence | None) -> None:
    """`mask_special` takes <unk> out of the outputs, so no training target may need it."""
    if not cfg.mask_special or train_examples is None:
        return
    for i, e in enumerate(train_examples):
        unknown = next((t for t in e.target if t not in tgt_vocab), None)
        if unknown is not None:
            raise ConfigError(
                f"'model.head.mask_special' takes <unk> out of the outputs, but training example {i + 1}'s target "
                f"token {unknown!r} is <unk> (not in the target vocabulary: data.min_freq?)"
            )


@register_head("softmax", config=SoftmaxHeadConfig)
def build_softmax_head(cfg, d_model, src_vocab, tgt_vocab, train_examples=None) -> SoftmaxHead:
    check_mask_special(cfg, tgt_vocab, train_examples)
    return SoftmaxHead(d_model, len(tgt_vocab), cfg.dropout, mask_special=cfg.mask_special)


@register_head("copy", config=CopyHeadConfig, needs_attention=True)
def build_copy_head(cfg, d_model, src_vocab, tgt_vocab, train_examples=None) -> CopyHead:
    check_mask_special(cfg, tgt_vocab, train_examples)
    src_to_tgt = shared_token_map(src_vocab, tgt_vocab)
    options = {"dropout": cfg.dropout, "gate": cfg.gate, "mask_special": cfg.mask_special}
    return CopyHead(d_model, len(tgt_vocab), src_to_tgt, **options)


def resolve_lexicon(cfg: LexicalHeadConfig, train_examples: Sequence) -> Lexicon | None:
    """The configured lexicon: learned from the training pairs (a learner's name) or read from a file."""
    if cfg.lexicon is None:
        return None
    if cfg.lexicon in LEARNERS:
        return learn(train_examples, cfg.lexicon, **cfg.lexicon_settings)
    if not Path(cfg.lexicon).is_file():
        raise ConfigError(
            f"'model.head.lexicon': '{cfg.lexicon}' is neither a lexicon file nor a learner ({', '.join(LEARNERS)})"
        )
    return Lexicon.load(cfg.lexicon)


@register_head("lexical", config=LexicalHeadConfig, needs_attention=True)
def build_lexical_head(
    cfg: LexicalHeadConfig, d_model: int, src_vocab: Vocab, tgt_vocab: Vocab, train_examples: Sequence | None = None
) -> LexicalHead:
    if (cfg.init == "frozen" and cfg.tau != 0) or (cfg.init == "soft" and cfg.tau <= 0):
        raise ConfigError(
            f"'model.head.tau' = {cfg.tau} does not fit init '{cfg.init}': frozen is the hard "
            "lexicon (tau 0), soft needs tau > 0, learned takes either"
        )
    check_mask_special(cfg, tgt_vocab, train_examples)
    if cfg.init == "uniform":
        rows = LexiconRows.uniform(len(src_vocab), len(tgt_vocab))
    else:
        lexicon = resolve_lexicon(cfg, train_examples) if train_examples is not None else None
        order = tie_order(train_examples, cfg.ties) if train_examples is not None else None
        rows = lexicon_rows(lexicon, src_vocab, tgt_vocab, cfg.tau, cfg.mutual_exclusivity, order)
    learn_rows = cfg.init in ("learned", "uniform")
    return LexicalHead(
        d_model,
        len(tgt_vocab),
        rows,
        gate=cfg.gate,
        learn=learn_rows,
        dropout=cfg.dropout,
        mask_special=cfg.mask_special,
    )
