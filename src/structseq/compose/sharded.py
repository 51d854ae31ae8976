"""`build_benchmark` out of core: the ReaCT pipeline as stages over Parquet shards, local processes or Ray.

Same answers as the in-memory path (tested at 1, 2 and 8 shards and on Ray): the atom dictionary is the same
set (only the ids differ), degrees are computed by the same `score_pool`, and the top-K merge is exact: a
sentence in the global top-K distinct is in its own shard's top-K distinct (fewer than K distinct sentences rank
above it in the whole pool, so fewer in its shard), and each shard draws the tie-breaks the in-memory generator
draws for its sentences (PCG64 advanced past the earlier shards' eligible sentences). The K candidates, the
uncertainty and the selection are small and reuse `select`'s functions and files unchanged.

The work folder (`--work-dir`, default OUT/work) holds one subfolder per build (a digest of the inputs' names,
sizes and times, the settings and the shard count): rerunning the same command resumes from the finished
tasks; a changed input or setting starts a new subfolder and never reuses stale shards.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from structseq.compose import stages
from structseq.compose.corpus import check_max_length
from structseq.compose.degree import cut_warning
from structseq.compose.engines import InlineEngine, LocalEngine, peak_rss_mib
from structseq.compose.preflight import build_lock, check_writable, memory_limit_bytes, remove_leftovers
from structseq.compose.select import (
    BuildConfig,
    _write_report,
    after_candidates,
    build_files,
    first_distinct,
    write_uncertainty_tsv,
)
from structseq.compose.shards import piece_dict, plan, read_parquet, read_piece, write_parquet
from structseq.compose.summary import exact_sum, median_of_middle, pool_warning, summarize
from structseq.errors import ConfigError, DataError
from structseq.outputs import OutputError, Outputs, atomic_write

#: candidates per uncertainty task, in batches (a whole number: every batch is the in-memory path's)
CHUNK_BATCHES = 64

#: (stage, total tasks) -> callback(finished task record); what the CLI turns into bars or lines
StageProgress = Callable[[str, int], Callable[[dict], None]]


class Sparse:
    """Values at some corpus indices, indexed by those indices like the full array would be (an int or an array)."""

    def __init__(self, index: np.ndarray, values):
        order = np.argsort(index, kind="stable")
        self.index = np.asarray(index)[order]
        self.values = np.asarray(values, dtype=object if isinstance(values, list) else None)[order]

    def __getitem__(self, key):
        position = np.searchsorted(self.index, key)
        if np.any(self.index[np.minimum(position, len(self.index) - 1)] != key):
            raise KeyError(key)
        return self.values[position]


def make_engine(name: str, workers: int, address: str | None = None):
    """`local` (a process pool), `inline` (this process), or `ray` (the `scale` extra: pip install structseq[scale])."""
    if name == "local":
        return LocalEngine(workers)
    if name == "inline":
        return InlineEngine()
    if name == "ray":
        from structseq.compose.engine_ray import RayEngine

        return RayEngine(workers, address)
    raise ConfigError(f"engine must be local, inline or ray, got {name!r}")


def work_folder(root: Path, train: Sequence[Path], pool: Path, config: BuildConfig, shards: int, max_length) -> Path:
    """The build's own subfolder of `root`: a digest of what its shards depend on."""
    inputs = []
    for path in [*train, pool]:
        stat = Path(path).stat()
        inputs.append([str(Path(path).resolve()), stat.st_size, stat.st_mtime_ns])
    keys = {k: getattr(config, k) for k in ("min_count", "atom_threshold", "max_n", "min_length", "candidates", "seed")}
    digest = hashlib.sha256(json.dumps([inputs, keys, shards, max_length]).encode()).hexdigest()[:16]
    return root / f"build-{digest}"


class _Runner:
    """Runs stages on an engine, skipping finished tasks, timing each stage and keeping its records."""

    def __init__(self, engine, progress: StageProgress | None, log: Callable[[str], None]):
        self.engine, self.progress, self.log = engine, progress, log
        self.stages: dict[str, dict] = {}

    def run(self, stage: str, fn, tasks: list[tuple], resources: dict | None = None, done=None) -> list[dict]:
        """`done(args)`, when given, runs once a task's record exists (resumed ones too): it may delete what only
        that task read, so a stage's inputs and outputs are not on disk in full at once."""
        clock = time.perf_counter()
        records: list[dict | None] = [None] * len(tasks)
        resumed = 0
        todo = []
        for i, args in enumerate(tasks):
            # a finished task returns its record at once; asking the engine only for the rest keeps a resume cheap
            record = stages.done(fn.marker(*args))
            if record is not None:
                records[i], resumed = record, resumed + 1
                if done:
                    done(args)
            else:
                todo.append(i)
        advance = self.progress(stage, len(tasks)) if self.progress else None
        if advance is not None and resumed:
            for i in range(len(tasks)):
                if records[i] is not None:
                    advance(records[i])
        for j, record in self.engine.map(fn, [tasks[i] for i in todo], resources):
            records[todo[j]] = record
            if done:
                done(tasks[todo[j]])
            if advance is not None:
                advance(record)
        seconds = time.perf_counter() - clock
        peaks = [r.get("peak_rss_mib", 0.0) for r in records if r]
        self.stages[stage] = {
            "tasks": len(tasks),
            "resumed": resumed,
            "seconds": round(seconds, 3),
            "cpu_seconds": round(sum(records[i].get("cpu_seconds", 0.0) for i in todo), 3),
            "task_peak_rss_mib": max(peaks, default=0.0),
        }
        self.log(f"{stage}: {len(tasks)} task(s), {resumed} resumed, {seconds:.1f}s")
        return records


def ingest_pool(runner: _Runner, work: Path, pieces: list, pool: Path, **opts) -> None:
    """Pool side first (bytes, over-long lines and an all-blank pool are found before the training side runs)."""
    records = runner.run(
        "pool ingest",
        stages.ingest_pool,
        [(str(work), s, piece_dict(p), opts["column"], opts["max_length"]) for s, p in enumerate(pieces)],
    )
    if not sum(r.get("nonblank", r["sentences"]) for r in records):
        raise DataError("the pool holds no sentences (empty or blank lines only)", pool)


def build_dictionary(runner: _Runner, work: Path, train: Sequence[Path], config: BuildConfig, pieces: list, **opts):
    """Training side: ingest, vocabulary, encode, then one count + merge per n-gram length. Returns (levels, report)."""
    w = str(work)
    records = runner.run(
        "train ingest",
        stages.ingest_train,
        [(w, s, piece_dict(p), opts["column"], opts["max_length"]) for s, p in enumerate(pieces)],
    )
    if not sum(r["tokens"] for r in records):
        names = ", ".join(map(str, train))
        raise DataError("the training corpus holds no sentences (empty or blank lines only)", names)
    vocab = runner.run(
        "vocabulary", stages.merge_words, [(w, len(pieces), config.min_count, opts["memory_limit"], opts["threads"])]
    )
    # a shard's local ids and words are read by its own encoding only (the vocabulary merge is done); its
    # level n-1 candidates by its own level n count only: deleted as each task ends, the records stay
    runner.run("train encode", stages.encode_train, [(w, s) for s in range(len(pieces))],
               done=lambda args: _drop(work, f"train/local-{args[1]}.npz", f"train/words-{args[1]}.parquet"))  # fmt: skip
    atoms_per_n = {1: vocab[0]["vocabulary"]}
    n, cut = 2, 0
    while True:
        counted = runner.run(
            f"count n={n}", stages.count_level, [(w, s, n, config.atom_threshold) for s in range(len(pieces))],
            done=lambda args: _drop(work, f"levels/cand-{args[2] - 1}-{args[1]}.npz"),
        )  # fmt: skip
        if not sum(r["candidates"] for r in counted):
            break
        merged = runner.run(
            f"atoms n={n}",
            stages.merge_level,
            [(w, len(pieces), n, config.atom_threshold, opts["memory_limit"], opts["threads"])],
        )
        if not merged[0]["atoms"]:
            break
        if config.max_n is not None and n > config.max_n:  # one level past the bound, counted to say what it cut
            cut = merged[0]["atoms"]
            warnings.warn(cut_warning(cut, config.max_n, config.atom_threshold), stacklevel=3)
            break
        atoms_per_n[n] = merged[0]["atoms"]
        # level n is final: its counts and the candidates of n-1 are read by no later task (their records stay)
        for path in [*work.glob(f"levels/counts-{n}-*.parquet"), *work.glob(f"levels/cand-{n - 1}-*.npz")]:
            path.unlink()
        n += 1
    _drop(work, "levels/cand-*.npz", "levels/counts-*.parquet", "train/encoded-*.npz")  # the atoms are what stays
    skipped = [line for r in records for line in r["skipped"]]
    train_report = {
        "sentences": sum(r["sentences"] for r in records),
        "vocabulary": vocab[0]["vocabulary"],
        "atoms_per_n": atoms_per_n,
    }
    if cut:
        train_report["cut_at_max_n"] = cut
    read = {"train_files": len(train), "train_shards": len(pieces), "train_tokens": sum(r["tokens"] for r in records)}
    return max(atoms_per_n), train_report, read, skipped


def _drop(work: Path, *patterns: str) -> None:
    """Delete bulky intermediate files once no later task reads them: at 10^8 sentences the word ids and each
    level's candidate positions are tens of GB. A task's record (its JSON) stays, so a resumed build skips it."""
    for pattern in patterns:
        for path in work.glob(pattern):
            path.unlink()


def score_and_rank(runner: _Runner, work: Path, pieces: list, config: BuildConfig, levels: int):
    """Pool side: degree per shard, each shard's top-K, the exact merge. Returns (candidates, texts, rows)."""
    w = str(work)
    knobs = {
        k: getattr(config, k) for k in ("min_count", "atom_threshold", "max_n", "min_length", "candidates", "seed")
    }
    degrees = runner.run("degree", stages.degree_shard, [(w, s, levels, knobs) for s in range(len(pieces))])
    offsets = np.concatenate([[0], np.cumsum([r["eligible"] for r in degrees])]).tolist()
    runner.run("top-K", stages.top_shard, [(w, s, offsets[s], knobs) for s in range(len(pieces))])
    keys = ("index", "degree", "tie", "length", "cover_size")
    rows: dict | None = None
    texts: list[str] = []
    for s in range(len(pieces)):  # a running top-K: never more than 2K candidates held, however many shards
        table = read_parquet(work / "pool" / f"top-{s}.parquet")
        merged = {k: np.asarray(table[k]) if rows is None else np.concatenate([rows[k], table[k]]) for k in keys}
        sentences = texts + table["sentence"]
        order = np.lexsort((merged["index"], merged["tie"], -merged["degree"]))
        chosen = first_distinct(order.tolist(), sentences, config.candidates)
        rows, texts = {k: v[chosen] for k, v in merged.items()}, [sentences[i] for i in chosen.tolist()]
    return rows, texts


def build_sharded(
    train: Sequence[str | os.PathLike],
    pool: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    config: BuildConfig | None = None,
    shards: int = 8,
    engine: str = "local",
    workers: int | None = None,
    address: str | None = None,
    memory_limit: str = "4GB",
    work_dir: str | os.PathLike | None = None,
    column: int | None = None,
    max_length: int | None = None,
    runs=None,
    ensemble: Sequence[str | os.PathLike] | None = None,
    gpus: float = 0,
    uncertainty=None,
    pool_target: str | os.PathLike | None = None,
    progress: StageProgress | None = None,
    log: Callable[[str], None] = lambda line: None,
    overwrite: bool = False,
    inputs: Sequence[object] = (),
    keep_work: bool = True,
) -> dict:
    """`build_benchmark` over files too large for memory; writes the same files (plus the work folder, which
    `keep_work=False` deletes once the build has succeeded).

    `memory_limit` bounds DuckDB's group-bys (they spill beyond it); each worker holds one shard at a time, so
    the total is about memory_limit + workers x (a shard's memory): pick `shards` so a shard is small.
    `max_length` (tokens): a longer training line is skipped and named in the report, a longer pool line is an
    error naming file:line (the rules of training and of evaluation). `ensemble` (run directories) scores the
    candidates in chunks on the engine, each task loading the ensemble (`gpus` per task on Ray); `runs` (loaded
    members) score them here.
    """
    config = config or BuildConfig()
    train, pool, out = [Path(p) for p in train], Path(pool), Path(out_dir)
    _check_settings(config, (runs, ensemble, uncertainty), out, memory_limit, engine, max_length)
    outputs = Outputs([*train, pool, pool_target, *inputs], overwrite=overwrite)
    names = build_files(runs is not None or bool(ensemble), uncertainty is not None, pool_target is not None)
    for name in names:
        outputs.check(out / name)
    # every cheap check before the first stage: the plans count the lines, so the targets' length is known now
    pool_pieces, train_pieces = plan([pool], shards), plan(list(train), shards)
    pool_sentences = sum(p.lines for p in pool_pieces)
    if pool_target is not None:
        _check_targets(Path(pool_target), pool_sentences)
    workers = workers or min(os.cpu_count() or 1, shards)
    work = work_folder(Path(work_dir) if work_dir else out / "work", train, pool, config, shards, max_length)
    check_writable(out, "build's files")
    check_writable(work, "work files")
    with build_lock(out, work):
        stages.forget()
        if removed := remove_leftovers(work, out, names):
            log(f"removed {removed} temporary file(s) that a killed build left in {work} and {out}")
        opts = {"column": column, "max_length": max_length, "memory_limit": memory_limit, "threads": workers}
        runner = _Runner(make_engine(engine, workers, address), progress, log)
        clock = time.perf_counter()
        try:
            ingest_pool(runner, work, pool_pieces, pool, **opts)
            levels, train_report, read, skipped = build_dictionary(runner, work, train, config, train_pieces, **opts)
            rows, texts = score_and_rank(runner, work, pool_pieces, config, levels)
            pool_report = _pool_report(work, memory_limit, workers, len(pool_pieces))
            if warning := pool_warning(pool_report, config.min_count):
                warnings.warn(warning, stacklevel=2)
        finally:
            runner.engine.close()
        report: dict = {"config": asdict(config), "timings_s": {"degree_phase": round(time.perf_counter() - clock, 3)}}
        report["train"], report["pool"] = train_report, pool_report
        report["candidates"] = {"count": int(len(texts)), "degree": summarize(rows["degree"])}
        outputs.write(out / "candidates.txt", "".join(s + "\n" for s in texts))
        candidates = rows["index"]
        pool_view = Sparse(candidates, texts)
        degrees = SimpleNamespace(
            lengths=Sparse(candidates, rows["length"]),
            cover_size=Sparse(candidates, rows["cover_size"]),
            degree=Sparse(candidates, rows["degree"]),
        )
        if ensemble:
            uncertainty = score_candidates(runner, work, texts, [str(p) for p in ensemble], config, gpus)
            report["timings_s"]["uncertainty"] = runner.stages["uncertainty"]["seconds"]
            report["ensemble_size"] = len(ensemble)
            write_uncertainty_tsv(out / "uncertainty.tsv", uncertainty, outputs)
        targets = _targets_at(pool_target, candidates) if pool_target is not None else None
        after_candidates(out, pool_view, targets, degrees, candidates, runs, uncertainty, config, report, outputs, None)
        report["sharded"] = {
            "engine": runner.engine.name,
            "workers": runner.engine.workers,
            "shards": {"train": read["train_shards"], "pool": len(pool_pieces)},
            "memory_limit": memory_limit,
            "work_dir": str(work),
            "read": {**read, "pool_sentences": pool_sentences},
            "skipped": {"count": len(skipped), "lines": skipped[:100]},
            "stages": runner.stages,
            "peak_rss_mib_main": peak_rss_mib(),
        }
        if not keep_work:
            report["sharded"]["work_removed"] = True
        _write_report(out, report, outputs)
        atomic_write(work / "summary.json", json.dumps(report["sharded"], indent=1) + "\n")
    if not keep_work:  # the lock released: nothing of this build is left to resume
        shutil.rmtree(work)
        with contextlib.suppress(OSError):
            work.parent.rmdir()  # the work root, when no other build's folder is in it
    return report


def _check_settings(config: BuildConfig, scorers: tuple, out: Path, memory_limit: str, engine: str, max_length):
    """Every setting, before any file is read: the knobs, the extra's libraries, the output folder's kind."""
    config.validate()
    if sum(x is not None and x != [] for x in scorers) > 1:
        raise ConfigError("give one of ensemble runs, ensemble run directories or an uncertainty table")
    try:
        import duckdb  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError as error:
        raise ConfigError(
            f"--shards needs DuckDB and Arrow ({error.name} is missing): pip install 'structseq[sharded]'"
        ) from None
    if out.exists() and not out.is_dir():
        raise OutputError(f"{out}: is a file; the build writes a folder of files: choose another --out-dir")
    memory_limit_bytes(memory_limit, engine)
    check_max_length(max_length)


def _pool_report(work: Path, memory_limit: str, threads: int, shards: int) -> dict:
    """The pool section of report.json, equal to the in-memory one (`summary`): counts, min, max and the middle
    values by DuckDB, the mean from each shard's exact sum."""
    paths = [work / "pool" / f"degree-{s}.parquet" for s in range(shards)]
    con = stages.ngrams_duckdb.connect(memory_limit, work / "spill", threads)
    try:
        report, middle = stages.ngrams_duckdb.pool_summary(con, paths)
    finally:
        con.close()
    degree = report["degree"]
    if degree["count"]:
        total = sum(exact_sum(_finite(read_parquet(p, ["degree"])["degree"])) for p in paths)
        mean, median = float(total / degree["count"]), median_of_middle(middle, degree["count"])
        report["degree"] = {"count": degree["count"], "mean": mean, "min": degree["min"], "median": median,
                            "max": degree["max"]}  # fmt: skip
    return report


def _finite(values) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    return values[np.isfinite(values)]


def _check_targets(path: Path, expected: int) -> None:
    """--pool-target has one line per pool line: counted (a newline count) before any stage runs."""
    lines = sum(p.lines for p in plan([path], 1))
    if lines != expected:
        raise DataError(f"pool has {expected} sentences but its targets have {lines}", path)


def score_candidates(
    runner: _Runner, work: Path, texts: list[str], run_dirs: list[str], config: BuildConfig, gpus: float
):
    """The candidates' uncertainty in chunks over the engine (each a whole number of batches), concatenated."""
    from structseq.compose.uncertainty import MEASURES, UncertaintyResult

    write_parquet(work / "candidates.parquet", {"sentence": texts})
    size = config.batch_size * CHUNK_BATCHES
    bounds = [(b, min(b + size, len(texts))) for b in range(0, len(texts), size)]
    options = {"beam": config.beam, "batch_size": config.batch_size, "decoder": config.decoder}
    tasks = [(str(work), c, b, e, tuple(run_dirs), options) for c, (b, e) in enumerate(bounds)]
    resources = {"num_cpus": 1, "num_gpus": gpus} if gpus else None
    runner.run("uncertainty", stages.uncertainty_chunk, tasks, resources)
    parts = [read_parquet(work / "uncertainty" / f"chunk-{c}.parquet") for c in range(len(bounds))]
    return UncertaintyResult(
        texts,
        [h for p in parts for h in p["hypothesis"]],
        np.concatenate([p["n_rows"] for p in parts]).astype(np.int64) if parts else np.zeros(0, np.int64),
        {m: np.concatenate([p[m] for p in parts]).astype(np.float64) if parts else np.zeros(0) for m in MEASURES},
    )


def _targets_at(path, candidates: np.ndarray) -> Sparse:
    """The pool's references at the candidates' indices, read a piece (about 64 MB) at a time (their number of
    lines was checked before the first stage: `_check_targets`)."""
    pieces = plan([path], max(1, Path(path).stat().st_size >> 26))
    wanted = set(candidates.tolist())
    found: dict[int, str] = {}
    for piece in pieces:
        lines, _ = read_piece(piece)
        found.update((piece.first_index + i, s) for i, s in enumerate(lines) if piece.first_index + i in wanted)
    index = np.asarray(sorted(found), dtype=np.int64)
    return Sparse(index, [found[i] for i in index.tolist()])
