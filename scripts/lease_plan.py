"""The GPU lease plan (issue 53): every device call, what it measures, its minutes and the files it brings back,
checked against the lease's limits before any lease, and run whole on the CPU in --cpu-smoke.

    python scripts/lease_plan.py table              # the plan as a Markdown table (docs/gpu.md is generated from it)
    python scripts/lease_plan.py check              # the plan's budgets against the limits; exit 1 if it does not fit
    python scripts/lease_plan.py smoke OUT [--factor F] [--only NAME ...]
                                                    # every call's command with --cpu-smoke, enforced (below)
    python scripts/lease_plan.py returned OUT       # would all of OUT come back from a call? (the scripts' end)

This file is the plan's single source: the device scripts take their budget from the command written here, and
the table in docs/gpu.md is this file's `table`. The limits (`/work/.library/device/README.md` of the workplace
that lends the machines): one command at most 10 minutes; 15 minutes of device time a lease, all calls, starts
and idle waits together; a fresh machine takes about 1.5 minutes to start and stays warm 30 s after a call; a
call brings back at most 8 files of at most 16 MiB each, 64 MiB together, no more than 2 folders down; what
travels with a call (the working tree and the carried folders) at most 64 MiB.

`check` adds up each lease: one start, the calls' planned minutes, and a 0.5-minute gap between calls (a call
made within the warm half-minute; a later one pays another start, which the margin of each lease must hold).

`smoke` runs each call's command with `--cpu-smoke` under `factor` x its planned seconds (default 1: the same
budget the GPU gets; a tiny model on the CPU needs far less), with OUT/<call> as the call's $OUT, stops it with
SIGINT at its limit (then SIGKILL 30 s later), and fails when a call overran, exited non-zero, or left in its
$OUT more than comes back (files, sizes, depth, names), or when a carried folder that exists is over 64 MiB.
Its numbers are not measurements: the smoke only proves that the plan runs end to end inside its limits.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from structseq.testing.process import run_with_budget

ROOT = Path(__file__).resolve().parents[1]

LIMITS = {
    "call_s": 600,  # one command
    "lease_s": 900,  # device time a lease: starts, calls, idle waits
    "start_s": 90,  # a fresh machine's start
    "gap_s": 30,  # between two calls on the warm machine
    "files": 8,
    "file_mib": 16,
    "total_mib": 64,
    "depth": 2,  # $OUT/a/b/file comes back, $OUT/a/b/c/file does not
    "carry_mib": 64,
}
NAME = re.compile(r"[A-Za-z0-9._-]+")


@dataclass(frozen=True)
class Call:
    lease: int
    name: str
    goal: str  # what it measures (issue 45/53 goals)
    command: str  # run from the repository root; $OUT is the call's output folder
    minutes: float  # the call's budget: its scripts stop by then
    files: tuple[str, ...]  # what comes back (the smoke checks the count, not the names)
    carry: tuple[str, ...] = ()  # git-ignored folders that travel with the call
    carry_mib: float = 0.0  # their planned size
    continues: str = ""  # in the smoke, `.device-run` is the $OUT of this earlier call (the parts it brought back)

    @property
    def seconds(self) -> int:
        return int(self.minutes * 60)


#: the working tree that travels with every call (tracked files: 6.4 MiB at the plan's writing; the smoke measures it)
TREE_MIB = 8
#: cogs.tar.gz (train, dev, test, gen: 11 MiB of text, 1.7 MiB packed), unpacked on the machine (device_common.sh)
DATA = (".device-data",)
#: what a reproduction call brings back: its record, log and the run's parts (15 MiB each: about 45 MiB a COGS run)
REPRODUCED = ("device.json", "progress.json", "reproduce.log", *(f"run.tar.gz.part-0{i}" for i in range(4)))
PLAN: list[Call] = [
    Call(
        1,
        "check",
        "the machine record; third-party imports; every gpu test (issue 45's fast-path tolerance among them, "
        "stopped with SIGINT so that gpu-tests.xml is written); the benchmark of the models the A/B leaves out",
        "STRUCTSEQ_DATA=.device-data scripts/device_check.sh $OUT --budget-s 270",
        4.5,
        (
            "device.json",
            "imports.json",
            "gpu-tests.xml",
            "check.log",
            "bench/gemm.json",
            "bench/train.json",
            "bench/decode.json",
        ),
        DATA,
        2,
    ),
    Call(
        1,
        "ab-transformer",
        "COGS Transformer >= 10,000 updates a minute, bf16 >= fp32: d15a89c against the fast path eager (TF32) and "
        "compiled, A B A B, one model per process, every batch shape warmed up; compile seconds, cold and warm cache",
        "STRUCTSEQ_DATA=.device-data scripts/device_ab.sh $OUT --only cogs/transformer --budget-s 270",
        4.5,
        ("device.json", "ab.log", "ab.tar.gz"),
        (".device-data", ".device-base"),
        4,
    ),
    Call(
        1,
        "kscale",
        "K runs at once >= 0.8 K: the COGS Transformer's summed updates a second for K = 1, 2, 4 processes, "
        "timed over the same window (eager TF32: no time for K compiles in a short call)",
        "STRUCTSEQ_DATA=.device-data scripts/device_kscale.sh $OUT --budget-s 150",
        2.5,
        ("device.json", "kscale.json", "kscale.log"),
        DATA,
        2,
    ),
    Call(
        2,
        "ab-dangle",
        "Dangle <= 0.04 s an update: the same A/B for Dangle in one round, whose compiles take minutes (the "
        "compiled arm gets half the call; cold cache only)",
        "STRUCTSEQ_DATA=.device-data scripts/device_ab.sh $OUT --only cogs/dangle --rounds 1 --budget-s 480",
        8.0,
        ("device.json", "ab.log", "ab.tar.gz"),
        (".device-data", ".device-base"),
        4,
    ),
    Call(
        2,
        "reproduce-transformer",
        "the Dangle paper's COGS Transformer, seed 1, 45,000 updates: a first chunk (continued by the next lease "
        "from its parts, kept under results/gpu/runs/)",
        "STRUCTSEQ_DATA=.device-data scripts/device_reproduce.sh $OUT --config transformer --budget-s 240",
        4.0,
        REPRODUCED,
        DATA,
        2,
    ),
    Call(
        3,
        "reproduce-continue",
        "the reproduction continued from the parts of the last call (RUN_DIR), evaluated on gen and test when done; "
        "then --config dangle and --config rdangle-sep-o4, one seed a call",
        "STRUCTSEQ_DATA=.device-data scripts/device_reproduce.sh $OUT .device-run --budget-s 540",
        9.0,
        REPRODUCED,
        (".device-data", ".device-run"),
        48,
        "reproduce-transformer",
    ),
]


def lease_seconds(calls: list[Call]) -> int:
    """A lease's device time: one start, the calls, a warm gap between two calls."""
    return LIMITS["start_s"] + sum(c.seconds for c in calls) + LIMITS["gap_s"] * max(0, len(calls) - 1)


def problems(plan: list[Call] = PLAN) -> list[str]:
    """What in the plan breaks the limits (empty: it fits)."""
    out, L = [], LIMITS
    for c in plan:
        where = f"lease {c.lease} call {c.name!r}"
        if not NAME.fullmatch(c.name):
            out.append(f"{where}: the name holds characters other than letters, digits, '.', '_', '-'")
        if c.seconds > L["call_s"]:
            out.append(f"{where}: {c.minutes} minutes, over one command's {L['call_s'] // 60}")
        if c.seconds + 60 > L["call_s"]:
            out.append(f"{where}: {c.minutes} minutes leave under a minute of the command's limit for its tails")
        if len(c.files) > L["files"]:
            out.append(f"{where}: {len(c.files)} files back, over {L['files']}")
        deep = [f for f in c.files if f.count("/") > L["depth"]]
        if deep:
            out.append(f"{where}: {', '.join(deep)} more than {L['depth']} folders down")
        if TREE_MIB + c.carry_mib > L["carry_mib"]:
            out.append(f"{where}: the tree ({TREE_MIB} MiB) and {c.carry_mib} MiB carried, over {L['carry_mib']}")
        m = re.search(r"--budget-s (\d+)", c.command)
        if not m or int(m.group(1)) > c.seconds:
            out.append(f"{where}: its command's --budget-s must be at most its {c.seconds} s")
    for lease in sorted({c.lease for c in plan}):
        s = lease_seconds([c for c in plan if c.lease == lease])
        if s > L["lease_s"]:
            out.append(f"lease {lease}: {s / 60:.1f} minutes with its start and gaps, over {L['lease_s'] // 60}")
    return out


def table(plan: list[Call] = PLAN) -> str:
    rows = [
        "| lease | call | goal | command | minutes | files back | carried |",
        "|---:|---|---|---|---:|---|---|",
    ]
    for c in plan:
        carry = ", ".join(f"`{p}`" for p in c.carry) + (f" ({c.carry_mib:g} MiB)" if c.carry else "")
        files = f"{len(c.files)}: " + ", ".join(f"`{f}`" for f in c.files)
        rows.append(f"| {c.lease} | {c.name} | {c.goal} | `{c.command}` | {c.minutes:g} | {files} | {carry} |")
    leases = sorted({c.lease for c in plan})
    total = ", ".join(f"lease {n}: {lease_seconds([c for c in plan if c.lease == n]) / 60:.1f}" for n in leases)
    rows.append("")
    rows.append(
        f"Device minutes with a {LIMITS['start_s'] / 60:g}-minute start and {LIMITS['gap_s']} s between calls "
        f"(limit {LIMITS['lease_s'] // 60}): {total}."
    )
    return "\n".join(rows)


# ---------------------------------------------------------------- the smoke


def returned(out: Path) -> list[str]:
    """What in a call's $OUT would not come back (the device tool's rules), empty when all of it would."""
    L, bad, total = LIMITS, [], 0
    files = sorted(p for p in out.rglob("*") if not p.is_dir())
    if len(files) > L["files"]:
        bad.append(f"{len(files)} files, over {L['files']}: {', '.join(str(p.relative_to(out)) for p in files)}")
    for p in files:
        rel = p.relative_to(out)
        size = p.lstat().st_size
        total += size
        if p.is_symlink() or not p.is_file():
            bad.append(f"{rel}: not a plain file")
        if size > L["file_mib"] * 2**20:
            bad.append(f"{rel}: {size / 2**20:.1f} MiB, over {L['file_mib']}")
        if len(rel.parts) - 1 > L["depth"]:
            bad.append(f"{rel}: more than {L['depth']} folders down")
        if not all(NAME.fullmatch(part) for part in rel.parts):
            bad.append(f"{rel}: a name with characters other than letters, digits, '.', '_', '-'")
    if total > L["total_mib"] * 2**20:
        bad.append(f"{total / 2**20:.1f} MiB together, over {L['total_mib']}")
    return bad


def tree_mib() -> float:
    """The tracked files' size (what travels besides the carried folders)."""
    r = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    names = [n for n in r.stdout.split("\0") if n] if r.returncode == 0 else []
    return sum((ROOT / n).stat().st_size for n in names if (ROOT / n).is_file()) / 2**20


def du_mib(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 2**20
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def run_call(c: Call, out: Path, factor: float, env: dict, outs: dict[str, Path] | None = None) -> dict:
    """One call's command in --cpu-smoke under factor x its budget: its record and what went wrong."""
    limit = max(1.0, c.seconds * factor)
    out.mkdir(parents=True, exist_ok=False)
    command = c.command.replace("$OUT", shlex.quote(str(out)))
    command = re.sub(r"--budget-s \d+", f"--budget-s {int(limit)}", command) + " --cpu-smoke"
    if c.continues and outs and c.continues in outs:
        command = command.replace(".device-run", shlex.quote(str(outs[c.continues])))
    print(f"[lease_plan] lease {c.lease} {c.name}: {command} (limit {limit:.0f}s)", flush=True)
    t = time.monotonic()
    rc = run_with_budget(["bash", "-c", command], limit, grace_s=30, cwd=ROOT, env=env)
    rc = "time limit" if rc is None else rc
    wall = time.monotonic() - t
    bad = [] if rc == 0 else [f"exit {rc}"]
    if wall > limit:
        bad.append(f"{wall:.0f}s, over its {limit:.0f}s")
    bad += returned(out)
    travels = tree_mib() + sum(du_mib(ROOT / path) for path in c.carry if (ROOT / path).exists())
    if travels > LIMITS["carry_mib"]:
        bad.append(f"the tree and its carried folders: {travels:.0f} MiB, over {LIMITS['carry_mib']}")
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if not p.is_dir())
    return {
        "lease": c.lease,
        "call": c.name,
        "limit_s": round(limit),
        "wall_s": round(wall, 1),
        "exit": rc,
        "files": files,
        "problems": bad,
    }


def smoke(plan: list[Call], out: Path, factor: float, only: list[str] | None = None) -> int:
    """Every call of `plan` (or those named in `only`) in --cpu-smoke; 0 when all fit, else 1."""
    if out.exists():
        print(f"[lease_plan] {out} exists; choose another OUT", file=sys.stderr)
        return 2
    static = problems(plan)
    out.mkdir(parents=True)
    env = {**os.environ, "PYTHON": os.environ.get("PYTHON", sys.executable), "PYTHONUNBUFFERED": "1"}
    env.setdefault("CHUNK_S", "60")  # the reproduction's chunks: a loaded CPU's start-up outlasts its smoke's 8 s
    records = []
    for c in plan:
        if only and c.name not in only:
            continue
        outs = {d.name: out / f"{d.lease}-{d.name}" for d in plan}
        records.append(run_call(c, outs[c.name], factor, env, outs))
        (out / "smoke.json").write_text(json.dumps({"factor": factor, "calls": records}, indent=1) + "\n")
    print("[lease_plan] smoke: the seconds below are a tiny model's on the CPU, not measurements", flush=True)
    for r in records:
        state = "ok" if not r["problems"] else "FAILED: " + "; ".join(r["problems"])
        print(f"  lease {r['lease']} {r['call']}: {r['wall_s']}s of {r['limit_s']}s, {len(r['files'])} files: {state}")
    for p in static:
        print(f"  plan: {p}")
    failed = static or any(r["problems"] for r in records)
    print(f"[lease_plan] smoke {'FAILED' if failed else 'passed'}: {len(records)} calls", flush=True)
    return 1 if failed else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    sub.add_parser("table", help="the plan as a Markdown table")
    sub.add_parser("check", help="the plan against the limits")
    r = sub.add_parser("returned", help="whether what a call left in OUT would all come back (exit 1 if not)")
    r.add_argument("out", type=Path)
    s = sub.add_parser("smoke", help="every call in --cpu-smoke, enforced")
    s.add_argument("out", type=Path)
    s.add_argument("--factor", type=float, default=1.0, help="each call's limit: factor x its planned seconds")
    s.add_argument("--only", nargs="*", default=None, help="only these calls (by name)")
    args = p.parse_args(argv)
    if args.what == "table":
        print(table())
        return 0
    if args.what == "check":
        bad = problems()
        for line in bad:
            print(line, file=sys.stderr)
        print("the plan fits" if not bad else f"the plan does not fit: {len(bad)} problem(s)")
        return 1 if bad else 0
    if args.what == "returned":
        bad = returned(args.out)
        for line in bad:
            print(f"would not come back: {line}")
        return 1 if bad else 0
    return smoke(PLAN, args.out, args.factor, args.only)


if __name__ == "__main__":
    sys.exit(main())
