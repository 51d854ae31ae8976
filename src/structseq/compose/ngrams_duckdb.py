"""The group-bys that do not fit in memory, in DuckDB: word counts and n-gram counts summed over the shards.

Every shard task writes its partial counts (`word, count` or `key, count`) as Parquet; the totals over a corpus
of 10^8-10^9 sentences are a group-by over billions of mostly distinct keys (most n-grams occur once), which
is what no longer fits in one machine's memory. DuckDB runs that group-by with a hard `memory_limit` and spills
its hash tables and sorts to `temp_directory` when the limit is reached; only the result, the frequent keys
(atoms: seen more than the threshold), comes back into Python. Why DuckDB rather than Polars: its out-of-core
aggregate and sort honour a configured limit (Polars' streaming engine has no memory limit to configure), it
reads the Parquet shards in place, and it is one in-process library with no server.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from structseq.errors import ConfigError
from structseq.outputs import atomic_open

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4}
_UNITS.update({"kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4})


def parse_size(text: str) -> int:
    """Bytes of a size such as `4GB`, `512MiB` or `1000000`."""
    match = _SIZE.match(str(text))
    if not match:
        raise ConfigError(f"memory limit must be a size such as 4GB or 512MiB, got {text!r}")
    return int(float(match.group(1)) * _UNITS[(match.group(2) or "").lower()])


def connect(memory_limit: str, temp_directory: str | os.PathLike, threads: int = 1):
    """A DuckDB connection held to `memory_limit` bytes, spilling to `temp_directory`."""
    import duckdb

    Path(temp_directory).mkdir(parents=True, exist_ok=True)
    con = duckdb.connect(":memory:")
    con.execute(f"SET memory_limit='{parse_size(memory_limit)}B'")
    con.execute("SET temp_directory=?", [str(temp_directory)])
    con.execute(f"SET threads={max(1, int(threads))}")
    con.execute("SET preserve_insertion_order=false")
    return con


def _files(paths: Sequence[Path]) -> list[str]:
    return [str(p) for p in paths]


def merge_words(con, paths: Sequence[Path], min_count: int, out: Path) -> int:
    """Total word counts over the shards; the words seen at least `min_count` times go to `out` (word, count,
    sorted by word: a word's rank is its id). Returns their number."""
    query = (
        "SELECT word, sum(count)::BIGINT AS count FROM read_parquet(?) GROUP BY word "
        "HAVING sum(count) >= ? ORDER BY word"
    )
    _copy(con, query, [_files(paths), min_count], out)
    return con.execute("SELECT count(*) FROM read_parquet(?)", [str(out)]).fetchone()[0]


def merge_keys(con, paths: Sequence[Path], threshold: int, out: Path) -> np.ndarray:
    """The n-gram keys seen more than `threshold` times over all shards, sorted (an atom's id is its rank);
    written to `out` (.npy) and returned."""
    if not paths:
        keys = np.zeros(0, np.int64)
    else:
        query = "SELECT key FROM read_parquet(?) GROUP BY key HAVING sum(count) > ? ORDER BY key"
        parquet = out.with_suffix(".parquet")
        _copy(con, query, [_files(paths), threshold], parquet)
        import pyarrow.parquet as pq

        # read back in file order (a parallel SQL read may reorder rows), sorted again: ids are ranks
        keys = np.sort(pq.read_table(parquet).column("key").to_numpy().astype(np.int64))
        parquet.unlink()
    with atomic_open(out, "wb") as handle:
        np.save(handle, keys)
    return keys


def pool_summary(con, paths: Sequence[Path]) -> tuple[dict, list[float]]:
    """The report's pool counts, and its degree count, min and max, from the degree shards; with the middle one or
    two degrees in order, from which the median is numpy's (`summary.median_of_middle`)."""
    files = _files(paths)
    row = con.execute(
        "SELECT count(*), count(*) FILTER (n_oov = 0 AND length > 0), count(*) FILTER (n_oov > 0), "
        "count(*) FILTER (length = 0), count(degree), min(degree), max(degree) FROM read_parquet(?)",
        [files],
    ).fetchone()
    summary = {"count": int(row[4])}
    middle: list[float] = []
    if row[4]:
        summary.update(min=float(row[5]), max=float(row[6]))
        query = "SELECT degree FROM read_parquet(?) WHERE degree IS NOT NULL ORDER BY degree LIMIT 2 OFFSET ?"
        middle = [r[0] for r in con.execute(query, [files, (int(row[4]) - 1) // 2]).fetchall()]
    counts = {"sentences": int(row[0]), "in_vocabulary": int(row[1]), "with_oov": int(row[2]), "empty": int(row[3])}
    return {**counts, "degree": summary}, middle


def _copy(con, query: str, params: list, out: Path) -> None:
    """COPY the query's result to Parquet under a temporary name, then rename: a killed merge leaves no output."""
    tmp = out.with_name(f".{out.name}.tmp")
    con.execute(f"COPY ({query}) TO '{_quote(tmp)}' (FORMAT parquet)", params)
    os.replace(tmp, out)


def _quote(path: Path) -> str:
    return str(path).replace("'", "''")
