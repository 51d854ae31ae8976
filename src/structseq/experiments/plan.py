"""The reproduction plan (`structseq plan`, or `python scripts/plan.py`): every cell of RESULTS.md as configs x
seeds, what its records hold, what is missing, what filling it costs, and the command that fills it.

    structseq plan configs/plans/reproduction.yaml                   # status table from the records
    structseq plan configs/plans/reproduction.yaml --run             # fill every missing run, in plan order
    structseq plan configs/plans/reproduction.yaml --run --cell cogs-lstm-simple,tatoeba-lstm-simple

A plan is YAML: `cells:`, a list of `{id, title, configs, seeds, set, sweep, out, runs, curve, like}`
(`set`: overrides of every run, written as the records spell them, e.g. "optim.lr=2.0e-3"; `sweep`: key -> values,
one run per value in front of `set`; `curve`: `{every, seeds, out}` as `structseq sweep`'s `--curve-*`; `like`: the id of
a cell whose runs cost about the same per update, for cells with no record yet). The status table reads only
committed records, so it is generated into RESULTS.md: the cost of a missing run is the median over the recorded
runs of the same config and overrides (training, evaluation and curve evaluations, wall clock of one core, measured
beside the machine's other job), else over the cell's recorded runs (marked *), else over the `like` cell's
(marked *), each of these scaled by the ratio of `train.max_steps`; `?` where there is none. `--probe` prices a
config that has no record by timing a short run of it (`structseq.experiments.probe`, records in
results/plan-probes.jsonl; marked ~ in the table).

    structseq plan configs/plans/reproduction.yaml --probe --cell dangle-cogs

Paths in the plan (configs, records, run directories) are relative to the working directory, as for
`structseq sweep`: run it from the repository root. `--run` goes through the missing runs seed by seed (so a seed's
configs complete together) with the sweep's `one()`: resumable, and safe to start once per core: a run another
`--run` has claimed (an flock under RUNS/.claims/) is skipped, and the records are re-read before each run. A run
that starts from another plan run's checkpoint (`train.init_from`) retrains that run first where this machine lacks
it, without recording it again.
"""

from __future__ import annotations

import fcntl
import functools
import itertools
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from structseq.experiments import probe as pricing  # `probe()` prices a config without a record
from structseq.experiments import sweep  # its `one()` trains and records a run
from structseq.run.layout import checkpoint_file


@dataclass
class Cell:
    id: str
    title: str
    configs: list[str]
    seeds: list[int]
    out: str
    runs: str
    set: list[str] = field(default_factory=list)
    sweep: dict = field(default_factory=dict)
    curve: dict = field(default_factory=dict)
    like: str | None = None

    def variants(self) -> list[tuple[str, list[str]]]:
        """(config, overrides) of every run of a seed, in plan order."""
        keys = list(self.sweep)
        combos = list(itertools.product(*(self.sweep[k] for k in keys))) or [()]
        return [
            (c, [f"{k}={v}" for k, v in zip(keys, combo)] + list(self.set)) for c in self.configs for combo in combos
        ]

    def runs_of_seed(self, seed: int) -> list[tuple[str, list[str], int]]:
        return [(c, o, seed) for c, o in self.variants()]

    @property
    def curve_out(self) -> str:
        return self.curve.get("out") or str(Path(self.out).with_name(Path(self.out).stem + "-curve.jsonl"))


#: the type of each key of a cell (checked by `load_plan`, so a malformed plan is an error naming the key)
CELL_TYPES = {
    "id": str,
    "title": str,
    "configs": list,
    "seeds": list,
    "out": str,
    "runs": str,
    "set": list,
    "sweep": dict,
    "curve": dict,
    "like": str,
}


def _check_cell(c: dict, where: str) -> None:
    """A ConfigError naming the cell and key for a value of the wrong type (seeds: integers; configs: existing
    files; sweep: key -> list of values; curve: every, seeds, out)."""
    from structseq.errors import ConfigError

    for key, kind in CELL_TYPES.items():
        if key in c and c[key] is not None and not isinstance(c[key], kind):
            raise ConfigError(f"{where}: `{key}` must be a {kind.__name__}, got {c[key]!r}")
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in c["seeds"]):
        raise ConfigError(f"{where}: `seeds` must be a list of integers, got {c['seeds']!r}")
    if not all(isinstance(x, str) for x in c["configs"]):
        raise ConfigError(f"{where}: `configs` must be a list of config files, got {c['configs']!r}")
    for key in ("seeds", "configs"):  # one run recorded twice would count twice in a cell's mean
        twice = sorted({str(x) for x in c[key] if c[key].count(x) > 1})
        if twice:
            raise ConfigError(f"{where}: `{key}` gives {', '.join(twice)} twice")
    for cfg in c["configs"]:
        if not Path(cfg).is_file():
            raise ConfigError(f"{where}: config {cfg} does not exist")
    for key, values in (c.get("sweep") or {}).items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"{where}: `sweep.{key}` must be a non-empty list of values, got {values!r}")
    curve = c.get("curve") or {}
    unknown = set(curve) - {"every", "seeds", "out"}
    if unknown or not isinstance(curve.get("every", 0), int) or not isinstance(curve.get("seeds", []), list):
        raise ConfigError(f"{where}: `curve` must be {{every: N, seeds: [..], out: FILE}}, got {curve!r}")


def load_plan(path: str) -> list[Cell]:
    """The plan's cells; a missing or unreadable file, bad YAML, an unknown or missing key or a value of the wrong
    type is an error naming the file and the cell."""
    from structseq.errors import ConfigError
    from structseq.textio import read_text
    from structseq.yamlio import load_yaml

    raw = load_yaml(read_text(path), path)
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        raise ConfigError(f"{path}: expected a mapping with a list under `cells`")
    cells, known = [], set(Cell.__dataclass_fields__)
    for i, c in enumerate(raw["cells"]):
        where = f"{path}: cell {i + 1} ({c.get('id', 'no id') if isinstance(c, dict) else c!r})"
        if not isinstance(c, dict):
            raise ConfigError(f"{where}: expected a mapping")
        if set(c) - known:
            raise ConfigError(
                f"{where}: unknown key(s) {', '.join(sorted(set(c) - known))}; known: {', '.join(sorted(known))}"
            )
        missing = [k for k in ("id", "title", "configs", "seeds", "out", "runs") if k not in c]
        if missing:
            raise ConfigError(f"{where}: missing {', '.join(missing)}")
        _check_cell(c, where)
        cells.append(Cell(**{**c, "set": [str(s) for s in c.get("set") or []]}))
    ids = [c.id for c in cells]
    for c in cells:
        if ids.count(c.id) > 1:
            raise ConfigError(f"{path}: cell id {c.id!r} given {ids.count(c.id)} times")
        if c.like is not None and c.like not in ids:
            raise ConfigError(f"{path}: cell {c.id}: `like: {c.like}` names no cell")
    return cells


def _key(config: str, overrides, seed: int) -> tuple:
    return config, tuple(sorted(overrides)), seed


def read_records(cells: list[Cell]) -> dict[tuple, dict]:
    """(config, sorted overrides, seed) -> {"cost": seconds (train + evaluations + curve evaluations), "diverged"}."""
    runs: dict[tuple, dict] = {}
    dirs: dict[str, tuple] = {}
    for out in sorted({c.out for c in cells}):
        for r in sweep.read_jsonl(out):
            k = _key(r["config"], r.get("overrides", []), r["seed"])
            run = runs.setdefault(k, {"train": 0.0, "eval": 0.0, "diverged": False})
            run["diverged"] |= bool(r.get("diverged"))
            run["train"] = max(run["train"], r.get("train_wall_s") or 0.0)
            run["eval"] += r.get("eval_wall_s") or 0.0
            dirs[r.get("run_dir", "")] = k
    for curve in sorted({c.curve_out for c in cells if c.curve}):
        for r in sweep.read_jsonl(curve):
            if r.get("run_dir") in dirs:
                runs[dirs[r["run_dir"]]]["eval"] += r.get("eval_wall_s") or 0.0
    return {k: {"cost": v["train"] + v["eval"], "diverged": v["diverged"]} for k, v in runs.items()}


def read_probes(path: str) -> dict[tuple, float]:
    """(config, sorted overrides) -> the cost in seconds that `--probe` measured (the newest probe wins)."""
    probes: dict[tuple, float] = {}
    for r in sweep.read_jsonl(path):
        probes[_key(r["config"], r.get("overrides", []), 0)[:2]] = r["cost_s"]
    return probes


@functools.cache
def _steps_of(config: str, overrides: tuple) -> int | None:
    from structseq.config import load_config

    return load_config(config, list(overrides)).train.max_steps


def _max_steps(config: str, overrides) -> int | None:
    """The run's `train.max_steps` (None: trained by epochs)."""
    return _steps_of(config, tuple(overrides))


def _scale(steps: int | None, recorded: int | None) -> float:
    """Cost factor from a recorded run to one of `steps` updates: a cell priced from another budget's runs
    (`like`: a 4x longer curve) costs in proportion to its updates."""
    return steps / recorded if steps and recorded else 1.0


def status(cells: list[Cell], done: dict[tuple, dict], probes: dict[tuple, float] | None = None) -> list[dict]:
    """Per cell: runs planned and recorded, seeds finished (every run recorded, none diverged), seeds with a
    diverged run (recorded: a result, not a missing run) and the hours its missing runs cost."""
    probes = probes or {}
    by_id = {c.id: c for c in cells}
    finished = {k: v["cost"] for k, v in done.items() if not v["diverged"]}  # diverged runs stopped early

    def costs(cell: Cell, steps: int | None) -> list[float]:
        """The cell's recorded costs, each scaled to `steps` updates from its own run's."""
        return [
            finished[_key(*r)] * _scale(steps, _max_steps(*r[:2]))
            for s in cell.seeds
            for r in cell.runs_of_seed(s)
            if _key(*r) in finished
        ]

    rows = []
    for cell in cells:
        planned = [r for s in cell.seeds for r in cell.runs_of_seed(s)]
        missing = [r for r in planned if _key(*r) not in done]
        complete = [s for s in cell.seeds if all(_key(*r) in finished for r in cell.runs_of_seed(s))]
        lost = [s for s in cell.seeds if any(done.get(_key(*r), {}).get("diverged") for r in cell.runs_of_seed(s))]
        hours, rough, probed, unknown = 0.0, False, False, 0
        for config, overrides, _ in missing:
            variant = _key(config, overrides, 0)[:2]
            same = [v for (c, o, _), v in finished.items() if (c, o) == variant]
            if not same and variant in probes:
                hours += probes[variant] / 3600
                probed = True
                continue
            steps = None if same else _max_steps(config, overrides)
            pool, similar, seen = same or costs(cell, steps), cell.like, {cell.id}
            while not pool and similar and similar not in seen:  # follow `like` until a cell has records
                seen.add(similar)
                pool, similar = costs(by_id[similar], steps), by_id[similar].like
            rough |= not same
            if pool:
                hours += statistics.median(pool) / 3600
            else:
                unknown += 1
        rows.append(
            {
                "cell": cell,
                "planned": len(planned),
                "done": len(planned) - len(missing),
                "complete": complete,
                "diverged": lost,
                "missing": missing,
                "hours": None if unknown else hours,
                "rough": rough and bool(missing),
                "probed": probed,
            }
        )
    return rows


def _seeds(seeds: list[int]) -> str:
    if not seeds:
        return "none"
    if seeds == list(range(seeds[0], seeds[-1] + 1)) and len(seeds) > 2:
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))


def probe_accuracy(done: dict[tuple, dict], probes: dict[tuple, float]) -> str:
    """How the probes compared with the runs recorded after them: recorded / probed cost per (config, overrides) that
    has both (median over its finished seeds); '' when none has."""
    ratios = []
    for variant, probed in sorted(probes.items()):
        costs = [v["cost"] for (c, o, _), v in done.items() if (c, o) == variant and not v["diverged"]]
        if costs and probed > 0:
            ratios.append(statistics.median(costs) / probed)
    if not ratios:
        return ""
    return (
        f"Probes against the runs recorded since: recorded / probed cost {statistics.median(ratios):.2f} (median "
        f"over {len(ratios)} configs, range {min(ratios):.2f}-{max(ratios):.2f})."
    )


def render(rows: list[dict], plan: str) -> str:
    lines = [
        "| cell | seeds asked | seeds finished | runs recorded | CPU-hours to fill (1 core) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        c = r["cell"]
        need = (
            "-"
            if not r["missing"]
            else (
                "?"
                if r["hours"] is None
                else f"{r['hours']:.1f}{'*' if r['rough'] else ''}{'~' if r['probed'] else ''}"
            )
        )
        lost = f" (diverged: {_seeds(r['diverged'])})" if r["diverged"] else ""
        lines.append(
            f"| {c.title} (`{c.id}`) | {_seeds(c.seeds)} | {_seeds(r['complete'])}{lost} | "
            f"{r['done']} / {r['planned']} | {need} |"
        )
    todo = [r["cell"].id for r in rows if r["missing"]]
    total = sum(r["hours"] or 0.0 for r in rows if r["missing"])
    lines += [
        "",
        f"{len(todo)} of {len(rows)} cells incomplete, about {total:.0f} CPU-hours of one core "
        "(`*`: estimated from the cell's other configs or a similar cell; `~`: extrapolated from a short "
        "timing run, `--probe`; `?`: no recorded run to estimate from, not counted). Fill one (or all, "
        "leaving out `--cell`; start it once per core):",
        "",
        "```bash",
        f"structseq plan {plan} --run --cell {' '.join(todo[:1]) or 'ID'}",
        "```",
    ]
    return "\n".join(lines)


def _start_point(cells: list[Cell], overrides: list[str]) -> str:
    """A run that starts from another run (`train.init_from=DIR`) needs DIR's final checkpoint, which only the
    machine that trained it has (runs/ is not committed): retrain DIR first from the plan run that names it, without
    a second record. '' when the run has no init_from or DIR is complete; an error when no plan run makes DIR."""
    start = next((o.partition("=")[2] for o in overrides if o.startswith("train.init_from=")), None)
    if start is None:
        return ""
    for cell in cells:
        for seed in cell.seeds:
            for config, over, _ in cell.runs_of_seed(seed):
                if Path(cell.runs) / sweep.run_name(config, seed, over) == Path(start):
                    with open(_claims(cell) / f"{Path(start).name}.lock", "a") as lock:
                        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)  # another --run may be training it: wait
                        print(f"{cell.id}: {start}: the next run starts from it; training it if unfinished", flush=True)
                        return sweep.train_only(config, seed, cell.runs, over)
    if checkpoint_file(start, "last").exists():
        return ""
    raise SystemExit(f"train.init_from={start}: no such run here, and no run of the plan makes it")


def _claims(cell: Cell) -> Path:
    claims = Path(cell.runs) / ".claims"
    claims.mkdir(parents=True, exist_ok=True)
    return claims


def _chosen(cells: list[Cell], ids: list[str] | None) -> list[Cell]:
    """The cells named by `ids`, in that order (all when None); an unknown id is an error listing the cells."""
    by_id = {c.id: c for c in cells}
    unknown = [i for i in ids or [] if i not in by_id]
    if unknown:
        from structseq.errors import ConfigError

        raise ConfigError(f"--cell: no cell {', '.join(unknown)} in the plan; cells: {', '.join(by_id)}")
    return [by_id[i] for i in ids] if ids else cells


def run(cells: list[Cell], ids: list[str] | None, dry: bool) -> int:
    from structseq.run.directory import RunDirError

    rep = sweep
    for cell in _chosen(cells, ids):
        for seed in cell.seeds:
            for config, overrides, _ in cell.runs_of_seed(seed):
                if _key(config, overrides, seed) in read_records(cells):
                    continue
                name = rep.run_name(config, seed, overrides)
                if dry:
                    print(f"{cell.id}: would run {name}")
                    continue
                with open(_claims(cell) / f"{name}.lock", "a") as lock:
                    try:
                        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except OSError:
                        print(f"{cell.id}: {name} is claimed by another --run; next", flush=True)
                        continue
                    if _key(config, overrides, seed) in read_records(cells):  # recorded while we waited
                        continue
                    every = cell.curve.get("every", 0) if seed in cell.curve.get("seeds", []) else 0
                    msg = _start_point(cells, overrides)
                    if msg:
                        print(f"{cell.id}: {msg}", flush=True)
                        if msg.endswith(rep.INTERRUPTED):
                            return 128 + 15
                    try:
                        msg = rep.one(config, seed, cell.runs, cell.out, overrides, None, every, cell.curve_out)
                    except RunDirError as e:  # trained by a process outside the plan (it holds the run's lock)
                        msg = f"skipped: {e}"
                print(f"{cell.id}: {msg}", flush=True)
                if msg.endswith(rep.INTERRUPTED):
                    return 128 + 15
    return 0


def probe(cells: list[Cell], ids: list[str] | None, out: str, steps: tuple[int, int], batches: int) -> int:
    """`--probe`: for each (config, overrides) of the chosen cells with a missing run and no finished record, time
    a short run (`pricing.probe`) and append its extrapolated cost to `out`; already probed variants are skipped."""
    done, probed = read_records(cells), read_probes(out)
    finished = {(c, o) for (c, o, _), v in done.items() if not v["diverged"]}
    for cell in _chosen(cells, ids):
        for config, overrides in cell.variants():
            variant = _key(config, overrides, 0)[:2]
            seeds = [s for s in cell.seeds if _key(config, overrides, s) not in done]
            if not seeds or variant in finished or variant in probed:
                continue
            curve = cell.curve.get("every", 0) if seeds[0] in cell.curve.get("seeds", []) else 0
            rec = pricing.probe(config, seeds[0], overrides, steps, batches, curve_every=curve)
            sweep.append_records(out, [rec])
            probed[variant] = rec["cost_s"]
            print(
                f"{cell.id}: {config} {' '.join(overrides)}: {rec['s_per_update']:.3f} s/update, about "
                f"{rec['cost_s'] / 3600:.2f} CPU-hours per run",
                flush=True,
            )
    return 0


def plan_command(
    plan: str,
    run_: bool = False,
    ids: list[str] | None = None,
    dry_run: bool = False,
    probe_: bool = False,
    probe_steps: tuple[int, int] = (10, 40),
    probe_batches: int = 2,
    probes: str = "results/plan-probes.jsonl",
) -> int:
    """`structseq plan`: the status table (or `--run`, `--probe`); a setting out of range is a ConfigError naming
    the option, before anything runs."""
    from structseq.errors import ConfigError

    if probe_batches < 1:
        raise ConfigError(f"--probe-batches {probe_batches}: time at least 1 decoding batch per test split")
    if not 0 < probe_steps[0] < probe_steps[1]:
        raise ConfigError(f"--probe-steps {probe_steps[0]} {probe_steps[1]}: give 0 < S1 < S2")
    if dry_run and not run_:
        raise ConfigError("--dry-run lists the runs --run would start: give --run too")
    cells = load_plan(plan)
    _chosen(cells, ids)  # an unknown --cell is an error naming the plan's cells
    if run_:
        return run(cells, ids, dry_run)
    if probe_:
        return probe(cells, ids, probes, tuple(probe_steps), probe_batches)
    done, recorded_probes = read_records(cells), read_probes(probes)
    rows = [r for r in status(cells, done, recorded_probes) if not ids or r["cell"].id in ids]
    print(render(rows, plan))
    accuracy = probe_accuracy(done, recorded_probes)
    if accuracy:
        print("\n" + accuracy)
    return 0
