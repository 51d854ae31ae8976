"""The out-of-core compose pipeline (`compose.sharded`) gives exactly the in-memory answers on the shipped ReaCT
data: degrees, candidates, uncertainty, samples (same seed), at 1, 2 and 8 shards and on Ray; it resumes a
killed stage from its finished shards, keeps DuckDB under its memory limit, and names bad lines by file:line."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("duckdb", reason="the sharded path needs the scale extra: pip install structseq[scale]")
pytest.importorskip("pyarrow", reason="the sharded path needs the scale extra: pip install structseq[scale]")

from structseq.compose import BuildConfig, build_benchmark, read_corpora, read_sentences, score_pool  # noqa: E402
from structseq.compose.sharded import build_sharded  # noqa: E402
from structseq.compose.shards import plan, read_parquet, read_piece  # noqa: E402
from structseq.errors import DataError  # noqa: E402
from tests.compose.test_runs import run_dirs  # noqa: E402, F401 (the fixture: two tiny trained runs)
from tests.compose.test_uncertainty import FakeRun  # noqa: E402
from tests.fixtures.paths import ROOT as REPO  # noqa: E402

ROOT = REPO.parent / "shared" / "data" / "react" / "raw"
TRAIN = [ROOT / "valid.de", ROOT / "test.de", ROOT / "cg_test.de"]
POOL = ROOT / "test.de"
CONFIG = BuildConfig(candidates=1200, drop_top=100, window=600, sample=150, seed=7)
FILES = ["candidates.txt", "candidates.tsv", "uncertainty.tsv", "test.src", "test.ref", "selected.tsv"]

pytestmark = pytest.mark.skipif(not POOL.exists(), reason=f"ReaCT data not found under {ROOT}")


def _runs():
    return [FakeRun(0), FakeRun(1), FakeRun(2)]


@pytest.fixture(scope="module")
def in_memory(tmp_path_factory):
    """The in-memory build (the reference) and its degrees."""
    out = tmp_path_factory.mktemp("memory")
    train, pool = read_corpora(TRAIN), read_sentences(POOL)
    report = build_benchmark(
        train, pool, out, config=CONFIG, runs=_runs(), pool_targets=read_sentences(ROOT / "test.en")
    )
    from structseq.compose import NgramDictionary

    dictionary = NgramDictionary.from_corpus(train)
    return out, report, score_pool(dictionary, pool), dictionary.sizes()


def _sharded(out, shards, engine="inline", workers=1, **kwargs):
    return build_sharded(
        TRAIN, POOL, out, config=CONFIG, shards=shards, engine=engine, workers=workers, runs=_runs(),
        pool_target=ROOT / "test.en", memory_limit="256MB", **kwargs,
    )  # fmt: skip


def _assert_same(in_memory, out: Path, report: dict) -> None:
    reference, ref_report, degrees, sizes = in_memory
    for name in FILES:
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name
    assert report["selection"] == ref_report["selection"]
    assert report["candidates"] == ref_report["candidates"]
    assert report["train"]["atoms_per_n"] == sizes and report["train"]["sentences"] == ref_report["train"]["sentences"]
    # exactly: the mean is the exact sum divided once, the median numpy's, whatever the shards (issue 55)
    assert report["pool"] == ref_report["pool"]
    # every pool sentence's degree, not only the candidates'
    work = Path(report["sharded"]["work_dir"])
    parts = [
        read_parquet(p) for p in sorted(work.glob("pool/degree-*.parquet"), key=lambda p: int(p.stem.split("-")[1]))
    ]
    index = np.concatenate([p["index"] for p in parts])
    assert index.tolist() == list(range(len(degrees)))
    np.testing.assert_array_equal(np.concatenate([p["degree"] for p in parts]), degrees.degree)
    np.testing.assert_array_equal(np.concatenate([p["cover_size"] for p in parts]), degrees.cover_size)
    np.testing.assert_array_equal(np.concatenate([p["n_oov"] for p in parts]), degrees.n_oov)
    # the training side's bulky intermediates are gone once read (tens of GB at 10^8), their records stay
    for pattern in ("train/local-*", "train/words-*", "train/encoded-*.npz", "levels/cand-*.npz", "levels/counts-*"):
        assert not list(work.glob(pattern)), pattern
    assert list(work.glob("train/encoded-*.json")) and list(work.glob("levels/atoms-*.npy"))


@pytest.mark.parametrize("shards, engine, workers", [(1, "inline", 1), (2, "local", 2), (8, "inline", 1)])
def test_sharded_equals_in_memory(in_memory, tmp_path, shards, engine, workers):
    report = _sharded(tmp_path, shards, engine=engine, workers=workers)
    assert report["sharded"]["shards"]["pool"] == shards and report["sharded"]["workers"] == workers
    assert report["sharded"]["shards"]["train"] >= shards  # three files, each at least one shard
    _assert_same(in_memory, tmp_path, report)


def test_ray_engine_equals_in_memory(in_memory, tmp_path):
    """A local Ray cluster of 2 workers runs the same stage functions."""
    pytest.importorskip("ray", reason="the Ray engine needs the scale extra: pip install structseq[scale]")
    report = _sharded(tmp_path, 2, engine="ray", workers=2)
    assert report["sharded"]["engine"] == "ray"
    _assert_same(in_memory, tmp_path, report)


KILL = """
import os, signal, sys
from structseq.compose import stages
real = stages.degree_shard
def dying(work, shard, *args):
    if shard == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # a hard kill mid-stage: no cleanup runs
    return real(work, shard, *args)
dying.marker = real.marker
stages.degree_shard = dying
sys.path.insert(0, {root!r})
import {module} as t
t._sharded({out!r}, 8, workers=1)
"""


def test_killed_stage_resumes_from_finished_shards(in_memory, tmp_path):
    script = KILL.format(root=str(REPO), module=__name__, out=str(tmp_path))
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr[-2000:]
    work = next(tmp_path.glob("work/build-*"))
    assert sorted(p.name for p in work.glob("pool/degree-*.json")) == [f"degree-{s}.json" for s in range(3)]
    assert not list(work.rglob(".*.tmp"))  # atomic outputs: no partial file left
    finished = {p: p.stat().st_mtime_ns for p in work.glob("pool/degree-*.parquet")}
    report = _sharded(tmp_path, 8, workers=1)
    assert report["sharded"]["stages"]["degree"] == {**report["sharded"]["stages"]["degree"], "tasks": 8, "resumed": 3}
    assert (
        report["sharded"]["stages"]["train ingest"]["resumed"] == report["sharded"]["stages"]["train ingest"]["tasks"]
    )
    assert all(p.stat().st_mtime_ns == t for p, t in finished.items())  # finished shards were not recomputed
    _assert_same(in_memory, tmp_path, report)


def test_a_shards_candidates_are_deleted_as_its_next_level_task_ends(in_memory, tmp_path):
    """Killed in the middle of level 3's counts: the shards whose level-3 task ended have no level-2 candidates
    left (only that task read them), the others still do, and the resumed build gives the same files."""
    script = KILL.format(root=str(REPO), module=__name__, out=str(tmp_path)).replace(
        "real = stages.degree_shard", "real = stages.count_level"
    ).replace("def dying(work, shard, *args):\n    if shard == 3:", "def dying(work, shard, n, *args):\n    if shard == 3 and n == 3:").replace(
        "return real(work, shard, *args)", "return real(work, shard, n, *args)"
    ).replace("stages.degree_shard = dying", "stages.count_level = dying")  # fmt: skip
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr[-2000:]
    work = next(tmp_path.glob("work/build-*"))
    finished = sorted(int(p.stem.split("-")[2]) for p in work.glob("levels/cand-3-*.json"))
    assert finished == [0, 1, 2]
    left = sorted(int(p.stem.split("-")[2]) for p in work.glob("levels/cand-2-*.npz"))
    shards = len(list(work.glob("levels/cand-2-*.json")))
    assert left == list(range(3, shards))
    assert not list(work.glob("train/local-*")) and not list(work.glob("train/words-*"))
    _assert_same(in_memory, tmp_path, _sharded(tmp_path, 8, workers=1))


MEMORY = """
import json, sys
from pathlib import Path
from structseq.compose import ngrams_duckdb
from structseq.compose.engines import peak_rss_mib
import pyarrow.parquet  # imported by the merge: part of the base, not of the group-by
work, limit = Path(sys.argv[1]), sys.argv[2]
con = ngrams_duckdb.connect(limit, work / f"spill-{limit}", 1)
base = peak_rss_mib()
atoms = ngrams_duckdb.merge_keys(con, sorted(work.glob("counts-*.parquet")), 3, work / f"atoms-{limit}.npy")
peak = peak_rss_mib()
print(json.dumps({"base": base, "peak": peak, "atoms": int(len(atoms))}))
"""


def test_memory_limit_is_honoured(tmp_path):
    """The n-gram merge of 4 shards of 1.5M keys (mostly distinct: a 6M-group aggregate and sort), under a 64 MB
    limit and a 4 GB one, each in a fresh subprocess whose peak (VmHWM: unlike ru_maxrss, not inherited from the
    forking pytest process) is measured after its imports."""
    from structseq.compose.shards import write_parquet

    rng = np.random.default_rng(0)
    for s in range(4):
        keys = rng.integers(0, 2**40, 1_500_000)
        keys[:100_000] = np.arange(100_000)  # these occur in every shard: the atoms
        write_parquet(tmp_path / f"counts-{s}.parquet", {"key": keys, "count": np.ones(len(keys), np.int64)})

    def run(limit):
        done = subprocess.run([sys.executable, "-c", MEMORY, str(tmp_path), limit], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    free, held = run("4GB"), run("64MB")
    assert free["atoms"] == held["atoms"] == 100_000
    grown_free, grown_held = free["peak"] - free["base"], held["peak"] - held["base"]
    assert grown_free > 200, free  # the corpus is built to exceed the limit when nothing holds DuckDB
    # the limit, plus what DuckDB does not account (allocator slack, reader buffers): measured 77-102 MB
    assert grown_held < 64 + 64 and grown_held < grown_free / 3, (held, free)


def _write(path: Path, lines: list[bytes], gz: bool = False) -> Path:
    data = b"".join(lines)
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


@pytest.mark.parametrize("shards", [1, 2, 3, 7])
def test_pieces_read_exactly_what_read_sentences_reads(tmp_path, shards):
    rng = np.random.default_rng(shards)
    lines = [(" ".join(f"w{k}" for k in rng.integers(0, 9, rng.integers(0, 6))) + "\n").encode() for _ in range(50)]
    lines[0] = "\ufeff".encode() + lines[0]
    lines[4] = lines[4].replace(b"\n", b"\r\n")
    lines[-1] = lines[-1].rstrip(b"\n")  # no final line end
    plain = _write(tmp_path / "a.txt", lines)
    packed = _write(tmp_path / "b.txt.gz", lines, gz=True)
    pieces = plan([plain, packed], shards)
    got = [s for piece in pieces for s in read_piece(piece)[0]]
    assert got == read_sentences(plain) + read_sentences(packed)
    assert [p.first_index for p in pieces] == np.cumsum([0] + [p.lines for p in pieces[:-1]]).tolist()


def test_bad_bytes_and_long_lines_are_named_by_file_and_line(tmp_path):
    lines = [b"a b c\n"] * 40
    bad = _write(tmp_path / "pool.txt", lines[:33] + [b"a \xe9 b\n"] + lines[34:])
    pieces = plan([bad], 8)
    with pytest.raises(DataError, match=r"pool.txt:34: not UTF-8 \(byte 0xe9\)"):
        for piece in pieces:
            read_piece(piece)
    long = _write(tmp_path / "long.txt", lines[:25] + [b"x " * 9 + b"\n"] + lines[26:])
    with pytest.raises(DataError, match="long.txt:26: has 9 tokens, more than the maximum length 8"):
        for piece in plan([long], 4):
            read_piece(piece, max_length=8)
    skipped = [line for piece in plan([long], 4) for line in read_piece(piece, max_length=8, skip_long=True)[1]]
    assert skipped == [f"{long}:26"]


def test_cli_build_with_shards(in_memory, tmp_path):
    from typer.testing import CliRunner

    from structseq.cli import compose as cli

    reference = in_memory[0]
    table = tmp_path / "uncertainty.tsv"
    table.write_bytes((reference / "uncertainty.tsv").read_bytes())
    args = ["build", *sum((["--train", str(p)] for p in TRAIN), []), "--pool", str(POOL), "-o", str(tmp_path / "out")]
    args += ["-k", "1200", "-d", "100", "-r", "600", "-s", "150", "--seed", "7", "--uncertainty", str(table)]
    result = CliRunner().invoke(cli.app, [*args, "--shards", "2", "--workers", "1", "--memory-limit", "128MB"])
    assert result.exit_code == 0, result.output
    assert "local engine" in result.output and "skipped 0 over-long" in result.output
    for name in ("candidates.txt", "test.src", "selected.tsv"):
        assert (tmp_path / "out" / name).read_bytes() == (reference / name).read_bytes(), name


def test_ensemble_uncertainty_in_chunks_equals_in_memory(run_dirs, tmp_path, monkeypatch):  # noqa: F811
    """Two tiny trained runs score the candidates in chunks of 2 batches (tasks on the engine, each loading the
    ensemble itself) exactly as the in-memory build scores them in one call."""
    from structseq.api import load_run
    from structseq.compose import sharded
    from tests.compose.test_select import toy_corpus

    train, pool, _ = toy_corpus(2)
    (tmp_path / "train.txt").write_text("\n".join(train) + "\n")
    (tmp_path / "pool.txt").write_text("\n".join(pool) + "\n")
    config = BuildConfig(candidates=40, drop_top=5, window=20, sample=8, seed=3, batch_size=4)
    runs = [load_run(d) for d in run_dirs]
    build_benchmark(train, pool, tmp_path / "memory", config=config, runs=runs)
    monkeypatch.setattr(sharded, "CHUNK_BATCHES", 2)
    report = build_sharded(
        [tmp_path / "train.txt"], tmp_path / "pool.txt", tmp_path / "sharded", config=config, shards=2,
        engine="inline", ensemble=run_dirs,
    )  # fmt: skip
    assert report["sharded"]["stages"]["uncertainty"]["tasks"] == 5 and report["ensemble_size"] == 2
    for name in ("uncertainty.tsv", "candidates.tsv", "test.src", "selected.tsv"):
        assert (tmp_path / "sharded" / name).read_bytes() == (tmp_path / "memory" / name).read_bytes(), name


def test_merged_atoms_are_sorted_with_several_threads(tmp_path):
    """The atoms of a level are its keys in sorted order (an atom's id is its rank) also when DuckDB merges with
    several threads over files of several row groups; reference: numpy's unique over all the keys."""
    from structseq.compose import ngrams_duckdb
    from structseq.compose.shards import write_parquet

    rng = np.random.default_rng(1)
    shards = [rng.integers(0, 500_000, 1_000_000) for _ in range(4)]  # ~450k atoms: several row groups
    for s, keys in enumerate(shards):
        unique, counts = np.unique(keys, return_counts=True)
        order = rng.permutation(len(unique))  # shards hand their counts over in any order
        write_parquet(tmp_path / f"counts-{s}.parquet", {"key": unique[order], "count": counts[order]})
    con = ngrams_duckdb.connect("1GB", tmp_path / "spill", 2)
    atoms = ngrams_duckdb.merge_keys(con, sorted(tmp_path.glob("counts-*.parquet")), 3, tmp_path / "atoms.npy")
    unique, counts = np.unique(np.concatenate(shards), return_counts=True)
    np.testing.assert_array_equal(atoms, unique[counts > 3])
    np.testing.assert_array_equal(np.load(tmp_path / "atoms.npy"), atoms)
