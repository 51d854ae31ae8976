"""Selection and the whole ReaCT pipeline: degree -> top-K distinct candidates -> uncertainty ->
drop the D most uncertain (noisy) -> sample S uniformly from the next R.

Every random choice (ties in degree or uncertainty, the final sample) comes from one seeded numpy
generator per step, so a build is reproducible from its report.
"""

from __future__ import annotations

import json
import math
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from structseq.compose.corpus import column, parse_float, read_tsv, write_tsv
from structseq.compose.degree import DEFAULT_MAX_N, DegreeResult, NgramDictionary, score_pool
from structseq.compose.summary import pool_warning
from structseq.compose.summary import summarize as _summary
from structseq.compose.uncertainty import MEASURES, EnsembleMember, UncertaintyResult, score_ensemble
from structseq.errors import ConfigError, DataError
from structseq.outputs import UNCHECKED, OutputError, Outputs

#: Makes a progress callback for a stage: (description, total) -> callback(n_done_now).
ProgressFactory = Callable[[str, int], Callable[[int], None]]


def _normalise(sentence: str) -> str:
    return " ".join(sentence.split())


def top_k_unique(
    degree: np.ndarray,
    sentences: Sequence[str],
    k: int,
    *,
    seed: int = 0,
    lengths: np.ndarray | None = None,
    min_length: int = 1,
) -> np.ndarray:
    """Indices of the k highest-degree distinct sentences, best first ("non-overlapping" in the paper).

    Unscored sentences (NaN degree: OOV or empty) and those shorter than `min_length` are never taken;
    duplicates (up to whitespace) keep their first occurrence in ranking order; ties in degree are broken
    by a seeded random order rather than by position in the pool. Returns fewer than k when the pool
    runs out.
    """
    if k < 0:
        raise ConfigError(f"candidates must be >= 0, got {k}")
    degree = np.asarray(degree, dtype=np.float64)
    if len(degree) != len(sentences):
        raise DataError(f"{len(degree)} degrees for {len(sentences)} sentences")
    eligible = np.isfinite(degree)
    if lengths is not None and min_length > 1:
        eligible &= np.asarray(lengths) >= min_length
    index = np.flatnonzero(eligible)
    ties = np.random.default_rng(seed).random(len(index))
    order = index[np.lexsort((ties, -degree[index]))]
    return first_distinct(order.tolist(), sentences, k)


def first_distinct(order: Sequence[int], sentences: Sequence[str], k: int) -> np.ndarray:
    """The first `k` of `order` (indices into `sentences`) whose sentence (up to whitespace) is not an earlier one's."""
    seen: set[str] = set()
    chosen: list[int] = []
    for i in order:
        if len(chosen) >= k:
            break
        key = _normalise(sentences[i])
        if key in seen:
            continue
        seen.add(key)
        chosen.append(i)
    return np.asarray(chosen, dtype=np.int64)


@dataclass
class Selection:
    """Result of `select_uncertain`; every array indexes the scored examples.

    `ranking` is all examples by decreasing uncertainty; `dropped` the first `drop_top` of it;
    `window` the next `window` ones; `selected` the sample from the window, in ascending index order.
    """

    ranking: np.ndarray
    dropped: np.ndarray
    window: np.ndarray
    selected: np.ndarray


def select_uncertain(scores: np.ndarray, *, drop_top: int, window: int, sample: int, seed: int = 0) -> Selection:
    """Drop the `drop_top` most uncertain, then sample `sample` without replacement from the next `window`."""
    scores = np.asarray(scores, dtype=np.float64)
    for name, value in (("drop_top", drop_top), ("window", window), ("sample", sample)):
        if value < 0:
            raise ConfigError(f"{name} must be >= 0, got {value}")
    if sample > window:
        raise ConfigError(f"cannot sample {sample} examples from a window of {window}")
    if drop_top + window > len(scores):
        raise ConfigError(
            f"only {len(scores)} scored candidates, but drop_top + window = {drop_top} + {window} = "
            f"{drop_top + window}: lower them or raise the number of candidates"
        )
    if np.isnan(scores).any():
        raise DataError(f"{int(np.isnan(scores).sum())} uncertainty score(s) are NaN")
    rng = np.random.default_rng(seed)
    ties = rng.random(len(scores))
    ranking = np.lexsort((ties, -scores))
    window_index = ranking[drop_top : drop_top + window]
    selected = np.sort(rng.choice(window_index, size=sample, replace=False)) if sample else np.zeros(0, np.int64)
    return Selection(ranking, ranking[:drop_top], window_index, selected.astype(np.int64))


@dataclass
class BuildConfig:
    """Every knob of the pipeline; the defaults are the paper's (sec. 4)."""

    min_count: int = 3  # a word seen fewer times in train is OOV
    atom_threshold: int = 3  # an n-gram seen more times in train is an atom
    max_n: int | None = DEFAULT_MAX_N  # longest atom in words (degree.DEFAULT_MAX_N); None: unbounded
    min_length: int = 1  # shortest candidate sentence (the paper states none)
    candidates: int = 60_000  # K: top-K distinct sentences by degree
    drop_top: int = 2_000  # D: most uncertain, discarded as noise
    window: int = 18_000  # R: the next R by uncertainty
    sample: int = 3_000  # S: sampled uniformly from the window
    measure: str = "rmi"  # which uncertainty ranks candidates
    seed: int = 0
    beam: int | None = None  # None: the decoding run's configured beam
    batch_size: int = 32
    decoder: int = 0  # which ensemble member decodes the hypotheses

    def validate(self) -> None:
        if self.measure not in MEASURES:
            raise ConfigError(f"measure must be one of {', '.join(MEASURES)}, got {self.measure!r}")
        if self.sample > self.window:
            raise ConfigError(f"sample ({self.sample}) cannot exceed window ({self.window})")
        if self.drop_top + self.window > self.candidates:
            raise ConfigError(
                f"drop_top + window ({self.drop_top} + {self.window}) exceeds candidates ({self.candidates})"
            )


UNCERTAINTY_HEADER = ["index", "n_rows", *MEASURES, "source", "hypothesis"]


def write_uncertainty_tsv(
    path: str | os.PathLike | None, result: UncertaintyResult, outputs: Outputs = UNCHECKED
) -> None:
    """One row per example in input order; `index` is 0-based."""
    rows = (
        [
            i,
            int(result.n_rows[i]),
            *(float(result.measures[m][i]) for m in MEASURES),
            result.sources[i],
            result.hypotheses[i],
        ]
        for i in range(len(result))
    )
    write_tsv(path, UNCERTAINTY_HEADER, rows, outputs)


def read_uncertainty_tsv(path: str | os.PathLike) -> UncertaintyResult:
    header, rows = read_tsv(path)
    measures = {m: np.asarray([parse_float(v) for v in column(header, rows, m, path)]) for m in MEASURES}
    return UncertaintyResult(
        column(header, rows, "source", path),
        column(header, rows, "hypothesis", path),
        np.asarray([int(v) for v in column(header, rows, "n_rows", path)], dtype=np.int64),
        measures,
    )


DEGREE_HEADER = ["line", "length", "n_oov", "cover_size", "degree"]


def degree_rows(result: DegreeResult, sentences: Sequence[str], explain: bool = False):
    """Rows of the degree TSV: 1-based pool line, counts, degree (blank when unscored), [cover], sentence."""
    lengths, n_oov, sizes, degree = (
        a.tolist() for a in (result.lengths, result.n_oov, result.cover_size, result.degree)
    )
    for i, sentence in enumerate(sentences):
        row = [i + 1, lengths[i], n_oov[i], sizes[i] if sizes[i] >= 0 else "", degree[i]]
        if explain:
            cover = result.covers[i]
            row.append(cover.render(sentence.split()) if cover.size >= 0 else "")
        row.append(sentence)
        yield row


def write_degree_tsv(
    path, result: DegreeResult, sentences: Sequence[str], explain: bool = False, outputs: Outputs = UNCHECKED
) -> None:
    header = DEGREE_HEADER + (["cover"] if explain else []) + ["sentence"]
    write_tsv(path, header, degree_rows(result, sentences, explain), outputs)


@dataclass
class DegreeTable:
    """A degree TSV read back: 1-based pool lines, degree (NaN when unscored), lengths, sentences."""

    lines: np.ndarray
    degree: np.ndarray
    lengths: np.ndarray
    sentences: list[str]


def read_degree_tsv(path: str | os.PathLike) -> DegreeTable:
    header, rows = read_tsv(path)
    return DegreeTable(
        np.asarray([int(v) for v in column(header, rows, "line", path)], dtype=np.int64),
        np.asarray([parse_float(v) for v in column(header, rows, "degree", path)], dtype=np.float64),
        np.asarray([int(v) for v in column(header, rows, "length", path)], dtype=np.int64),
        column(header, rows, "sentence", path),
    )


def build_benchmark(
    train: Sequence[str],
    pool: Sequence[str],
    out_dir: str | os.PathLike,
    *,
    config: BuildConfig | None = None,
    runs: Sequence[EnsembleMember] | None = None,
    uncertainty: UncertaintyResult | None = None,
    pool_targets: Sequence[str] | None = None,
    progress: ProgressFactory | None = None,
    overwrite: bool = False,
    inputs: Sequence[str | os.PathLike] = (),
) -> dict:
    """Run the pipeline and write the test set plus a JSON report into `out_dir`; returns the report.

    Uncertainty comes from `runs` (decoded here) or from a precomputed `uncertainty` over the candidates
    in order (as `compose uncertainty --pool OUT/candidates.txt` writes it). With neither, the build stops
    after writing the candidates, so the expensive decoding can run elsewhere.

    Files: candidates.txt / candidates.tsv (top-K by degree), uncertainty.tsv, test.src (selected
    sentences in pool order), test.ref (their `pool_targets`, when given), selected.tsv, report.json. Each is
    written atomically; before anything is computed, every file the build will write is checked
    (`structseq.outputs.Outputs`): none may be one of `inputs` (the files the sentences came from), nor an
    existing file the toolkit did not write unless `overwrite` (a rebuild over its own files needs no flag).
    """
    config = config or BuildConfig()
    config.validate()
    if pool_targets is not None and len(pool_targets) != len(pool):
        raise DataError(f"pool has {len(pool)} sentences but its targets have {len(pool_targets)}")
    if runs is not None and uncertainty is not None:
        raise ConfigError("give either ensemble runs or a precomputed uncertainty table, not both")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out}: is a file; the build writes a folder of files: choose another --out-dir")
    outputs = Outputs(inputs, overwrite=overwrite)
    for name in build_files(runs is not None, uncertainty is not None, pool_targets is not None):
        outputs.check(out / name)
    report: dict = {"config": asdict(config), "timings_s": {}}
    degrees, candidates = _degree_phase(train, pool, config, report, progress)
    candidate_text = [pool[i] for i in candidates.tolist()]
    outputs.write(out / "candidates.txt", "".join(s + "\n" for s in candidate_text))
    after_candidates(out, pool, pool_targets, degrees, candidates, runs, uncertainty, config, report, outputs, progress)
    _write_report(out, report, outputs)
    return report


def after_candidates(out, pool, targets, degrees, candidates, runs, uncertainty, config, report, outputs, progress):
    """Uncertainty of the candidates, candidates.tsv, then the selection (when scored); `pool`, `targets` and
    `degrees` need only be indexable at the candidates' pool indices (the sharded path holds no more)."""
    candidate_text = [pool[i] for i in candidates.tolist()]
    uncertainty = _uncertainty_phase(runs, uncertainty, candidate_text, config, report, progress)
    if runs is not None:
        write_uncertainty_tsv(out / "uncertainty.tsv", uncertainty, outputs)
    _write_candidates(out / "candidates.tsv", pool, degrees, candidates, uncertainty, outputs)
    if uncertainty is None:
        report["stopped"] = "no ensemble or uncertainty table: candidates written, nothing selected"
    else:
        report["selection"] = _selection_phase(out, pool, targets, degrees, candidates, uncertainty, config, outputs)


def build_files(decodes: bool, scored: bool, targets: bool) -> list[str]:
    """The files a build writes: with an ensemble to decode (`decodes`), or a precomputed table (`scored`), it
    selects; `targets`: references of the pool were given."""
    names = ["candidates.txt", "candidates.tsv"] + (["uncertainty.tsv"] if decodes else [])
    if decodes or scored:
        names += ["test.src"] + (["test.ref"] if targets else []) + ["selected.tsv"]
    return names + ["report.json"]


def _degree_phase(train, pool, config: BuildConfig, report: dict, progress) -> tuple[DegreeResult, np.ndarray]:
    """The n-gram dictionary of `train`, the degree of every pool sentence and the top-K distinct candidates
    (pool indices, best first); fills the report's train, pool and candidates sections."""
    timings = report["timings_s"]
    clock = time.perf_counter()
    dictionary = NgramDictionary.from_corpus(
        train, min_count=config.min_count, atom_threshold=config.atom_threshold, max_n=config.max_n
    )
    timings["dictionary"] = time.perf_counter() - clock
    report["train"] = {"sentences": len(train), "vocabulary": len(dictionary.vocab), "atoms_per_n": dictionary.sizes()}
    if dictionary.cut:
        report["train"]["cut_at_max_n"] = dictionary.cut

    clock = time.perf_counter()
    callback = progress("compositional degree", len(pool)) if progress else None
    degrees = score_pool(dictionary, pool, progress=callback)
    timings["degree"] = time.perf_counter() - clock
    candidates = top_k_unique(
        degrees.degree, pool, config.candidates, seed=config.seed, lengths=degrees.lengths, min_length=config.min_length
    )
    report["pool"] = {
        "sentences": len(pool),
        "in_vocabulary": int(degrees.in_vocab.sum()),
        "with_oov": int((degrees.n_oov > 0).sum()),
        "empty": int((degrees.lengths == 0).sum()),
        "degree": _summary(degrees.degree),
    }
    if warning := pool_warning(report["pool"], config.min_count):
        warnings.warn(warning, stacklevel=3)
    report["candidates"] = {"count": int(len(candidates)), "degree": _summary(degrees.degree[candidates])}
    return degrees, candidates


def _uncertainty_phase(
    runs, uncertainty: UncertaintyResult | None, candidate_text: list[str], config: BuildConfig, report: dict, progress
) -> UncertaintyResult | None:
    """The candidates' uncertainty: decoded by the ensemble `runs`, or the precomputed table checked to score
    exactly the candidates in order; None with neither."""
    if runs is not None:
        clock = time.perf_counter()
        callback = progress("ensemble uncertainty", len(candidate_text)) if progress else None
        uncertainty = score_ensemble(
            runs,
            candidate_text,
            beam=config.beam,
            batch_size=config.batch_size,
            decoder=config.decoder,
            progress=callback,
        )
        report["timings_s"]["uncertainty"] = time.perf_counter() - clock
        report["ensemble_size"] = len(runs)
    elif uncertainty is not None:
        if len(uncertainty) != len(candidate_text) or any(
            _normalise(a) != _normalise(b) for a, b in zip(uncertainty.sources, candidate_text)
        ):
            raise DataError(
                f"the uncertainty table ({len(uncertainty)} rows) does not score the {len(candidate_text)} candidates "
                "in order; compute it on candidates.txt of this build"
            )
    return uncertainty


def _write_candidates(
    path: Path,
    pool,
    degrees: DegreeResult,
    candidates: np.ndarray,
    uncertainty: UncertaintyResult | None,
    outputs: Outputs,
) -> None:
    """candidates.tsv: rank, pool line, length, cover size, degree, [each uncertainty measure], sentence."""

    def candidate_rows():
        for rank, i in enumerate(candidates.tolist()):
            row = [rank, i + 1, int(degrees.lengths[i]), int(degrees.cover_size[i]), float(degrees.degree[i])]
            if uncertainty is not None:
                row += [float(uncertainty.measures[m][rank]) for m in MEASURES]
            yield row + [pool[i]]

    extra = list(MEASURES) if uncertainty is not None else []
    write_tsv(path, ["rank", "line", "length", "cover_size", "degree", *extra, "sentence"], candidate_rows(), outputs)


def _selection_phase(
    out: Path,
    pool,
    pool_targets,
    degrees: DegreeResult,
    candidates: np.ndarray,
    uncertainty: UncertaintyResult,
    config: BuildConfig,
    outputs: Outputs,
) -> dict:
    """Drop the most uncertain, sample from the window, write test.src (test.ref) and selected.tsv; returns the
    report's selection section."""
    scores = uncertainty.measures[config.measure]
    selection = select_uncertain(
        scores, drop_top=config.drop_top, window=config.window, sample=config.sample, seed=config.seed
    )
    chosen = candidates[selection.selected]  # pool indices of the selected candidates
    order = np.argsort(chosen, kind="stable")
    chosen, chosen_rank = chosen[order], selection.selected[order]
    outputs.write(out / "test.src", "".join(pool[i] + "\n" for i in chosen.tolist()))
    if pool_targets is not None:
        outputs.write(out / "test.ref", "".join(pool_targets[i] + "\n" for i in chosen.tolist()))
    position = np.empty(len(scores), dtype=np.int64)
    position[selection.ranking] = np.arange(len(scores))
    write_tsv(
        out / "selected.tsv",
        ["line", "degree", "uncertainty_rank", *MEASURES, "hypothesis", "sentence"],
        (
            [
                p + 1,
                float(degrees.degree[p]),
                int(position[c]),
                *(float(uncertainty.measures[m][c]) for m in MEASURES),
                uncertainty.hypotheses[c],
                pool[p],
            ]
            for p, c in zip(chosen.tolist(), chosen_rank.tolist())
        ),
        outputs,
    )
    dropped_scores = scores[selection.dropped]
    return {
        "measure": config.measure,
        "scored": int(len(scores)),
        "dropped": int(len(selection.dropped)),
        "dropped_min_score": float(dropped_scores.min()) if len(dropped_scores) else math.nan,
        "window": int(len(selection.window)),
        "window_score_range": [float(scores[selection.window].min()), float(scores[selection.window].max())]
        if len(selection.window)
        else [],
        "selected": int(len(chosen)),
        "selected_degree": _summary(degrees.degree[chosen]),
        "selected_uncertainty": _summary(scores[chosen_rank]),
        "selected_lines": (chosen + 1).tolist(),
    }


def _write_report(out: Path, report: dict, outputs: Outputs) -> None:
    def clean(value):
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    outputs.write(out / "report.json", json.dumps(clean(report), indent=2) + "\n")
