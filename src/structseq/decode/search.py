"""Batched greedy and beam search for every autoregressive model (encode / init_state / step).

Search takes the model's named inputs (a mapping of tensors, e.g. {"src": ...}) and a per-sentence length
limit; it never looks inside the inputs, so models with several inputs (a source and a context) decode
through the same code.

Both searches share one loop (`beam_search`): greedy is the special case that keeps the single best
continuation, so "beam 1 == greedy" holds by construction and is checked in the tests against an
independent argmax loop. Finished hypotheses are kept aside from the K open ones (up to K per sentence,
ranked by `normalized`), so an open prefix never evicts a better finished output; when a sentence stops
follows transformers' `early_stopping` (True / False / "never", see `beam_search`), and a stopped
sentence leaves the batch (its rows of the decoder state are dropped).

The length limit L gives an output at most L + 1 positions, </s> included. `eos_at_limit` (default) forces
</s> at the last one; without it (a pretrained checkpoint whose generation config sets no
`forced_eos_token_id`, as transformers' `generate` with `max_length` = L + 2) any token may take it and the
output ends there unterminated, its score without </s>.

A model whose outputs are bounded by its own position table (a pretrained backbone) says so through
`output_limit(inputs)`; both searches clamp L to it (`within_model`) with one warning naming both numbers, so
a `decode.max_len_b` larger than the table cuts outputs there instead of an IndexError in the embedding.

How the loop places hypotheses in the model's rows is a speed-up, switched in `structseq.decode.speedups`
(greedy leaves an unchanged state alone; beam search keeps a hypothesis in its parent's row where it can, so
caches copy only the rows that move); it changes no output.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Mapping
from dataclasses import dataclass

import torch
from torch import Tensor

from structseq.data.vocab import Vocab
from structseq.decode.speedups import current as current_speedups
from structseq.errors import ConfigError, StructseqError
from structseq.models.base import first_token, output_limit, sentence_state
from structseq.state import map_state


@dataclass
class Hypotheses:
    tokens: list[list[int]]  # best hypothesis per sentence, without </s>
    scores: list[float]  # its total log-probability (including </s>)
    nbest: list[list[tuple[list[int], float]]] | None = None  # all beam entries, best first
    ended: list[list[bool]] | None = None  # whether each entry (of `nbest`, else the best) ended in </s>


def max_lengths(src: Tensor, a: float, b: int, pad: int = Vocab.pad) -> Tensor:
    """Per-sentence output length limit ceil(a * |x| + b), |x| counting the source </s>."""
    return (src.ne(pad).sum(1).float() * a + b).ceil().long().clamp_min(1)


@torch.no_grad()
def greedy(
    model,
    inputs: Mapping[str, Tensor],
    max_len: Tensor,
    eos: int = Vocab.eos,
    bos: int = Vocab.bos,
    pad: int = Vocab.pad,
    eos_at_limit: bool = True,
) -> Hypotheses:
    return beam_search(model, inputs, 1, max_len, len_penalty=0.0, eos=eos, bos=bos, pad=pad, eos_at_limit=eos_at_limit)


def _reorder(state, rows: Tensor, shared: frozenset[str], shrunk: bool):
    """Beam reordering moves hypotheses only within their sentence, so the entries equal across a sentence's
    hypotheses (`model.sentence_state`) need a copy only when sentences have left the batch. The search never
    reads a state again after reordering it, so it hands the state over (`owned`: caches may reuse buffers)."""
    select = lambda x: x.index_select(0, rows)  # noqa: E731
    if shrunk or not shared or not isinstance(state, dict):
        return map_state(state, select, owned=True)
    return {k: v if k in shared else map_state(v, select, owned=True) for k, v in state.items()}


def _stop_rule(early_stopping) -> str:
    """transformers' `early_stopping` values as one of "true", "false", "never" (a ValueError otherwise)."""
    if early_stopping is True or early_stopping is False:
        return str(early_stopping).lower()
    if early_stopping == "never":
        return "never"
    raise ValueError(f"early_stopping must be True, False or 'never', got {early_stopping!r}")


_WARNED: weakref.WeakSet = weakref.WeakSet()  # models whose output limit was warned about


@torch.no_grad()
def within_model(model, inputs: Mapping[str, Tensor], max_len: Tensor) -> Tensor:
    """`max_len` clamped to the most output tokens (before </s>) the model can produce for each input
    (`model.output_limit(inputs)`, where the model has one), warning once per model with both numbers."""
    limit = output_limit(model, inputs)
    if limit is None:
        return max_len
    limit = limit.to(max_len.device)
    if bool((limit < 1).any()):
        raise StructseqError(
            "an input leaves no room for an output within the model's positions (max_position_embeddings); "
            "shorten the input"
        )
    over = max_len > limit
    if not bool(over.any()):
        return max_len
    if model not in _WARNED:
        warnings.warn(
            f"the decoding length limit (decode.max_len_a * |x| + max_len_b) allows {int(max_len[over].max())} "
            f"output tokens, more than the model's position table holds ({int(limit[over].min())}, from its "
            "max_position_embeddings): outputs are cut there",
            stacklevel=3,
        )
        _WARNED.add(model)
    return torch.minimum(max_len, limit)


class Step:
    """How one step chooses (fairseq's `Search.step`): given the open hypotheses' log-probabilities (n, K, V)
    and scores (n, K), the candidates (n, C): their scores, the open hypothesis each extends (`origin`,
    0..K-1) and its token. The loop (`search`) does the rest: which candidates finish (`may_finish`), which
    K stay open (`select`), stopping, the length penalty and n-best lists. This one is beam search: the 2K
    best continuations; the first K may finish, the K best unfinished stay open."""

    def start(self, K: int, device) -> Tensor:
        """Each sentence's K initial scores: one open hypothesis (identical beams at the start: keep one)."""
        scores = torch.full((K,), float("-inf"), device=device)
        scores[0] = 0.0
        return scores

    def step(self, lp: Tensor, scores: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        n, K, V = lp.shape
        cand, flat = (scores[..., None] + lp).view(n, K * V).topk(min(2 * K, K * V), dim=1)
        return cand, flat // V, flat % V

    def may_finish(self, C: int, K: int, device) -> Tensor:
        """Which of the C candidates may finish (ending in </s> or at the limit): the first K."""
        return torch.arange(C, device=device) < K

    def select(self, cand: Tensor, K: int) -> tuple[Tensor, Tensor]:
        """The K candidates that stay open (those that ended are -inf in `cand`): scores and positions."""
        return cand.topk(K, dim=1)


BEAM = Step()


def beam_search(
    model,
    inputs: Mapping[str, Tensor],
    beam: int,
    max_len: Tensor,
    len_penalty: float = 1.0,
    nbest: bool = False,
    eos: int = Vocab.eos,
    bos: int = Vocab.bos,
    pad: int = Vocab.pad,
    eos_at_limit: bool = True,
    early_stopping: bool | str = False,
) -> Hypotheses:
    """Beam search: `search` with the beam `Step`; `max_len` (B,): each sentence's output length limit."""
    return search(
        model, inputs, max_len, BEAM, beam=beam, len_penalty=len_penalty, nbest=nbest, eos=eos, bos=bos, pad=pad,
        eos_at_limit=eos_at_limit, early_stopping=early_stopping,
    )  # fmt: skip


@torch.no_grad()
def search(
    model,
    inputs: Mapping[str, Tensor],
    max_len: Tensor,
    rule: Step = BEAM,
    *,
    beam: int = 1,
    copies: int = 1,
    len_penalty: float = 1.0,
    nbest: bool = False,
    eos: int = Vocab.eos,
    bos: int = Vocab.bos,
    pad: int = Vocab.pad,
    eos_at_limit: bool = True,
    early_stopping: bool | str = False,
    processors=None,
) -> Hypotheses:
    """The one search loop: K = `beam` hypotheses per sentence (in each of `copies` independent searches of
    it: samples), each step's choice made by `rule` (`Step`); `max_len` (B,): each sentence's output length
    limit (see `max_lengths`; `eos_at_limit`: the module's docstring). `processors` (transformers'
    `LogitsProcessor` convention: `(input_ids (rows, 1 + t), scores (rows, V)) -> scores`, input_ids from the
    decoder's start token, `models.base.first_token`) change
    each step's log-probabilities before <pad>, <s> and the limit are applied.

    Each step's candidates that end (</s>, or the limit) and that `rule.may_finish` join the sentence's K best
    finished ones, ranked by `normalized` (score / length ** len_penalty, the length counting </s>); the ones
    `rule.select` picks among the others stay open. A finished hypothesis is never evicted by an open one, so
    the search never returns worse than an output it has found. A sentence stops (transformers'
    `early_stopping`, same semantics) once K are finished and: True: at once; False: the best open score over
    its current length ** len_penalty cannot beat the worst finished (transformers' default heuristic);
    "never": no open hypothesis can beat the worst finished at any length up to the limit (exact: textbook beam
    search). It also stops when nothing is open, and without n-best lists as soon as no open hypothesis can
    beat the best finished one (this changes no result). A stopped sentence leaves the batch. With `copies` >
    1, a sentence's n-best list is the best of each copy, ranked by `normalized`."""
    stop = _stop_rule(early_stopping)
    max_len = within_model(model, inputs, max_len)
    B0 = max_len.shape[0]
    if copies > 1:
        max_len = max_len.repeat_interleave(copies)
    B, K = max_len.shape[0], beam
    device = max_len.device
    shared = sentence_state(model)
    state = model.init_state(model.encode(inputs))
    if K > WIDE:  # before the state is copied K times: a beam the output vocabulary cannot fill is refused
        _check_width(model, state, K, B0, bos, device)
    expand = torch.arange(B0, device=device).repeat_interleave(copies * K)
    state = map_state(state, lambda t: t.index_select(0, expand))
    T = int(max_len.max()) + 1
    speed = current_speedups()  # with stable slots, `slot` (n, K): each hypothesis's row, in rank order
    slot = torch.arange(K, device=device).expand(B, K) if speed.stable_slots and K > 1 else None
    scores = rule.start(K, device).expand(B, K).clone()
    history = torch.empty(B, K, 0, dtype=torch.long, device=device)
    fin_norm = torch.full((B, K), float("-inf"), device=device)  # finished: normalised score, best first
    fin_score = torch.full((B, K), float("-inf"), device=device)
    fin_len = torch.zeros(B, K, dtype=torch.long, device=device)  # tokens before </s>
    fin_hist = torch.full((B, K, T), pad, dtype=torch.long, device=device)
    prev = torch.full((B * K,), bos, dtype=torch.long, device=device)
    start = first_token(model, bos)  # what processors see first: the decoder's own start token
    limit = max_len.to(device)  # (n,)
    alive = torch.arange(B, device=device)  # original index of each open sentence
    done: dict[int, tuple] = {}  # original index -> (fin_hist, fin_score, fin_len, fin_norm, history) when it left
    moved = False  # whether any hypothesis is not in the row of its rank (`_place`)
    for t in range(T):
        n = alive.shape[0]
        log_probs, state = model.step(prev, state)
        lp = _ranked(log_probs.view(n, K, -1), slot if moved else None).float().nan_to_num(nan=float("-inf"))
        V = lp.shape[-1]  # (nan: a diverged model must not crash search)
        if processors:
            ids = torch.cat([prev.new_full((n * K, 1), start), history.reshape(n * K, t)], 1)
            budget = {}  # each row's words left before it must end (a length-aware grammar reads them)
            if getattr(processors, "reads_remaining", False):
                budget["remaining"] = (limit + int(not eos_at_limit) - t).repeat_interleave(K)
            lp = processors(ids, lp.view(n * K, V), **budget).view(n, K, V)
        lp[..., [pad, bos]] = float("-inf")  # never generate padding or a second <s>
        at_limit = (t >= limit)[:, None]
        if eos_at_limit:  # forced </s> at the length limit
            is_eos = torch.arange(V, device=device) == eos
            lp = torch.where(at_limit[..., None] & ~is_eos, float("-inf"), lp)
        cand, origin, token = rule.step(lp, scores)
        ends = (token == eos) | at_limit  # without eos_at_limit, an output at the limit ends unterminated
        new = ends & rule.may_finish(cand.shape[1], K, device) & cand.isfinite()
        if bool(new.any()):
            hist = torch.cat([history.gather(1, origin[..., None].expand(n, -1, t)), token[..., None]], 2)
            lengths = t + (token != eos).long()  # tokens kept: an output ended at the limit keeps its last
            fin = _keep_best((fin_norm, fin_score, fin_len, fin_hist), cand, new, lengths, hist, len_penalty, pad)
            fin_norm, fin_score, fin_len, fin_hist = fin
        scores, keep_k = rule.select(cand.masked_fill(ends, float("-inf")), K)
        origin, token = origin.gather(1, keep_k), token.gather(1, keep_k)
        history = torch.cat([history.gather(1, origin[..., None].expand(n, K, t)), token[..., None]], 2)
        settled = _settled(stop, fin_norm, scores.max(1).values, limit, t, len_penalty, top_only=not nbest)
        reorder, token_rows, slot, moved = _place(origin, token, slot)  # (n, K) rows of the new states, their tokens
        shrunk = bool(settled.any())
        if shrunk:
            for i in settled.nonzero()[:, 0].tolist():
                done[int(alive[i])] = (fin_hist[i], fin_score[i], fin_len[i], fin_norm[i], history[i, 0])
            keep = (~settled).nonzero()[:, 0]
            if keep.numel() == 0:
                break
            alive, reorder, token_rows, limit = alive[keep], reorder[keep], token_rows[keep], limit[keep]
            scores, history, slot = scores[keep], history[keep], slot if slot is None else slot[keep]
            fin_norm, fin_score, fin_len, fin_hist = fin_norm[keep], fin_score[keep], fin_len[keep], fin_hist[keep]
        if shrunk or not _identity(reorder, K, speed):
            state = _reorder(state, reorder.view(-1), shared, shrunk=shrunk)
        prev = token_rows.reshape(-1)
    lists = [_entries(done[b], eos, (eos, pad, bos)) for b in range(B)]
    if copies > 1:  # each copy's best, ranked as the search ranks
        lists = [[e[0] for e in lists[b * copies : (b + 1) * copies]] for b in range(B0)]
        lists = [sorted(e, key=lambda x: -normalized(x[1], len(x[0]), len_penalty, x[2])) for e in lists]
    ended = [[x[2] for x in e] for e in lists]
    pairs = [[(toks, s) for toks, s, _ in e] for e in lists]
    kept = pairs if nbest or copies > 1 else None
    return Hypotheses(
        [e[0][0] for e in pairs], [e[0][1] for e in pairs], kept, ended if kept else [e[:1] for e in ended]
    )


def _ranked(log_probs: Tensor, slot: Tensor | None) -> Tensor:
    """The model's log-probabilities (n, K rows, V) in the search's rank order (`slot`: each rank's row; None:
    row = rank)."""
    return log_probs if slot is None else log_probs.gather(1, slot[..., None].expand(log_probs.shape))


def _place(origin: Tensor, token: Tensor, slot: Tensor | None) -> tuple[Tensor, Tensor, Tensor | None, bool]:
    """Where the hypotheses (n, K, rank order; `origin`: the parent's rank) go in the model's state: the rows
    of the new state (n, K, flat indices of the old), the token of each row, each hypothesis's row and whether
    any is not in the row of its rank. Without `slot` (each hypothesis's row before the step), row = rank;
    with it, each row holds the hypothesis that descends from it where one does (`_stable_slots`)."""
    n, K = origin.shape
    base = torch.arange(n, device=origin.device)[:, None] * K
    if slot is None:
        return origin + base, token, None, False
    parent = slot.gather(1, origin)
    slot = _stable_slots(parent)
    rank = torch.empty_like(slot).scatter_(1, slot, torch.arange(K, device=slot.device).expand(n, K))
    moved = bool((slot != torch.arange(K, device=slot.device)).any())
    return parent.gather(1, rank) + base, token.gather(1, rank), slot, moved


def _identity(reorder: Tensor, K: int, speed) -> bool:
    """Whether a step's reorder (no sentence left) keeps every row in place, so that the state need not be
    reordered (`speedups.identity_reorder`): one hypothesis per sentence, or stable slots where every
    hypothesis descends from its own row."""
    if not speed.identity_reorder:
        return False
    if K == 1:
        return True
    rows = torch.arange(reorder.numel(), device=reorder.device).view_as(reorder)
    return speed.stable_slots and not bool((reorder != rows).any())


def _stable_slots(parent: Tensor) -> Tensor:
    """Each hypothesis's row (n, K), in rank order, given its parent's row (n, K): the best child of each parent
    keeps the parent's row; the other children take, in rank order, the rows no hypothesis descends from, in
    ascending order (`speedups.stable_slots`)."""
    n, K = parent.shape
    earlier = torch.ones(K, K, dtype=torch.bool, device=parent.device).tril(-1)  # [r, r']: r' ranks before r
    first = ~((parent[:, :, None] == parent[:, None, :]) & earlier).any(2)  # the best child of its parent
    taken = (parent[:, :, None] == torch.arange(K, device=parent.device)).any(1)  # (n, rows): some child's parent
    free = taken.to(torch.uint8).argsort(stable=True, dim=1)  # the rows no hypothesis descends from first, ascending
    movers = (~first).long().cumsum(1) - 1  # each other child's place among them
    return torch.where(first, parent, free.gather(1, movers.clamp_min(0)))


#: beams up to this width are searched without asking the model its vocabulary size first
WIDE = 64


def _check_width(model, state, K: int, B: int, bos: int, device) -> None:
    """A ConfigError for a beam wider than the model's output vocabulary (its first step's width: one step on
    an unshared copy of the state), which can never be filled at the first step and, copied K times, took
    all memory."""
    rows = torch.arange(B, device=device)
    V = model.step(torch.full((B,), bos, device=device), map_state(state, lambda t: t.index_select(0, rows)))[0]
    if K > V.shape[-1]:
        raise ConfigError(
            f"'decode.beam' {K}: wider than the model's {V.shape[-1]} output tokens (a beam it cannot fill); "
            f"use at most {V.shape[-1]}"
        )


def _entries(done: tuple, eos: int, specials: tuple[int, ...]) -> list[tuple[list[int], float, bool]]:
    """A stopped sentence's finished hypotheses (tokens, score, whether it ended in </s>), best first; only
    when every continuation scored -inf (e.g. NaN outputs), its raw history instead."""
    hist, sc, ln, norm, raw = (x.tolist() for x in done)
    entries = [
        (hist[k][: ln[k]], sc[k], ln[k] < len(hist[k]) and hist[k][ln[k]] == eos)
        for k in range(len(norm))
        if norm[k] != float("-inf")
    ]
    return entries or [([t for t in raw if t not in specials], float("-inf"), True)]


def _keep_best(fin: tuple, cand: Tensor, new: Tensor, lengths: Tensor, hist: Tensor, len_penalty: float, pad: int):
    """The K best finished hypotheses of each sentence (normalised score, score, tokens kept, history padded to
    the finished history's width), best first, after the continuations `new` marks join them."""
    fin_norm, fin_score, fin_len, fin_hist = fin
    n, K, T = fin_hist.shape
    t = hist.shape[2] - 1
    norm = cand / float(t + 1) ** len_penalty if len_penalty else cand
    hist = torch.nn.functional.pad(hist, (0, T - t - 1), value=pad)
    fin_norm, pick = torch.cat([fin_norm, norm.masked_fill(~new, float("-inf"))], 1).topk(K, dim=1)
    fin_score = torch.cat([fin_score, cand], 1).gather(1, pick)
    fin_len = torch.cat([fin_len, lengths], 1).gather(1, pick)
    fin_hist = torch.cat([fin_hist, hist], 1).gather(1, pick[..., None].expand(n, K, T))
    return fin_norm, fin_score, fin_len, fin_hist


def _settled(rule: str, fin_norm: Tensor, best_open: Tensor, limit: Tensor, t: int, len_penalty: float, top_only: bool):
    """Which sentences stop after step `t`: K finished and the stopping rule (`beam_search`), or nothing open,
    or (`top_only`: no n-best list) no open hypothesis able to beat the best finished one at any length."""
    full = fin_norm[:, -1].isfinite()
    longest = (limit + 1).float() if len_penalty > 0 else torch.full_like(best_open, t + 1.0)
    exact = best_open / longest.pow(len_penalty)  # no open hypothesis can reach a higher normalised score
    if rule == "true":
        settled = full
    elif rule == "false":
        settled = full & (fin_norm[:, -1] >= best_open / float(t + 1) ** len_penalty)
    else:
        settled = full & (fin_norm[:, -1] >= exact)
    settled = settled | ~best_open.isfinite()
    return settled | (fin_norm[:, 0] >= exact) if top_only else settled


def normalized(score: float, n_tokens: int, len_penalty: float, ended: bool = True) -> float:
    """What beam search ranks by: score / length ** len_penalty, the length counting </s> (n_tokens + 1) when
    the output `ended` in </s>, else (an output cut at the length limit) its n_tokens alone."""
    return score / (n_tokens + int(ended)) ** len_penalty if len_penalty else score


def sequence_log_prob(log_probs: Tensor, tgt_out: Tensor, pad: int = Vocab.pad) -> Tensor:
    """Sum of per-token log-probabilities of `tgt_out` under teacher-forced `log_probs` (B, T, V)."""
    tok = log_probs.gather(-1, tgt_out[..., None])[..., 0]
    return tok.masked_fill(tgt_out.eq(pad), 0.0).sum(1)
