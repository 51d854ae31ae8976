"""Tables of the GPU records in results/gpu/ (what scripts/device_check.sh and device_reproduce.sh bring back).

    structseq report gpu tests results/gpu/2026-11-26-h200/check/gpu-tests.xml [more.xml ...]
    structseq report gpu train results/gpu/2026-11-26-h200/check/bench
    structseq report gpu decode results/gpu/2026-11-26-h200/check/bench
    structseq report gpu ab --a DIR DIR --b DIR DIR [--label-a A --label-b B]
    structseq report gpu reproduce results/gpu/2026-11-26-h200/reproduce

Each table names the device, torch and CUDA versions and the commit from the records themselves; `ab` gives
the median of each side over its runs (alternated A B A B when they were measured) and their ratio.
"""

from __future__ import annotations

import argparse
import re
import statistics
import xml.etree.ElementTree as ET
from pathlib import Path

import typer

from structseq.errors import DataError, StructseqError
from structseq.textio import read_text

from .kinds import FORMAT, Command
from .records import read_json


def _machine(m: dict) -> str:
    return (
        f"{m.get('device_name', m.get('device'))}, torch {m.get('torch')}, CUDA {m.get('cuda')}, "
        f"{m.get('date', '')[:10]}, commit {str(m.get('git_commit', ''))[:7]}"
    )


def _section(folder: Path, name: str) -> dict:
    return read_json(folder / f"{name}.json")


def _data(row: dict) -> str:
    return "generated" if "generated" in row.get("data", "") else row.get("data", "").split(" ")[0]


def tests(paths: list[Path]) -> str:
    lines = ["| record | passed | failed | skipped | failed tests |", "|---|---:|---:|---:|---|"]
    for path in paths:
        try:
            cases = list(ET.parse(path).getroot().iter("testcase"))
        except (OSError, ET.ParseError) as e:
            raise DataError(f"not a JUnit XML file ({e})", path) from None
        failed = [c.get("name") for c in cases if c.find("failure") is not None or c.find("error") is not None]
        skipped = [c for c in cases if c.find("skipped") is not None]
        passed = len(cases) - len(failed) - len(skipped)
        names = ", ".join(f"`{n}`" for n in failed) or "none"
        lines.append(f"| `{path}` | {passed} | {len(failed)} | {len(skipped)} | {names} |")
    return "\n".join(lines)


def train(folder: Path) -> str:
    gemm = {r["dtype"]: r["flops_per_s"] for r in _section(folder, "gemm")["rows"]}
    rec = _section(folder, "train")
    lines = [
        f"Training, {_machine(rec['machine'])}; bf16 GEMM {gemm.get('bf16', 0) / 1e12:.0f} TFLOP/s, fp32 "
        f"{gemm.get('fp32', 0) / 1e12:.0f}, TF32 {gemm.get('tf32', 0) / 1e12:.0f} (same process).",
        "",
        "| model | data | precision | target tokens/s | s/update | peak MiB | MFU (bf16 GEMM) |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rec["rows"]:
        if "error" in r:
            lines.append(f"| {r['model']} | {_data(r)} | {r.get('precision', '')} | failed: {r['error']} | | | |")
            continue
        lines.append(
            f"| {r['model']} | {_data(r)} | {r['precision']} | {r['target_tokens_per_s']:,.0f} | "
            f"{r['s_per_update']:.3f} | {r['peak_memory_mib']:,.0f} | {r['mfu_vs_bf16_gemm']:.4f} |"
        )
    return "\n".join(lines)


def decode(folder: Path) -> str:
    rec = _section(folder, "decode")
    beams: dict[str, dict[int, dict]] = {}
    for r in rec["rows"]:
        beams.setdefault(r["model"], {})[r["beam"]] = r
    lines = [
        f"Decoding, {_machine(rec['machine'])} (fp32, the task's own decoding, validation sentences).",
        "",
        "| model | data | greedy sentences/s | beam-5 sentences/s | output tokens (greedy) |",
        "|---|---|---:|---:|---:|",
    ]
    for model, by_beam in beams.items():
        g, b = by_beam.get(1, {}), by_beam.get(5, {})
        row = g or b
        lines.append(
            f"| {model} | {_data(row)} | {g.get('sentences_per_s', float('nan')):,.1f} | "
            f"{b.get('sentences_per_s', float('nan')):,.1f} | {g.get('output_tokens', float('nan')):.1f} |"
        )
    return "\n".join(lines)


def ab(a: list[Path], b: list[Path], label_a: str, label_b: str) -> str:
    def runs(folders: list[Path], key: str = "target_tokens_per_s") -> dict[tuple[str, str], list[float]]:
        out: dict[tuple[str, str], list[float]] = {}
        for f in folders:
            for r in _section(f, "train")["rows"]:
                if key in r:
                    out.setdefault((r["model"], r["precision"]), []).append(r[key])
        return out

    ra, rb = runs(a), runs(b)
    la, lb = runs(a, "launches_per_update"), runs(b, "launches_per_update")  # recorded since issue 45
    devices = {_section(f, "train")["machine"].get("device_name") for f in (*a, *b)}
    if len(devices) > 1:
        raise StructseqError(f"the two sides ran on different devices ({', '.join(map(str, devices))}): not comparable")
    machine = _machine(_section(a[0], "train")["machine"])
    lines = [
        f"{machine}; training target tokens/s, the median of each side's runs (listed).",
        "",
        f"| model | precision | {label_a} | {label_b} | {label_a} / {label_b} | runs ({label_a}; {label_b}) |",
        "|---|---|---:|---:|---:|---|",
    ]
    for key in ra:
        if key not in rb:
            continue
        ma, mb = statistics.median(ra[key]), statistics.median(rb[key])
        each = f"{', '.join(f'{x:,.0f}' for x in ra[key])}; {', '.join(f'{x:,.0f}' for x in rb[key])}"
        lines.append(f"| {key[0]} | {key[1]} | {ma:,.0f} | {mb:,.0f} | {ma / mb:.2f} | {each} |")
    if la:
        lines += ["", f"Host launches per update (median): {label_a} against {label_b} (blank: not recorded).", ""]
        lines += [f"| model | precision | {label_a} | {label_b} |", "|---|---|---:|---:|"]
        for key, v in la.items():
            other = f"{statistics.median(lb[key]):,.0f}" if key in lb else ""
            lines.append(f"| {key[0]} | {key[1]} | {statistics.median(v):,.0f} | {other} |")
    return "\n".join(lines)


def reproduce(folder: Path) -> str:
    progress, machine = _section(folder, "progress"), _section(folder, "device")
    log = read_text(folder / "reproduce.log") if (folder / "reproduce.log").exists() else ""
    last = re.findall(r"step (\d+): loss ([0-9.]+)", log)
    rate, done, total = progress["updates_per_min"], progress["steps"], progress["max_steps"]
    cfg = progress.get("config", {})
    lines = [
        f"{_machine(machine)}; `{cfg.get('model', {}).get('arch')}` with positions "
        f"`{cfg.get('model', {}).get('positions')}` (M = {cfg.get('model', {}).get('max_relative')}), "
        f"bf16 {cfg.get('train', {}).get('bf16')}, seed {cfg.get('train', {}).get('seed')}.",
        "",
        "| updates done | of | wall s | updates/min | minutes for all at that rate | last logged loss | gen | test |",
        "|---:|---:|---:|---:|---:|---|---|---|",
    ]
    ev = progress.get("eval", {})
    em = {k: f"{ev[k]['exact_match']:.4f}" if "exact_match" in ev.get(k, {}) else "not yet" for k in ("gen", "test")}
    loss = f"{last[-1][1]} (step {last[-1][0]})" if last else "none"
    lines.append(
        f"| {done:,} | {total:,} | {progress['wall_s']:.0f} | {rate or 0:,.0f} | "
        f"{f'{total / rate:.1f}' if rate else '-'} | {loss} | "
        f"{em['gen']} | {em['test']} |"
    )
    return "\n".join(lines)


#: `structseq report gpu TABLE ...`: a command per table
command = typer.Typer(add_completion=False)


def _args(**params) -> argparse.Namespace:
    return argparse.Namespace(kind="gpu", render=render, **params)


@command.command("tests", cls=Command)
def _tests(
    xml: list[Path] = typer.Argument(..., help="junit XML files of the GPU test run"), format: str = FORMAT
) -> argparse.Namespace:
    """GPU test outcomes per junit file.

    Example: structseq report gpu tests results/gpu/2026-11-26-h200/check/gpu-tests.xml"""
    return _args(table="tests", xml=xml, format=format)


def _folder(name: str, example: str):
    def table(
        folder: Path = typer.Argument(..., help=f"the folder of the {name} records"), format: str = FORMAT
    ) -> argparse.Namespace:
        return _args(table=name, folder=folder, format=format)

    table.__doc__ = f"The {name} records of one folder.\n\nExample: structseq report gpu {name} {example}"
    command.command(name, cls=Command)(table)


for _name, _example in (
    ("train", "results/gpu/2026-11-26-h200/check/bench"),
    ("decode", "results/gpu/2026-11-26-h200/check/bench"),
    ("reproduce", "results/gpu/2026-11-26-h200/reproduce"),
):
    _folder(_name, _example)


@command.command("ab", cls=Command)
def _ab(
    a: list[Path] = typer.Option(..., "--a", help="the first setting's record folders, one or more"),
    b: list[Path] = typer.Option(..., "--b", help="the second setting's record folders, one or more"),
    label_a: str = typer.Option("A", "--label-a", help="the first setting's name in the table"),
    label_b: str = typer.Option("B", "--label-b", help="the second setting's name in the table"),
    format: str = FORMAT,
) -> argparse.Namespace:
    """Two settings' training throughput: the median of each over its runs, and their ratio.

    Example: structseq report gpu ab --a DIR DIR --b DIR DIR --label-a eager --label-b compiled"""
    return _args(table="ab", a=a, b=b, label_a=label_a, label_b=label_b, format=format)


def render(args: argparse.Namespace) -> str:
    if args.table == "tests":
        return tests(args.xml)
    if args.table == "ab":
        return ab(args.a, args.b, args.label_a, args.label_b)
    return {"train": train, "decode": decode, "reproduce": reproduce}[args.table](args.folder)
