"""Search and teacher-forced scoring over a list of examples, in batches, for any task with named model inputs.

A task hands over its model inputs (`task.decode_inputs` for search, `task.batch` for scoring; the task is
passed in, never imported); what searches a batch is a strategy (`structseq.decode.strategies`: n-best lists
and sampling serve every autoregressive model alike, tree and tag searches every tagger).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import nullcontext
from typing import Any

import torch
from torch import Tensor

from structseq.data.example import Example
from structseq.data.vocab import Vocab
from structseq.decode.sampling import Sampling
from structseq.decode.speedups import off as speedups_off
from structseq.decode.strategies import Candidate, Settings, choose
from structseq.errors import ConfigError
from structseq.progress import progress


def length_sorted_batches(
    examples: Sequence[Example], batch_size: int, what: str = "decode", show_progress: bool = False
) -> Iterator[list[int]]:
    """The indices of `examples` in batches of `batch_size`, shortest sources first (less padding), with a
    progress bar labelled `what`: the batching of every decoding (`run`'s)."""
    order = sorted(range(len(examples)), key=lambda i: len(examples[i].source))
    chunks = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    yield from progress(chunks, what, show_progress)


def check_beam(beam: int | None) -> None:
    """An explicit beam (`--beam`, `beam=`): an integer >= 1, or None for the run's decode.beam. The one rule:
    `run` applies it to every decoding, and `structseq evaluate` asks it before reading the split."""
    from structseq.fields import check_value

    if beam is not None and (isinstance(beam, bool) or not isinstance(beam, int)):
        raise ConfigError(f"'--beam' must be an integer, got {beam!r}")
    check_value(beam, {"ge": 1}, "--beam")


@torch.no_grad()
def run(
    model,
    task,
    examples: Sequence[Example],
    decode_cfg,
    *,
    vocabs,
    nbest: int = 1,
    beam: int | None = None,
    sampling: Sampling | None = None,
    show_progress: bool = False,
) -> list[Any]:
    """The one batched decoding loop (every task's `predict`, `Run.search`, the CLI): each example's outputs
    from the strategy `decode_cfg.strategy` names, which must search the model's `search_interface` (or the
    interface's default: greedy at beam 1, beam search, or sampling when `sampling` is given; a tree's or a
    tagger's k-best search: `strategies.choose`). A sequence model's outputs are its `nbest` best
    `Candidate`s, best first (`Strategy.outputs`); a tagger's, each word's k best tags (`tagging.Tagging`).
    Batches of `decode_cfg.batch_size` sentences sorted by source length, inputs from `task.decode_batch`
    (`decode_inputs`, or given each example's index, for errors naming it), progress labelled
    `task.progress_label`; a sampling strategy draws from one generator seeded with `decode.seed` (or
    `sampling.seed`) for the whole call. `beam` (an explicit --beam) is refused by a strategy that keeps none."""
    check_beam(beam)
    if isinstance(nbest, bool) or not isinstance(nbest, int) or nbest < 1:
        raise ConfigError(f"'--nbest' must be an integer >= 1, got {nbest!r}")
    d = decode_cfg
    device = next(model.parameters()).device
    settings = Settings(d.beam if beam is None else beam, nbest, d.len_penalty, d.early_stopping, sampling, options=d)
    name = "sampling" if sampling is not None else d.strategy
    strategy = choose(name, settings, model.search_interface, type(model).__name__)
    if beam is not None and beam > 1 and "beam" not in strategy.reads:
        raise ConfigError(f"'--beam' {beam}: decode.strategy '{strategy.name}' keeps no beam; leave --beam out")
    out: list[Any] = [None] * len(examples)
    label = "sample" if sampling else task.progress_label
    with nullcontext() if d.speedups else speedups_off():  # decode.speedups: false, the plain loop
        for chunk in length_sorted_batches(examples, d.batch_size, label, show_progress):
            inputs = task.to_device(task.decode_batch([examples[i] for i in chunk], vocabs, chunk), device)
            for i, outputs in zip(chunk, strategy.outputs(model, inputs, task, vocabs, d)):
                out[i] = outputs
    return out


def search_examples(model, task, vocabs, examples: Sequence[Example], decode_cfg, **kw) -> list[list[Candidate]]:
    """`run` with the vocabularies first (the earlier name of the loop)."""
    return run(model, task, examples, decode_cfg, vocabs=vocabs, **kw)


@torch.no_grad()
def forced_scores(
    model, task, vocabs, examples: Sequence[Example], ids: Sequence[Sequence[int]], batch_size: int, specials: dict
) -> list[Tensor]:
    """Each example's given output `ids` (model ids, without </s>, e.g. an n-best entry's) scored through the
    search's own incremental protocol (encode, init_state, step from `specials["bos"]`): the log-probability of
    each id and then </s>, a (len + 1,) CPU tensor each, equal to the search's score of the same ids however
    they detokenise. `specials`: the model's eos/bos/pad ids where they are not `Vocab`'s."""
    eos, bos, pad = (specials.get(k, getattr(Vocab, k)) for k in ("eos", "bos", "pad"))
    device, out = next(model.parameters()).device, []
    for i in range(0, len(examples), batch_size):
        rows = [list(map(int, r)) + [eos] for r in ids[i : i + batch_size]]
        inputs = task.to_device(task.decode_inputs(list(examples[i : i + batch_size]), vocabs), device)
        tgt = torch.full((len(rows), max(map(len, rows))), pad, dtype=torch.long, device=device)
        for j, r in enumerate(rows):
            tgt[j, : len(r)] = torch.tensor(r, device=device)
        state, prev, steps = model.init_state(model.encode(inputs)), torch.full_like(tgt[:, 0], bos), []
        for t in range(tgt.shape[1]):
            lp, state = model.step(prev, state)
            steps.append(lp.float().gather(1, tgt[:, t : t + 1])[:, 0])
            prev = tgt[:, t]
        scores = torch.stack(steps, 1).cpu()
        out += [scores[j, : len(r)].clone() for j, r in enumerate(rows)]
    return out


def teacher_forced(
    model, task, vocabs, examples: Sequence[Example], batch_size: int
) -> Iterator[tuple[Tensor, Tensor]]:
    """(log-probabilities (B, T, V), `tgt_out` (B, T)) of each batch of `examples` in order, teacher-forced:
    what every scorer of given outputs reads (`Run.token_log_probs`, `Run.target_scores`, contrastive)."""
    if batch_size < 1:
        raise ConfigError(f"'--batch-size' must be >= 1, got {batch_size}")
    device = next(model.parameters()).device
    with torch.no_grad():
        for i in range(0, len(examples), batch_size):
            b = task.to_device(task.batch(list(examples[i : i + batch_size]), vocabs), device)
            yield model(b).float(), b["tgt_out"]


def target_scores(
    model, task, vocabs, examples: Sequence[Example], batch_size: int = 64, pad: int = Vocab.pad
) -> list[tuple[list[int], Tensor]]:
    """Each example's target ids as the model sees them (subword pieces for a subword task, then </s>) and the
    teacher-forced log-probability of each: (ids, a (len + 1,) CPU tensor); the sum is the sequence's
    log-probability. `pad`: the padding id of `tgt_out`."""
    out = []
    for lp, tgt_out in teacher_forced(model, task, vocabs, examples, batch_size):
        tok = lp.gather(-1, tgt_out[..., None])[..., 0].cpu()
        ids = tgt_out.cpu()
        for row, t, n in zip(tok, ids, tgt_out.ne(pad).sum(1).tolist()):
            out.append((t[:n].tolist(), row[:n].clone()))
    return out
