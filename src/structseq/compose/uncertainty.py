"""Ensemble uncertainty of decoded sequences (Malinin & Gales 2021, token-level approximation).

With member distributions p_m(v) at a decoding step and their mean p_bar:

* total uncertainty       H(p_bar)
* expected data unc.      mean_m H(p_m)
* mutual information      MI   = H(p_bar) - mean_m H(p_m)
* EPKL                    mean_{m,m'} KL(p_m || p_m') = -sum_v p_bar mean_m log p_m - mean_m H(p_m)
* reverse MI (knowledge)  RMI  = mean_m KL(p_bar || p_m) = -sum_v p_bar mean_m log p_m - H(p_bar)

so EPKL = MI + RMI. A sequence's score is the mean over its token rows (target tokens + end token),
all members teacher-forced on the same hypothesis.

The hypothesis is decoded by one member (`decoder`, the first by default). The ensemble-average
decoding of Malinin & Gales would need step-wise access to every member's distribution, which the
toolkit's `Run` interface does not expose (it offers single-model `translate` and teacher-forced
`token_log_probs`); re-scoring one member's hypothesis under all members is the same token-level
approximation the paper relies on.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from structseq.errors import ConfigError, StructseqError

if TYPE_CHECKING:  # torch is imported where it is used, so degree scoring never pays its start-up
    import torch

MEASURES = ("total", "data", "mi", "epkl", "rmi")

Progress = Callable[[int], None]


class EnsembleMember(Protocol):
    """What `score_ensemble` needs from a trained model (`structseq.api.Run` provides it)."""

    def translate(self, sources: list[str], *, beam: int | None = None) -> list[str]: ...

    def token_log_probs(self, sources: list[str], targets: list[str]) -> list[torch.Tensor]: ...


class VocabularyMismatch(StructseqError):
    """Ensemble members disagree on the target vocabulary, so their distributions cannot be averaged."""


def token_measures(log_probs: torch.Tensor) -> dict[str, torch.Tensor]:
    """All five measures per token row from (M, T, V) log-probabilities; each result has shape (T,).

    Computed in float64; zero-probability entries contribute 0 (0 log 0 = 0). The knowledge measures
    are >= 0 in exact arithmetic and are clamped at 0 against rounding.
    """
    import torch

    if log_probs.dim() != 3:
        raise ValueError(f"expected (M, T, V) log-probabilities, got shape {tuple(log_probs.shape)}")
    lp = log_probs.to(torch.float64)
    members = lp.shape[0]
    log_mean = torch.logsumexp(lp, dim=0) - math.log(members)  # (T, V)
    mean = log_mean.exp()
    total = -torch.xlogy(mean, mean).sum(-1)
    probs = lp.exp()
    data = -torch.xlogy(probs, probs).sum(-1).mean(0)
    # cross term -sum_v p_bar(v) mean_m log p_m(v); 0 where p_bar is 0, +inf where some p_m is 0 but p_bar is not
    mean_log = lp.mean(0)
    cross = -torch.where(mean > 0, mean * mean_log, torch.zeros_like(mean)).sum(-1)
    mi = (total - data).clamp_min(0.0)
    return {
        "total": total,
        "data": data,
        "mi": mi,
        "epkl": (cross - data).clamp_min(0.0),
        "rmi": (cross - total).clamp_min(0.0),
    }


def sequence_measures(log_probs: torch.Tensor) -> dict[str, float]:
    """Sequence scores: the mean of each token-level measure over the T rows."""
    return {name: float(values.mean()) for name, values in token_measures(log_probs).items()}


@dataclass
class UncertaintyResult:
    """Per-example hypothesis, number of scored rows and the five sequence-level measures."""

    sources: list[str]
    hypotheses: list[str]
    n_rows: np.ndarray
    measures: dict[str, np.ndarray]

    def __len__(self) -> int:
        return len(self.sources)


def _target_tokens(run: object) -> list[str] | None:
    vocab = getattr(run, "tgt_vocab", None)
    if vocab is None:
        return None
    return list(getattr(vocab, "itos", vocab))


def check_shared_vocabulary(runs: Sequence[object]) -> None:
    """Members must share one target vocabulary (`Run.tgt_vocab`), token for token and in id order."""
    vocabs = [_target_tokens(run) for run in runs]
    if any(v is None for v in vocabs):
        return  # members without a vocabulary attribute are still checked by distribution width
    reference = vocabs[0]
    for index, vocab in enumerate(vocabs[1:], 1):
        if vocab != reference:
            raise VocabularyMismatch(
                f"ensemble member {index} has a different target vocabulary from member 0 "
                f"({len(vocab)} vs {len(reference)} types): train every member on the same data and vocabulary"
            )


def score_ensemble(
    runs: Sequence[EnsembleMember],
    sources: Sequence[str],
    *,
    beam: int | None = None,
    batch_size: int = 32,
    decoder: int = 0,
    progress: Progress | None = None,
) -> UncertaintyResult:
    """Decode `sources` with member `decoder`, teacher-force every member on the hypotheses, score.

    `beam=None` keeps the decoding member's configured beam size.
    """
    if not runs:
        raise ConfigError("an ensemble needs at least one member (two or more for knowledge uncertainty)")
    if not 0 <= decoder < len(runs):
        raise ConfigError(f"decoder index {decoder} out of range for an ensemble of {len(runs)}")
    if batch_size < 1:
        raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
    check_shared_vocabulary(runs)
    sources = list(sources)
    hypotheses: list[str] = []
    rows: list[int] = []
    values: dict[str, list[float]] = {name: [] for name in MEASURES}
    for begin in range(0, len(sources), batch_size):
        batch = sources[begin : begin + batch_size]
        hyps = list(runs[decoder].translate(batch, beam=beam))
        if len(hyps) != len(batch):
            raise StructseqError(f"member {decoder} returned {len(hyps)} translations for {len(batch)} sources")
        per_member = [run.token_log_probs(batch, hyps) for run in runs]
        for b in range(len(batch)):
            stacked = _stack_members([member[b] for member in per_member], begin + b)
            scores = sequence_measures(stacked)
            for name in MEASURES:
                values[name].append(scores[name])
            rows.append(stacked.shape[1])
        hypotheses.extend(hyps)
        if progress is not None:
            progress(len(batch))
    return UncertaintyResult(
        sources,
        hypotheses,
        np.asarray(rows, dtype=np.int64),
        {name: np.asarray(v, dtype=np.float64) for name, v in values.items()},
    )


def _stack_members(tensors: list[torch.Tensor], example: int) -> torch.Tensor:
    import torch

    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) != 1:
        sizes = {t.shape[-1] for t in tensors}
        if len(sizes) != 1:
            raise VocabularyMismatch(
                f"example {example}: members give distributions over {sorted(sizes)} target types; "
                "every member must share one target vocabulary"
            )
        raise StructseqError(f"example {example}: members scored different numbers of target rows {sorted(shapes)}")
    return torch.stack([t.detach().to("cpu") for t in tensors])


def load_ensemble(run_dirs: Sequence[str | os.PathLike]) -> list[EnsembleMember]:
    """Load trained runs with `structseq.api.load_run`."""
    try:
        from structseq.api import load_run
    except ImportError as error:
        raise StructseqError(f"cannot load trained runs: {error}") from error
    return [load_run(run_dir) for run_dir in run_dirs]
