"""Degree scoring at the paper's scale: sentences/s and peak memory vs pool size, max n and train size.

The paper scores about 1.3M WMT sentences against IWSLT14 (160k sentences); neither is available here,
so both are synthesised from the real English data under the data root: the training side from ReaCT
valid+test, CoGnition valid+test and Tatoeba train; the pool from ReaCT cg_test, CoGnition cg-test,
Tatoeba dev/test and the Maruf et al. document-level sets, where half of the sentences are real and
half splice the prefix of one real sentence to the suffix of another (new n-gram junctions, realistic
lengths and OOV rate). Each measurement runs in a fresh subprocess, so its peak RSS is its own;
timings include reading the files, building the dictionary and scoring (the CLI's work minus writing).

    .venv/bin/python benchmarks/bench_compose.py            # full sweep, JSON to benchmarks/work/
    .venv/bin/python benchmarks/bench_compose.py --quick    # small pools, a smoke run

Corpus scale (`--scale N ...`, issue 48): a synthetic corpus (Zipfian vocabulary, ReaCT's sentence lengths) of N
training and N pool sentences through the in-memory path, the sharded local path (`compose build --shards`) and
the Ray engine; wall time and peak memory of each stage, one JSON line per run appended to
results/compose/scale.jsonl with the machine's load (uptime) before and after; table by
`structseq report compose-scale`.

    .venv/bin/python benchmarks/bench_compose.py --scale 1000000 --paths memory sharded ray --workers 1 2
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

WORK = Path(__file__).resolve().parent / "work"
TOKEN = re.compile(r"\w+(?:[-']\w+)*|[^\w\s]")


def _lines(path: Path, column: int | None = None) -> list[str]:
    import gzip

    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        rows = [line.rstrip("\r\n") for line in handle]
    if column is not None:
        rows = [row.split("\t")[column] for row in rows]
    return [" ".join(TOKEN.findall(row.lower())) for row in rows if row.strip() and row.strip() != "<d>"]


def material(root: Path) -> tuple[list[str], list[str]]:
    """(training sentences, pool source sentences) from the real data."""
    train = []
    for rel in ("react/raw/valid.en", "react/raw/test.en", "cognition/valid.en", "cognition/test.en"):
        train += _lines(root / rel)
    train += _lines(root / "tatoeba_en_zh/train.tsv", 0)
    pool = []
    for rel in ("react/raw/cg_test.en", "cognition/cg-test/cg-test.en"):
        pool += _lines(root / rel)
    for rel in ("tatoeba_en_zh/dev.tsv", "tatoeba_en_zh/test.tsv"):
        pool += _lines(root / rel, 0)
    for path in sorted((root / "doclevel_mt/maruf2019_en_de").glob("*/*_en.txt")):
        pool += _lines(path)
    return train, pool


def synthesise(base: list[str], size: int, seed: int) -> list[str]:
    """`size` sentences: half real ones drawn with replacement, half splices of two real ones."""
    rng = np.random.default_rng(seed)
    tokens = [s.split() for s in base]
    first = rng.integers(0, len(base), size)
    second = rng.integers(0, len(base), size)
    splice = rng.random(size) < 0.5
    cut_a, cut_b = rng.random(size), rng.random(size)
    out = []
    for i in range(size):
        a = tokens[first[i]]
        if not splice[i]:
            out.append(base[first[i]])
            continue
        b = tokens[second[i]]
        out.append(" ".join(a[: max(1, int(len(a) * cut_a[i]))] + b[int(len(b) * cut_b[i]) :]))
    return out


def prepare(root: Path, sizes: list[int], train_sizes: list[int]) -> dict:
    WORK.mkdir(parents=True, exist_ok=True)
    train, pool = material(root)
    files = {"pool": {}, "train": {}}
    for size in sizes:
        path = WORK / f"pool_{size}.txt"
        if not path.exists():
            path.write_text("\n".join(synthesise(pool, size, seed=size)) + "\n", encoding="utf-8")
        files["pool"][size] = str(path)
    for size in train_sizes:  # None: the real sentences only; larger: padded with splices of them
        path = WORK / f"train_{size or 'real'}.txt"
        if not path.exists():
            rows = train if size is None else train + synthesise(train, size - len(train), seed=7)
            path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        files["train"][size] = str(path)
    files["real_train_sentences"] = len(train)
    files["real_pool_sentences"] = len(pool)
    return files


def peak_rss_mib() -> float:
    """VmHWM of this process: unlike ru_maxrss it does not inherit the forking parent's peak."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def measure_one(train_file: str, pool_file: str, max_n: int | None, explain: bool) -> dict:
    """One measurement (run in a child process)."""
    from structseq.compose import NgramDictionary, read_sentences, score_pool

    start = time.perf_counter()
    train = read_sentences(train_file)
    dictionary = NgramDictionary.from_corpus(train, max_n=max_n)
    built = time.perf_counter()
    pool = read_sentences(pool_file)
    loaded = time.perf_counter()
    result = score_pool(dictionary, pool, explain=explain)
    done = time.perf_counter()
    scored = np.isfinite(result.degree)
    return {
        "pool_sentences": len(pool),
        "pool_tokens": int(result.lengths.sum()),
        "train_sentences": len(train),
        "max_n": max_n,
        "explain": explain,
        "atoms_per_n": {str(k): v for k, v in dictionary.sizes().items()},
        "in_vocabulary": int(scored.sum()),
        "mean_degree": float(result.degree[scored].mean()),
        "seconds_dictionary": round(built - start, 3),
        "seconds_read_pool": round(loaded - built, 3),
        "seconds_score": round(done - loaded, 3),
        "seconds_total": round(done - start, 3),
        "sentences_per_s_score": round(len(pool) / (done - loaded)),
        "sentences_per_s_total": round(len(pool) / (done - start)),
        "peak_rss_mib": peak_rss_mib(),
    }


def run_child(train_file: str, pool_file: str, max_n: int | None, explain: bool) -> dict:
    command = [sys.executable, __file__, "--one", train_file, pool_file, str(max_n), str(int(explain))]
    completed = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def react_lengths(root: Path) -> np.ndarray:
    """Sentence lengths (tokens) of the ReaCT English sides: what the synthetic sentences draw from."""
    return np.asarray(
        [len(line.split()) for rel in ("valid.en", "test.en", "cg_test.en") for line in _raw(root / "react/raw" / rel)]
    )


def _raw(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def synthetic_corpus(
    path: Path, size: int, seed: int, lengths: np.ndarray, vocab: int = 500_000, zipf: float = 1.1
) -> Path:
    """`size` sentences of Zipf-distributed words (rank r with probability ~ r^-zipf over `vocab` ranks) with
    lengths drawn from `lengths`; written in chunks, so any size fits in memory. Cached by name."""
    if path.exists():
        return path
    rng = np.random.default_rng(seed)
    cdf = np.cumsum(1.0 / np.arange(1, vocab + 1) ** zipf)
    cdf /= cdf[-1]
    words = np.asarray([f"w{i}" for i in range(vocab)], dtype=object)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        for begin in range(0, size, 200_000):
            n = min(200_000, size - begin)
            sizes = rng.choice(lengths, n)
            tokens = words[np.searchsorted(cdf, rng.random(int(sizes.sum())))]
            bounds = np.concatenate([[0], np.cumsum(sizes)])
            handle.write("".join(" ".join(tokens[bounds[i] : bounds[i + 1]]) + "\n" for i in range(n)))
    tmp.rename(path)
    return path


def tree_memory_mib(root: int) -> tuple[float, float]:
    """(PSS, RSS) in MiB summed over process `root` and all its descendants. PSS shares each page among the
    processes that map it (the memory-mapped atom arrays the workers share count once), so it is the tree's
    real use; RSS counts shared pages once per process and overstates it."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    pss = rss = 0.0
    todo = [root]
    while todo:
        pid = todo.pop()
        todo += parents.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1]) / 1024
                elif line.startswith("Rss:"):
                    rss += int(line.split()[1]) / 1024
        except OSError:
            continue
    return round(pss, 1), round(rss, 1)


def watch_tree(pid: int, every: float = 1.0, out: Path | None = None, stop=None) -> dict:
    """Sample `pid`'s process tree until it exits (or `stop` is set); the peaks, written to `out` once a
    minute and at the end when given (a run of hours keeps what it saw if the session ends)."""
    peak = {"peak_tree_pss_mib": 0.0, "peak_tree_rss_mib": 0.0, "samples": 0, "every_s": every}
    last = time.monotonic()
    while Path(f"/proc/{pid}").exists() and not (stop and stop.is_set()):
        pss, rss = tree_memory_mib(pid)
        peak["peak_tree_pss_mib"] = max(peak["peak_tree_pss_mib"], pss)
        peak["peak_tree_rss_mib"] = max(peak["peak_tree_rss_mib"], rss)
        peak["samples"] += 1
        if out and time.monotonic() - last > 60:
            out.write_text(json.dumps(peak) + "\n", encoding="utf-8")
            last = time.monotonic()
        time.sleep(every)
    if out:
        out.write_text(json.dumps(peak) + "\n", encoding="utf-8")
    return peak


def _load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


SCALE_CONFIG = {"candidates": 60_000, "drop_top": 2_000, "window": 18_000, "sample": 3_000, "seed": 0}


def measure_memory_path(train_file: str, pool_file: str) -> dict:
    """The in-memory path, stage by stage, each stage's own peak (VmHWM reset between stages)."""
    from structseq.compose import BuildConfig, NgramDictionary, read_sentences, score_pool, top_k_unique
    from structseq.compose.engines import cpu_seconds, reset_peak

    stages, config = {}, BuildConfig(**SCALE_CONFIG)

    def stage(name, fn):
        reset_peak()
        clock, cpu = time.perf_counter(), cpu_seconds()
        value = fn()
        seconds, cpu = round(time.perf_counter() - clock, 3), round(cpu_seconds() - cpu, 3)
        stages[name] = {"seconds": seconds, "cpu_seconds": cpu, "peak_rss_mib": peak_rss_mib()}
        return value

    train = stage("read train", lambda: read_sentences(train_file))
    dictionary = stage("dictionary", lambda: NgramDictionary.from_corpus(train))
    train = None  # noqa: F841 (freed before the pool is read, as a careful caller would)
    pool = stage("read pool", lambda: read_sentences(pool_file))
    result = stage("degree", lambda: score_pool(dictionary, pool))
    stage(
        "top-K", lambda: top_k_unique(result.degree, pool, config.candidates, seed=config.seed, lengths=result.lengths)
    )
    return {"stages": stages, "atoms_per_n": {str(k): v for k, v in dictionary.sizes().items()}}


def measure_sharded_path(
    train_file: str, pool_file: str, engine: str, workers: int, shards: int, memory: str, keep: str = ""
) -> dict:
    """`build_sharded` (stopping after the candidates), a fresh work folder; stage records from its report.

    With `keep` the output folder is `keep` itself and survives a failure, so running the same command again
    resumes from the finished shards (a 10^8 run takes hours); it is removed once the record is taken, and only
    if this benchmark made it (its marker file). A resumed stage counts only the tasks it ran: each stage
    records how many it took over (`resumed`), and the tables mark such a run."""
    import shutil
    import tempfile

    from structseq.compose import BuildConfig
    from structseq.compose.sharded import build_sharded

    marker = Path(keep, ".bench-compose-keep") if keep else None
    if marker and not Path(keep).exists():
        Path(keep).mkdir(parents=True)
        marker.touch()
    with tempfile.TemporaryDirectory(dir=WORK) as scratch:
        out = keep or scratch
        report = build_sharded(
            [train_file], pool_file, out, config=BuildConfig(**SCALE_CONFIG), shards=shards, engine=engine,
            workers=workers, memory_limit=memory,
        )  # fmt: skip
        if marker and marker.exists():
            shutil.rmtree(keep)
    info = report["sharded"]
    stages = {
        k: {"seconds": v["seconds"], "cpu_seconds": v["cpu_seconds"], "peak_rss_mib": v["task_peak_rss_mib"],
            "resumed": v.get("resumed", 0)}
        for k, v in info["stages"].items()
    }  # fmt: skip
    return {
        "stages": stages,
        "atoms_per_n": report["train"]["atoms_per_n"],
        "peak_rss_mib_main": info["peak_rss_mib_main"],
    }


def run_scale(
    sizes: list[int],
    paths: list[str],
    workers: list[int],
    memory: str,
    shards_per_million: int,
    out: Path,
    pool_fraction: float = 1.0,
    keep_work: str = "",
) -> None:
    """One child process per (size, path, workers); each appends its record to `out`."""
    from structseq.paths import data_root

    WORK.mkdir(parents=True, exist_ok=True)
    lengths = react_lengths(data_root(None))
    for size in sizes:
        train = synthetic_corpus(WORK / f"synth_train_{size}.txt", size, 1, lengths)
        pool_size = int(size * pool_fraction)
        pool = synthetic_corpus(WORK / f"synth_pool_{pool_size}.txt", pool_size, 2, lengths)
        for path in paths:
            for n in [1] if path == "memory" else workers:
                shards = max(n, shards_per_million * size // 1_000_000)
                args = [
                    sys.executable,
                    __file__,
                    "--scale-one",
                    str(train),
                    str(pool),
                    path,
                    str(n),
                    str(shards),
                    memory,
                    *(
                        ["--keep-work", f"{keep_work}/{size}-{pool_size}-{path}-{n}-{shards}"]
                        if keep_work and path != "memory"
                        else []
                    ),
                ]
                before = _load()
                clock = time.perf_counter()
                child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                peaks: dict = {}
                watcher = threading.Thread(target=lambda: peaks.update(watch_tree(child.pid)), daemon=True)
                watcher.start()
                stdout, stderr = child.communicate()
                watcher.join()
                if child.returncode:
                    print(f"{path} x{n} at {size}: failed\n{stderr[-3000:]}", flush=True)
                    continue
                record = json.loads(stdout.strip().splitlines()[-1])
                record.update(peaks)
                record.update(
                    sentences=size, pool_sentences=pool_size, path=path, workers=n, shards=shards if path != "memory" else None,
                    memory_limit=memory if path != "memory" else None, wall_seconds=round(time.perf_counter() - clock, 1),
                    load_before=before, load_after=_load(), cpus=__import__("os").cpu_count(),
                    date=time.strftime("%Y-%m-%d %H:%M"), command="python benchmarks/bench_compose.py " + " ".join(sys.argv[1:]),
                )  # fmt: skip
                from structseq.outputs import append_lines

                append_lines(out, [json.dumps(record)])
                total = sum(s["seconds"] for s in record["stages"].values())
                print(f"{size:>10} {path:>8} x{n}: {total:7.1f}s, load {before[0]:.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small pools only")
    parser.add_argument("--scale", nargs="+", type=float, help="corpus-scale runs at these sizes (sentences)")
    parser.add_argument("--paths", nargs="+", default=["memory", "sharded", "ray"], help="memory, sharded, ray")
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2], help="workers of the sharded paths")
    parser.add_argument("--memory-limit", default="4GB", help="DuckDB's limit in the sharded paths")
    parser.add_argument("--shards-per-million", type=int, default=4, help="shards per 10^6 sentences")
    parser.add_argument(
        "--records", default=str(Path(__file__).resolve().parent.parent / "results/compose/scale.jsonl")
    )
    parser.add_argument("--pool-fraction", type=float, default=1.0, help="pool sentences per training sentence")
    parser.add_argument("--scale-one", nargs=6, help=argparse.SUPPRESS)
    parser.add_argument(
        "--watch", nargs=2, metavar=("PID", "OUT"), help="record the peak PSS/RSS of PID's process tree to OUT (JSON)"
    )
    parser.add_argument(
        "--keep-work", default="", help="sharded paths: build in this folder, kept on failure so a rerun resumes"
    )
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--one", nargs=4, metavar=("TRAIN", "POOL", "MAX_N", "EXPLAIN"), help=argparse.SUPPRESS)
    parser.add_argument("-o", "--output", default=str(WORK / "bench_compose.json"))
    args = parser.parse_args()
    if args.watch:
        print(json.dumps(watch_tree(int(args.watch[0]), out=Path(args.watch[1]))))
        return
    if args.scale_one:
        train, pool, path, workers, shards, memory = args.scale_one
        if path == "memory":
            record = measure_memory_path(train, pool)
        else:
            engine = "local" if path == "sharded" else path
            record = measure_sharded_path(train, pool, engine, int(workers), int(shards), memory, args.keep_work)
        print(json.dumps(record))
        return
    if args.scale:
        run_scale(
            [int(n) for n in args.scale],
            args.paths,
            args.workers,
            args.memory_limit,
            args.shards_per_million,
            Path(args.records),
            args.pool_fraction,
            args.keep_work,
        )
        return
    if args.one:
        train_file, pool_file, max_n, explain = args.one
        print(json.dumps(measure_one(train_file, pool_file, None if max_n == "None" else int(max_n), explain == "1")))
        return

    from structseq.paths import data_root

    full = 1_300_000
    sizes = [20_000, 50_000] if args.quick else [100_000, 300_000, 1_000_000, full]
    top = sizes[-1]
    train_sizes = [None] if args.quick else [None, 160_000]
    files = prepare(data_root(args.data_root), sizes, train_sizes)
    train_real = files["train"][None]
    results: dict = {
        "machine": {"cpus": __import__("os").cpu_count(), "python": platform.python_version(), "numpy": np.__version__},
        "data": {
            "real_train_sentences": files["real_train_sentences"],
            "real_pool_sentences": files["real_pool_sentences"],
        },
        "by_pool_size": [],
        "by_max_n": [],
        "by_train_size": [],
        "explain": None,
    }
    for size in sizes:
        row = run_child(train_real, files["pool"][size], None, False)
        results["by_pool_size"].append(row)
        print(
            f"pool {size:>9}: {row['seconds_total']:6.1f}s total, {row['sentences_per_s_score']:>8} sent/s scoring, {row['peak_rss_mib']} MiB",
            flush=True,
        )
    for max_n in [1, 2, 3, 4, 6, None]:
        row = run_child(train_real, files["pool"][top], max_n, False)
        results["by_max_n"].append(row)
        print(f"max_n {str(max_n):>4}: {row['seconds_total']:6.1f}s total, {row['peak_rss_mib']} MiB", flush=True)
    for size in train_sizes[1:]:
        row = run_child(files["train"][size], files["pool"][top], None, False)
        results["by_train_size"].append(row)
        atoms = row["atoms_per_n"]
        print(
            f"train {size:>7}: {row['seconds_total']:6.1f}s total, {sum(atoms.values())} atoms up to n={max(map(int, atoms))}",
            flush=True,
        )
    results["explain"] = run_child(train_real, files["pool"][top], None, True)
    print(f"explain: {results['explain']['seconds_total']:.1f}s, {results['explain']['peak_rss_mib']} MiB", flush=True)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
