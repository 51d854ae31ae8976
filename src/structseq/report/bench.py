"""Markdown tables of the benchmark JSON files (docs/performance.md and RESULTS.md are generated from them).

    structseq report bench KIND FILE [FILE ...]        # or LABEL=FILE where a kind compares measurements

Kinds (each names the benchmark that writes its JSON):
  fairseq-train     bench_train.py --only fairseq: per-round tokens/s of both systems and the ratio (LABEL=FILE ...)
  models            bench_train.py --only models: training and decoding throughput, memory, MFU per model
  lexicon           bench_lexicon.py: seconds and memory per learner and dataset
  dangle-intervals  bench_dangle.py --only intervals: cost of R-Dangle against the Transformer per interval
  dangle-formulations  bench_dangle.py --only formulations: our batched path against the authors' (LABEL=FILE)
  dangle-flops      bench_dangle.py --only intervals (FLOP counts): time, FLOPs and FLOP rate vs the Transformer
  search            bench_commits.py --decode: decoding before / after a change, same outputs (LABEL=FILE ...)
  decode-fairseq    bench_decode_fairseq.py: sentences/s against fairseq-generate (later files replace rows)
  lstm              bench_lstm.py: two implementations (reference vs restructured loop, fp32 vs bf16), train, decode
  profile           profile_train_step.py: where the step goes and the GEMM-bound ceiling (FILE ...)
  commits           bench_commits.py (training): two checkouts on the same batches, per config (LABEL=FILE ...)
  compile           bench_compile.py: torch.compile against eager, steady state and cold start
  context           bench_context.py: context-aware decoders against sequential as the context grows

Each table ends with the load averages the files recorded, so a reader sees how quiet the machine was.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Literal

import typer

from .kinds import FORMAT
from .records import read_json, read_labelled, table


def _load_avg(d: dict) -> tuple | None:
    """(before, after) one-minute load averages, whichever key the benchmark used."""
    m = d.get("machine", {})
    for a, b in (
        ("load_avg_start", "load_avg_end"),
        ("loadavg_before", "loadavg_after"),
        ("load_before", "load_after"),
    ):
        src = m if a in m else d
        if a in src and b in src:
            return src[a][0], src[b][0]
    return None


def _loads(named: list[tuple[str, dict]]) -> str:
    parts = [
        (f"{label}: " if label else "") + f"{la[0]:.1f} -> {la[1]:.1f}" for label, d in named if (la := _load_avg(d))
    ]
    return "\n\nLoad average (1 min) before -> after: " + "; ".join(parts) + "." if parts else ""


def fairseq_train(args: list[str]) -> str:
    named, rows, medians = read_labelled(args), [], []
    for label, d in named:
        fc = d["fairseq_comparison"]
        ratios = fc["round_ratios_structseq_over_fairseq"]
        for i, (f, s) in enumerate(zip(fc["runs"]["fairseq"], fc["runs"]["structseq"])):
            rows.append(
                [label, i + 1, f"{f['target_tokens_per_s']:.0f}", f"{s['tokens_per_s']:.0f}", f"{ratios[i]:.2f}"]
            )
        mfu = [s["mfu"] for s in fc["runs"]["structseq"]]
        non_pad = [s["mfu_non_padding"] for s in fc["runs"]["structseq"] if "mfu_non_padding" in s]
        medians.append(
            [
                label,
                f"**{statistics.median(ratios):.2f}x**",
                f"{min(mfu):.2f}-{max(mfu):.2f}",
                f"{min(non_pad):.2f}-{max(non_pad):.2f}" if non_pad else "-",
            ]
        )
    return "\n".join(
        table(["measurement", "round", "fairseq tok/s", "structseq tok/s", "ratio"], rows)
        + [""]
        + table(["measurement", "median of the round ratios", "structseq MFU", "MFU over non-padding tokens"], medians)
    ) + _loads(named)


def models(args: list[str]) -> str:
    d = read_json(args[0])
    rows = []
    for name, m in d["models"].items():
        t, dec = m["train"], m.get("decode", {})
        rows.append(
            [
                f"{name} ({t['parameters'] / 1e6:.1f}M params)",
                f"{t['tokens_per_s']:.0f}",
                f"{t['s_per_update']:.2f}",
                f"{t['peak_rss_mb']:.0f} MB",
                f"{t['mfu']:.2f}",
                f"{t['mfu_non_padding']:.2f}",
                f"{dec['beam1']['sentences_per_s']:.1f}" if "beam1" in dec else "-",
                f"{dec['beam5']['sentences_per_s']:.1f}" if "beam5" in dec else "-",
            ]
        )
    return "\n".join(
        table(
            [
                "model",
                "train target tok/s",
                "s/update",
                "peak RSS",
                "MFU",
                "MFU (non-padding)",
                "greedy sent/s",
                "beam 5 sent/s",
            ],
            rows,
        )
    ) + _loads([("", d)])


def lexicon(args: list[str]) -> str:
    d = read_json(args[0])
    cells: dict[str, dict[str, str]] = {}
    pairs: dict[str, int] = {}
    for r in d.get("learners", []):
        cells.setdefault(r["method"], {})[r["dataset"]] = f"{r['seconds']:.2f} s, +{r['peak_mb']:.0f} MB"
        pairs[r["dataset"]] = r["pairs"]
    out = table(
        ["learner"] + [f"{ds} train ({n:,} pairs)" for ds, n in pairs.items()],
        [[m] + [c.get(ds, "-") for ds in pairs] for m, c in cells.items()],
    )
    compare = d.get("compare_scan") or {}
    if compare:
        rows = []
        for model, row in compare.get("models", {}).items():
            if not isinstance(row, dict) or "ours" not in row:
                continue
            rows.append(
                [
                    model,
                    f"{row['ours']['seconds']:.2f} s",
                    f"{row['systran-align']['seconds']:.2f} s" if "systran-align" in row else "-",
                    f"{row['eflomal']['seconds']:.2f} s" if "eflomal" in row else "-",
                ]
            )
        out += ["", *table(["SCAN, both directions, 5 iterations", "ours", "systran-align", "eflomal"], rows)]
    return "\n".join(out) + _loads([("", d)])


def dangle_intervals(args: list[str]) -> str:
    d = read_json(args[0])
    rows = [
        [
            name,
            f"{m['s_per_update']:.2f}",
            f"{m['cost_vs_transformer']:.1f}x",
            f"{m['target_tokens_per_s']:.0f}",
            f"{m['peak_rss_mb']:.0f}",
        ]
        for name, m in d["intervals"].items()
    ]
    return "\n".join(
        table(["model", "s/update", "cost vs Transformer", "target tok/s", "peak RSS (MB)"], rows)
    ) + _loads([("", d)])


def dangle_formulations(args: list[str]) -> str:
    named, rows = read_labelled(args), []
    for label, d in named:
        for point, f in d["formulations"].items():
            ours, a, b = f["batched"], f["per_step"], f["batch_copy"]
            agree = max(f["agreement"]["max_abs_logprob_diff"].values())
            rows.append(
                [
                    label,
                    point,
                    f"{ours['s_per_update']:.2f}",
                    f"{a['s_per_update']:.2f} (**{f['speedup_over_per_step']:.2f}x** slower)",
                    f"{b['s_per_update']:.2f} (**{f['speedup_over_batch_copy']:.2f}x**)",
                    f"{ours['peak_rss_mb']:.0f} / {a['peak_rss_mb']:.0f} / {b['peak_rss_mb']:.0f}",
                    f"{agree:.1e}",
                ]
            )
    header = [
        "size",
        "interval",
        "ours (batched) s/update",
        "(a) per-step (Dangle's authors)",
        "(b) batch copy per point (R-Dangle's authors)",
        "peak RSS MB ours / (a) / (b)",
        "max log-prob difference",
    ]
    return "\n".join(table(header, rows)) + _loads(named)


def dangle_flops(args: list[str]) -> str:
    d = read_json(args[0])
    base = d["intervals"]["transformer"]
    rows = []
    for name, m in d["intervals"].items():
        rows.append(
            [
                name,
                f"{m['s_per_update']:.2f}",
                f"{m['s_per_update'] / base['s_per_update']:.1f}x",
                f"{m['flops_per_target_token'] / 1e6:.1f} M",
                f"{m['flops_per_target_token'] / base['flops_per_target_token']:.1f}x",
                f"{m['flops_per_s'] / base['flops_per_s']:.2f}",
                f"{m['mfu']:.2f}",
            ]
        )
    return "\n".join(
        table(
            [
                "model",
                "s/update",
                "time vs Transformer",
                "FLOPs / target token",
                "FLOPs vs Transformer",
                "FLOP/s vs Transformer",
                "MFU",
            ],
            rows,
        )
    ) + _loads([("", d)])


def search(args: list[str]) -> str:
    named, rows = read_labelled(args), []
    for label, d in named:
        for beam, b in d["beams"].items():
            rows.append(
                [
                    label,
                    "greedy" if str(beam) == "1" else f"beam {beam}",
                    f"{b['old_median']:.1f}",
                    f"{b['new_median']:.1f}",
                    f"{b['ratio_median']:.2f}",
                    "equal" if b["same_outputs"] else "**differ**",
                ]
            )
    return "\n".join(table(["model", "decoding", "before", "after", "ratio", "outputs"], rows)) + _loads(named)


def _batch(b) -> str:
    if isinstance(b, int):
        return f"{b} sentences"
    kind, _, n = str(b).partition(" ")
    return f"{int(n):,} tokens" if kind == "max_tokens" else str(b)


def _cpu(row: dict) -> str:  # process CPU s, fairseq / structseq (median per-round ratio); "-": not recorded
    c = row.get("process_cpu_s")
    return "-" if c is None else f"{c['fairseq']:.1f} / {c['structseq']:.1f} ({row['process_cpu_ratio_median']:.2f})"


def decode_fairseq(args: list[str]) -> str:
    files = [(Path(a).name, read_json(a)) for a in args]
    by_key: dict[tuple, dict] = {}
    for _, d in files:
        for r in d["rows"]:
            by_key[(r["setting"], r["beam"])] = r  # a later measurement of the same setting replaces the earlier
    rows = []
    for (setting, beam), r in sorted(by_key.items()):
        b, sps, wall = r["batch"], r["sentences_per_s"], r["process_wall_s"]
        ratio = f"{r['ratio_median_of_rounds']:.2f} (" + ", ".join(f"{x:.2f}" for x in r["round_ratios"]) + ")"
        rows.append(
            [
                f"{setting}: {_batch(b['fairseq'])} / {_batch(b['structseq'])}",
                "greedy" if beam == 1 else f"beam {beam}",
                f"{sps['fairseq']:.1f}",
                f"{sps['structseq']:.1f}",
                ratio,
                f"{wall['fairseq']:.1f} / {wall['structseq']:.1f}",
                _cpu(r),
            ]
        )
    header = ["batches (fairseq / structseq)", "decoding", "fairseq sent/s", "structseq sent/s", "ratio (rounds)"]
    header += ["process wall s, fairseq / structseq", "process CPU s, fairseq / structseq (ratio)"]
    return "\n".join(table(header, rows)) + _loads(files)


def lstm(args: list[str]) -> str:
    d = read_json(args[0])
    first = next(iter(d["train"].values()), {})
    a, b = first.get("impls", ["reference", "fast"])  # the two implementations compared, the same in every entry

    def row(name, m, unit):
        rounds = ", ".join(f"{x:.2f}" for x in m["ratios"])
        return [
            name,
            f"{m[a + '_median']:.{unit}f}",
            f"{m[b + '_median']:.{unit}f}",
            f"{m['ratio_median']:.2f} ({rounds})",
            f"{m['cpu_ratio_median']:.2f}",
            f"{m[a + '_peak_rss_mb']:.0f} / {m[b + '_peak_rss_mb']:.0f}",
        ]

    rows = [row(f"`{config.removeprefix('configs/')}` (train tok/s)", m, 0) for config, m in d["train"].items()]
    for beam, m in (d.get("decode") or {}).items():
        shown = "greedy" if beam == "beam1" else beam.replace("beam", "beam ")
        rows.append(row(f"decode {shown}, sent/s", m, 1))
    header = ["config", a, b, "ratio (rounds)", "ratio (CPU time)", f"peak RSS MB {a} / {b}"]
    return "\n".join(table(header, rows)) + _loads([("", d)])


def commits(args: list[str]) -> str:
    """Wall-clock ratios, and per CPU second of the training thread where the records have it (steadier on a
    shared machine)."""
    named, rows = read_labelled(args), []
    cpu = any("cpu_ratios" in m for _, d in named for m in d["configs"].values())
    for label, d in named:
        for config, m in d["configs"].items():
            ratios = ", ".join(f"{n / o:.2f}" for o, n in zip(m["old_tok_s"], m["new_tok_s"]))
            by_cpu = [f"{m['cpu_ratio_median']:.2f} ({', '.join(f'{r:.2f}' for r in m['cpu_ratios'])})"] if (
                "cpu_ratios" in m) else ["-"]  # fmt: skip
            rows.append(
                [label, f"`{config.removeprefix('configs/')}`", f"{m['old_median']:.0f}", f"{m['new_median']:.0f}",
                 f"{m['ratio_median']:.2f} ({ratios})"] + (by_cpu if cpu else [])
            )  # fmt: skip
    header = ["measurement", "config", "old tok/s", "new tok/s", "new / old (rounds)"]
    return "\n".join(table(header + ["new / old per CPU s (rounds)"] * cpu, rows)) + _loads(named)


def compile_(args: list[str]) -> str:
    d = read_json(args[0])
    med, ratios = d["median_tokens_per_s"], ", ".join(f"{x:.2f}" for x in d["round_ratios_compiled_over_eager"])
    cold = {r["mode"]: r["cold_s"] for r in d["runs"]["eager"][:1] + d["runs"]["compile"][:1]}
    rows = [
        [
            f"{med['eager']:.0f}",
            f"{med['compile']:.0f}",
            f"{d['ratio_median']:.2f} ({ratios})",
            f"{cold['eager']:.0f} / {cold['compile']:.0f}",
            f"{d['extra_cold_start_s']:.0f}",
        ]
    ]
    header = [
        "eager tok/s",
        "compiled tok/s",
        "compiled / eager (rounds)",
        "first-round cold start s, eager / compiled",
        "extra cold start s (median)",
    ]
    return "\n".join(table(header, rows)) + _loads([("", d)])


def profile(args: list[str]) -> str:
    rows, named = [], []
    for a in args:
        d = read_json(a)
        named.append((Path(a).name, d))
        g = d["groups_share"]
        rows.append(
            [
                f"`{d['config'].removeprefix('configs/')}`",
                f"{100 * g['gemm']:.1f}%",
                f"{100 * g['elementwise']:.1f}%",
                f"{100 * g.get('dropout masks', 0):.1f}%",
                f"{d['gemm_gflop_s']:.0f}",
                f"{d['peak_gemm_gflop_s']['float32']:.0f}",
                f"{d['gemm_rate_vs_peak']:.2f}",
                f"{d['ceiling_speedup_same_math']:.2f}x",
            ]
        )
    header = [
        "config",
        "GEMM share",
        "elementwise",
        "dropout masks",
        "GEMM GFLOP/s",
        "2048^3 GEMM GFLOP/s",
        "ratio",
        "ceiling",
    ]
    return "\n".join(table(header, rows)) + _loads(named)


def context(args: list[str]) -> str:
    d = read_json(args[0])

    def vs(r, name):
        if f"{name}_speed_vs_sequential" not in r:
            return "-"
        rounds = r.get(f"{name}_speed_vs_sequential_rounds", [])
        shown = f"{r[f'{name}_speed_vs_sequential']:.2f}"
        return shown + (" (" + ", ".join(f"{x:.2f}" for x in rounds) + ")" if len(rounds) > 1 else "")

    rows = [
        [
            r["context_tokens"],
            r["variant"],
            f"{r['train_target_tokens_per_s']:.0f}",
            vs(r, "train"),
            f"{r['decode_sentences_per_s']:.1f}",
            vs(r, "decode"),
            f"{r.get('peak_cuda_mib', r['peak_rss_growth_mib']):.0f}",
        ]
        for r in d["rows"]
    ]
    memory = "peak CUDA MiB" if d["rows"] and "peak_cuda_mib" in d["rows"][0] else "peak RSS growth MiB"
    header = [
        "context tokens",
        "decoder",
        "train tgt tok/s",
        "vs sequential (rounds)",
        "decode sent/s",
        "vs sequential (rounds)",
        memory,
    ]
    return "\n".join(table(header, rows)) + _loads([("", d)])


KINDS = {
    "fairseq-train": fairseq_train,
    "models": models,
    "lexicon": lexicon,
    "dangle-intervals": dangle_intervals,
    "dangle-flops": dangle_flops,
    "dangle-formulations": dangle_formulations,
    "search": search,
    "decode-fairseq": decode_fairseq,
    "lstm": lstm,
    "profile": profile,
    "commits": commits,
    "compile": compile_,
    "context": context,
}


#: the benchmark kinds, as typer reads a choice
Kind = Literal[tuple(sorted(KINDS))]


def command(
    table: Kind = typer.Argument(..., metavar="KIND", help=f"one of {', '.join(sorted(KINDS))}"),
    files: list[str] = typer.Argument(..., help="benchmark JSON files (LABEL=FILE where the kind compares)"),
    format: str = FORMAT,
) -> argparse.Namespace:
    """The records of one benchmark (benchmarks/*.py) as a table, ending with the load averages the files
    recorded: how quiet the machine was.

    Example: structseq report bench models results/perf/bench_models.json"""
    return argparse.Namespace(**locals())


def render(args: argparse.Namespace) -> str:
    return KINDS[args.table](args.files)
