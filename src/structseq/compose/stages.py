"""The sharded pipeline's stage functions: each a pure function of files in the work folder to new files there.

Every task writes its outputs atomically and its record (the `.json` marker) last, and returns that record; a
task whose record exists is finished, so a stage killed mid-way resumes from its finished shards. Tasks take
only paths and numbers, so the local process pool and Ray run the same functions.

Training side: `ingest_train` (text -> local word ids and counts) -> `merge_words` (DuckDB) ->
`encode_train` (global ids) -> for n = 2, 3, ...: `count_level` (candidate n-grams whose prefix and suffix are
atoms, counted per shard) -> `merge_level` (DuckDB: the atoms of length n). Pool side: `ingest_pool` ->
`degree_shard` -> `top_shard` (each shard's top-K distinct candidates; the merge is exact, see `sharded`).
"""

from __future__ import annotations

import functools
import time
from array import array
from collections.abc import Callable
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np

from structseq.compose import ngrams_duckdb
from structseq.compose.degree import Encoded, NgramDictionary, score_pool
from structseq.compose.engines import cpu_seconds, peak_rss_mib
from structseq.compose.preflight import damaged
from structseq.compose.select import first_distinct
from structseq.compose.shards import (
    Piece,
    done,
    finish,
    load_arrays,
    load_keys,
    read_parquet,
    read_piece,
    save_arrays,
    write_parquet,
)


def stage(marker: Callable[..., str]):
    """Make `fn(work, *args) -> fields` a resumable task: finished when its record, at `work / marker(*args)`,
    exists (then that record is returned without running); otherwise it runs and its fields, wall and CPU time
    (all the process's threads: DuckDB's too) and peak memory become the record, written last. `task.marker(work, *args)` is that path."""

    def wrap(fn):
        @functools.wraps(fn)
        def task(work: str, *args) -> dict:
            path = Path(work) / marker(*args)
            if (record := done(path)) is not None:
                return record
            clock, cpu = time.perf_counter(), cpu_seconds()
            fields = fn(Path(work), *args)
            seconds, cpu = round(time.perf_counter() - clock, 3), round(cpu_seconds() - cpu, 3)
            return finish(path, {**fields, "seconds": seconds, "cpu_seconds": cpu, "peak_rss_mib": peak_rss_mib()})

        task.marker = lambda work, *args: Path(work) / marker(*args)
        return task

    return wrap


@stage(lambda shard, *_: f"train/ingest-{shard}.json")
def ingest_train(work: Path, shard: int, piece: dict, column, max_length) -> dict:
    """Read a training piece (over-long lines skipped and named: the training rule) into local word ids."""
    sentences, skipped = read_piece(Piece(**piece), column, max_length, skip_long=True)
    local: dict[str, int] = {}
    setdefault = local.setdefault
    flat, lengths = array("i"), array("q", [0])
    for sentence in sentences:
        tokens = sentence.split()
        flat.extend([setdefault(word, len(local)) for word in tokens])
        lengths.append(len(tokens))
    ids = np.frombuffer(flat, dtype=np.int32)
    counts = np.bincount(ids, minlength=len(local)).astype(np.int64)
    write_parquet(work / "train" / f"words-{shard}.parquet", {"word": list(local), "count": counts})
    save_arrays(work / "train" / f"local-{shard}.npz", ids=ids, offsets=np.cumsum(np.frombuffer(lengths, np.int64)))
    return dict(sentences=len(sentences), tokens=int(len(ids)), skipped=skipped)


@contextmanager
def _merging(work: Path):
    """A DuckDB merge over the shards' counts: a count file it cannot read (truncated, deleted) is one line."""
    import duckdb

    try:
        yield
    except duckdb.IOException as error:
        raise damaged(work / "train", error) from None
    except duckdb.InvalidInputException as error:
        raise damaged(work / "levels", error) from None


@stage(lambda *_: "vocab.json")
def merge_words(work: Path, shards: int, min_count: int, memory_limit: str, threads: int) -> dict:
    """The vocabulary: words seen at least `min_count` times in the whole training side (DuckDB)."""
    con = ngrams_duckdb.connect(memory_limit, work / "spill", threads)
    paths = [work / "train" / f"words-{s}.parquet" for s in range(shards)]
    with _merging(work):
        size = ngrams_duckdb.merge_words(con, paths, min_count, work / "vocab.parquet")
    con.close()
    return dict(vocabulary=int(size))


@lru_cache(maxsize=2)
def _vocabulary(work: str) -> tuple[list[str], np.ndarray, dict[str, int]]:
    table = read_parquet(Path(work) / "vocab.parquet", ["word", "count"])
    words = table["word"]
    return words, np.asarray(table["count"], np.int64), {w: i for i, w in enumerate(words)}


def forget() -> None:
    """Drop what this process cached of work folders (a new build reads them again: one may have changed)."""
    _vocabulary.cache_clear()
    _ensemble.cache_clear()


@stage(lambda shard: f"train/encoded-{shard}.json")
def encode_train(work: Path, shard: int) -> dict:
    """Local ids -> global vocabulary ids (-1: OOV), a gather per shard."""
    local = load_arrays(work / "train" / f"local-{shard}.npz")
    words = read_parquet(work / "train" / f"words-{shard}.parquet", ["word"])["word"]
    vocab = _vocabulary(str(work))[2]
    mapping = np.asarray([vocab.get(w, -1) for w in words] or [-1], dtype=np.int32)
    ids = mapping[local["ids"]] if len(local["ids"]) else local["ids"]
    save_arrays(work / "train" / f"encoded-{shard}.npz", ids=ids, offsets=local["offsets"])
    return dict(tokens=int(len(ids)))


@stage(lambda shard, n, _threshold: f"levels/cand-{n}-{shard}.json")
def count_level(work: Path, shard: int, n: int, atom_threshold: int) -> dict:
    """Candidate n-grams of a shard (as `NgramDictionary._grow`: the (n-1)-prefix is an atom, and so is the
    (n-1)-suffix) with their counts in this shard; the candidates' positions are kept for level n+1."""
    encoded = load_arrays(work / "train" / f"encoded-{shard}.npz")
    corpus = Encoded(encoded["ids"], encoded["offsets"])
    ids = corpus.ids
    words, counts, _ = _vocabulary(str(work))
    radix = max(len(words), 1)
    if n == 2:
        extendable = counts > atom_threshold
        positions = np.flatnonzero(ids >= 0)
        positions = positions[extendable[ids[positions]]]
        prefix = ids[positions].astype(np.int64)
    else:
        previous = load_arrays(work / "levels" / f"cand-{n - 1}-{shard}.npz")
        atoms = load_keys(work / "levels" / f"atoms-{n - 1}.npy")
        positions, prefix = _atoms_at(previous["positions"], previous["keys"], atoms)
    level_id = np.full(len(ids), -1, dtype=np.int64)
    level_id[positions] = prefix
    keep = corpus.remaining()[positions] >= n if len(ids) else np.zeros(0, bool)
    keep[keep] = level_id[positions[keep] + 1] >= 0
    positions, prefix = positions[keep], prefix[keep]
    keys = prefix * radix + ids[positions + n - 1]
    unique, key_counts = np.unique(keys, return_counts=True)
    write_parquet(
        work / "levels" / f"counts-{n}-{shard}.parquet", {"key": unique, "count": key_counts.astype(np.int64)}
    )
    save_arrays(work / "levels" / f"cand-{n}-{shard}.npz", positions=positions, keys=keys)
    return dict(candidates=int(len(keys)), distinct=int(len(unique)))


def _atoms_at(positions: np.ndarray, keys: np.ndarray, atoms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The candidates that are atoms, with their ids (rank among the level's sorted keys)."""
    if not len(atoms) or not len(keys):
        return positions[:0], keys[:0]
    index = np.searchsorted(atoms, keys)
    np.minimum(index, len(atoms) - 1, out=index)
    found = atoms[index] == keys
    return positions[found], index[found].astype(np.int64)


@stage(lambda _shards, n, *_: f"levels/atoms-{n}.json")
def merge_level(work: Path, shards: int, n: int, atom_threshold: int, memory_limit: str, threads: int) -> dict:
    """The atoms of length n: keys counted more than `atom_threshold` times over all shards (DuckDB)."""
    con = ngrams_duckdb.connect(memory_limit, work / "spill", threads)
    paths = [work / "levels" / f"counts-{n}-{s}.parquet" for s in range(shards)]
    with _merging(work):
        atoms = ngrams_duckdb.merge_keys(con, paths, atom_threshold, work / "levels" / f"atoms-{n}.npy")
    con.close()
    return dict(atoms=int(len(atoms)))


def load_dictionary(work: str, levels: int, min_count: int, atom_threshold: int, max_n) -> NgramDictionary:
    """The atom dictionary from the work folder; the level keys are memory-mapped, shared by the workers."""
    words, counts, vocab = _vocabulary(work)
    level_keys = {n: load_keys(Path(work) / "levels" / f"atoms-{n}.npy") for n in range(2, levels + 1)}
    return NgramDictionary(words, counts, min_count, atom_threshold, max_n, level_keys, vocab)


@stage(lambda shard, *_: f"pool/ingest-{shard}.json")
def ingest_pool(work: Path, shard: int, piece: dict, column, max_length) -> dict:
    """Read a pool piece (an over-long line is an error naming file:line: the evaluation rule) to Parquet."""
    info = Piece(**piece)
    sentences, _ = read_piece(info, column, max_length, skip_long=False)
    index = np.arange(info.first_index, info.first_index + len(sentences), dtype=np.int64)
    write_parquet(work / "pool" / f"ingest-{shard}.parquet", {"index": index, "sentence": sentences})
    return dict(sentences=len(sentences), nonblank=sum(1 for s in sentences if s.strip()))


@stage(lambda shard, *_: f"pool/degree-{shard}.json")
def degree_shard(work: Path, shard: int, levels: int, config: dict) -> dict:
    """Degree of each pool sentence of a shard; the record counts the sentences eligible as candidates."""
    dictionary = load_dictionary(str(work), levels, config["min_count"], config["atom_threshold"], config["max_n"])
    pool = read_parquet(work / "pool" / f"ingest-{shard}.parquet")
    result = score_pool(dictionary, pool["sentence"])
    write_parquet(
        work / "pool" / f"degree-{shard}.parquet",
        {
            "index": pool["index"],
            "length": result.lengths.astype(np.int64),
            "n_oov": result.n_oov,
            "cover_size": result.cover_size,
            "degree": result.degree,
        },
    )
    eligible = _eligible(result.degree, result.lengths, config["min_length"])
    return dict(sentences=len(result), eligible=int(eligible.sum()))


def _eligible(degree: np.ndarray, lengths: np.ndarray, min_length: int) -> np.ndarray:
    eligible = np.isfinite(degree)
    if min_length > 1:
        eligible &= np.asarray(lengths) >= min_length
    return eligible


@stage(lambda shard, *_: f"pool/top-{shard}.json")
def top_shard(work: Path, shard: int, tie_offset: int, config: dict) -> dict:
    """The shard's `k` best distinct sentences by degree, with their tie-break draws: the draws of the in-memory
    `top_k_unique` for these sentences (its generator advanced past the earlier shards' eligible sentences)."""
    table = read_parquet(work / "pool" / f"degree-{shard}.parquet")
    sentences = read_parquet(work / "pool" / f"ingest-{shard}.parquet", ["sentence"])["sentence"]
    degree = np.asarray(table["degree"], dtype=np.float64)
    index = np.flatnonzero(_eligible(degree, table["length"], config["min_length"]))
    rng = np.random.default_rng(config["seed"])
    rng.bit_generator.advance(tie_offset)
    ties = rng.random(len(index))
    order = np.lexsort((ties, -degree[index]))
    chosen = first_distinct(index[order].tolist(), sentences, config["candidates"])
    tie_of = dict(zip(index[order].tolist(), ties[order].tolist()))
    write_parquet(
        work / "pool" / f"top-{shard}.parquet",
        {
            "index": table["index"][chosen],
            "degree": degree[chosen],
            "tie": np.asarray([tie_of[i] for i in chosen.tolist()], dtype=np.float64),
            "length": table["length"][chosen],
            "cover_size": table["cover_size"][chosen],
            "sentence": [sentences[i] for i in chosen.tolist()],
        },
    )
    return dict(candidates=int(len(chosen)))


@lru_cache(maxsize=1)
def _ensemble(run_dirs: tuple[str, ...]):
    from structseq.compose.uncertainty import load_ensemble

    return load_ensemble(list(run_dirs))


@stage(lambda chunk, *_: f"uncertainty/chunk-{chunk}.json")
def uncertainty_chunk(work: Path, chunk: int, begin: int, end: int, run_dirs: tuple, options: dict) -> dict:
    """Decode and score candidates [begin, end) with the ensemble (loaded once per worker; on Ray a task can ask
    for a GPU). Chunks start at multiples of the batch size, so every batch is the in-memory path's batch."""
    from structseq.compose.uncertainty import MEASURES, score_ensemble

    texts = read_parquet(work / "candidates.parquet", ["sentence"])["sentence"][begin:end]
    result = score_ensemble(_ensemble(tuple(run_dirs)), texts, **options)
    columns = {"hypothesis": result.hypotheses, "n_rows": result.n_rows, **{m: result.measures[m] for m in MEASURES}}
    write_parquet(work / "uncertainty" / f"chunk-{chunk}.parquet", columns)
    return dict(sentences=len(texts))
