"""GPU benchmark: training target tokens/s, peak memory and MFU, decoding sentences/s, for the models of issue 33.

    python benchmarks/bench_gpu.py --out results/gpu/bench               # a GPU: under 8 minutes on one H100
    python benchmarks/bench_gpu.py --out /tmp/bench --cpu-smoke          # the same code on the CPU, tiny, seconds
    python benchmarks/bench_gpu.py --device-json OUT/device.json         # only the machine record (scripts/device_*.sh)

Sections, one JSON file each in --out, rewritten after every measurement (a stopped run keeps what it measured;
every file names the machine: device, torch and CUDA versions, load average, date):
- `gemm.json`: matrix-product FLOP/s of this process in bf16 and fp32 (and TF32 on CUDA): the denominators of MFU.
- `train.json`: per model and precision (fp32; bf16 autocast on CUDA): target tokens/s over timed updates (after
  warm-up ones, the device synchronised at both ends), host launches per update on CUDA (kernel and CUDA-graph
  launch calls, profiled over two more updates), peak memory (CUDA: allocated; CPU: the process's peak RSS),
  FLOPs per target token counted by FlopCounterMode (`structseq.testing.bench.count_flops`; no formula for
  cuDNN's LSTM, so a lower bound there) and MFU against the bf16 and the fp32 GEMM.
- `decode.json`: per model, greedy and beam-5 sentences/s through the task's own decoding on the validation
  examples (weights after the timed updates, so outputs are near the length cap: `output_tokens` says how long).
Models: the Transformer 6+6 d512 on SCAN-simple batches (bench_train's), the COGS Transformer, Dangle and
R-Dangle_sep at intervals 1, 4 and inf (0: one encoding), the LSTM + lexical head (COGS), the tree supertagger
(TLGbank light) and the interleave context model (Maruf TED). A dataset whose files are missing under the data
root is replaced by a generated one of the same task (the row says so in `data`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


# ---------------------------------------------------------------- the machine


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True, timeout=10)
        return r.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def machine_info(device: str = "auto") -> dict:
    """What ran the numbers: device name, versions, load average, date (torch's fields None without torch)."""
    info = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "host": platform.node(),
        "device": "cpu",
        "device_name": _cpu_model(),
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "load_avg": list(os.getloadavg()),
        "python": platform.python_version(),
        "torch": None,
        "cuda": None,
        "cudnn": None,
        "tf32_matmul": None,
        "git_commit": _git_commit(),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    try:
        import torch
    except ImportError as e:
        return {**info, "torch": f"missing: {e}"}
    info.update(torch=torch.__version__, cuda=torch.version.cuda, tf32_matmul=torch.backends.cuda.matmul.allow_tf32)
    if torch.cuda.is_available() and device != "cpu":
        info.update(device="cuda", device_name=torch.cuda.get_device_name(), cudnn=torch.backends.cudnn.version())
    return info


def device_json(path: Path) -> dict:
    """machine_info plus nvidia-smi's report (None where there is none)."""
    info = machine_info()
    smi = shutil.which("nvidia-smi")
    queries = {
        "nvidia_smi_gpus": ["--query-gpu=name,memory.total,driver_version,clocks.max.sm", "--format=csv,noheader"],
        "nvidia_smi": [],
    }
    for key, args in queries.items():
        try:
            info[key] = subprocess.run([smi, *args], capture_output=True, text=True, timeout=60).stdout if smi else None
        except (OSError, subprocess.SubprocessError) as e:
            info[key] = f"failed: {e}"
    _write_json(path, info)
    return info


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


class Section:
    """One JSON file of results, rewritten (atomically) after every row."""

    def __init__(self, out: Path, name: str, machine: dict, settings: dict):
        self.path, self.name, self.machine, self.settings, self.rows = out / f"{name}.json", name, machine, settings, []
        self.write()

    def add(self, row: dict) -> dict:
        self.rows.append(row)
        self.write()
        return row

    def write(self) -> None:
        machine = {
            **self.machine,
            "load_avg": list(os.getloadavg()),
            "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        _write_json(self.path, {"section": self.name, "machine": machine, "settings": self.settings, "rows": self.rows})


# ---------------------------------------------------------------- measurements


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def gemm_flops(device: str, dtype: str, n: int, reps: int) -> float:
    """FLOP/s of n x n x n matrix products in `dtype` (tf32: float32 with TF32 allowed), best of two rounds."""
    import torch

    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        kind = torch.bfloat16 if dtype == "bf16" else torch.float32
        a, b = torch.randn(n, n, device=device, dtype=kind), torch.randn(n, n, device=device, dtype=kind)
        best = 0.0
        for _ in range(3):  # the first round warms up
            _sync(device)
            t = time.perf_counter()
            for _ in range(reps):
                a @ b
            _sync(device)
            best = max(best, 2 * n**3 * reps / (time.perf_counter() - t))
        return best
    finally:
        torch.backends.cuda.matmul.allow_tf32 = saved


@dataclass
class Spec:
    name: str
    config: str  # a YAML file under configs/, or "bench_train" (its Transformer 6+6 d512 on SCAN-simple)
    set: tuple[str, ...] = ()
    fallback: tuple[str, ...] = ()  # overrides when the dataset's files are missing: a generated one of its task


COGS_FALLBACK = ("data.dataset=scan-length", "data.valid=test", "data.test=[test]")
SPECS = [
    Spec("transformer-6+6-d512/scan-simple", "bench_train", (), ("data.dataset=scan-jump",)),
    Spec("cogs/transformer", "configs/cogs/transformer.yaml", (), COGS_FALLBACK),
    Spec("cogs/dangle", "configs/cogs/dangle.yaml", (), COGS_FALLBACK),
    Spec("cogs/rdangle-sep-o4", "configs/cogs/rdangle-sep.yaml", ("model.interval=4",), COGS_FALLBACK),
    Spec("cogs/lstm-lex-simple", "configs/cogs/lstm-lex-simple.yaml", (), COGS_FALLBACK),
    Spec("cogs/rdangle-sep-o1", "configs/cogs/rdangle-sep.yaml", ("model.interval=1",), COGS_FALLBACK),
    Spec("cogs/rdangle-sep-oinf", "configs/cogs/rdangle-sep.yaml", ("model.interval=0",), COGS_FALLBACK),
    Spec(
        "tlgbank-light/supertag-tree",
        "configs/tlgbank-light/tree.yaml",
        (),
        ("data.dataset=ab-grammar", "data.valid=dev"),
    ),
    Spec(
        "maruf-ted/interleave",
        "configs/ctx-maruf-ted/interleave.yaml",
        (),
        ("data.dataset=ctx-commands", "data.train=train", "data.valid=valid", "data.test=[test]"),
    ),
]
#: --cpu-smoke: every model at a tiny size (only the keys its schema has are set)
SMOKE_MODEL = {
    "d_model": 16,
    "n_heads": 2,
    "ffn_dim": 32,
    "encoder_layers": 1,
    "decoder_layers": 1,
    "embed_dim": 16,
    "hidden_dim": 16,
    "layers": 1,
    "node_dim": 8,
    "node_heads": 2,
    "state_heads": 2,
    "fusion_layers": 1,
    "post_fusion_layers": 1,
}
SMOKE_ENCODER = {"word_dim": 8, "char_dim": 4, "char_filters": 4, "hidden": 8, "layers": 1}


def load_spec(spec: Spec, overrides: list[str]):
    from structseq.config import apply_overrides, config_from_dict

    if spec.config == "bench_train":
        from structseq.testing.bench import fairseq_transformer_config

        base = fairseq_transformer_config(4096)
    else:
        from structseq.yamlio import load_yaml

        base = load_yaml((HERE.parent / spec.config).read_text(), spec.config)
    return config_from_dict(apply_overrides(base, list(overrides)))


def smoke_overrides(cfg) -> list[str]:
    model = cfg.to_dict()["model"]
    keep_decoder = model["arch"] == "context-transformer"  # its source/context layer lists index the decoder
    sets = [
        f"model.{k}={v}" for k, v in SMOKE_MODEL.items() if k in model and not (keep_decoder and k == "decoder_layers")
    ]
    sets += [f"model.encoder.{k}={v}" for k, v in SMOKE_ENCODER.items() if k in (model.get("encoder") or {})]
    sets += ["data.max_train_examples=200", "optim.accumulate=1", "decode.max_len_a=0", "decode.max_len_b=8"]
    o = cfg.optim
    sets += (["optim.max_tokens=256"] if o.max_tokens else []) + (["optim.batch_size=8"] if o.batch_size else [])
    return sets


def make_trainer(spec: Spec, args, work: Path):
    """(Trainer, data note): the spec's config on the device, never validating, on its own data or the
    generated fallback when the files are missing."""
    from structseq.errors import StructseqError
    from structseq.train.loop import Trainer

    common = [
        *spec.set,
        f"train.device={args.device}",
        "train.bf16=false",
        "train.max_steps=1000000",
        "train.valid_every=0",
        "train.threads=0",
        *args.set,
    ]
    if args.cpu_smoke:
        common += smoke_overrides(load_spec(spec, common))
    try:
        cfg = load_spec(spec, common)
        return Trainer(cfg, work, data_root=args.data_root, show_progress=False), cfg.data.dataset
    except (StructseqError, OSError) as e:
        if not spec.fallback:
            raise
        cfg = load_spec(spec, [*common, *spec.fallback])
        note = f"{cfg.data.dataset} (generated; {' '.join(str(e).split())[:160]})"
        return Trainer(cfg, work, data_root=args.data_root, show_progress=False), note


def peak_memory(device: str, reset: bool = False) -> float:
    """MiB: CUDA's peak allocation since the last reset, or the process's peak RSS on a CPU."""
    import torch

    if device == "cuda":
        if reset:
            torch.cuda.reset_peak_memory_stats()
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def batch_shapes(batch) -> tuple:
    """A batch's tensor shapes, by name: what a compiled step is specialised on."""
    return tuple(sorted((k, tuple(v.shape)) for k, v in batch.items() if hasattr(v, "shape")))


def epoch_shapes(trainer) -> set:
    """Every batch shape of the run's next epoch (batches built, not trained on)."""
    import dataclasses

    progress = dataclasses.replace(trainer.progress)
    n = len(trainer.batches.epoch(progress.epoch)) - progress.batch_in_epoch
    return {batch_shapes(trainer.batches.next(progress, trainer.dist)) for _ in range(max(n, 1))}


def warm_up(trainer, args) -> dict:
    """`args.warmup` updates, and with `--warmup-shapes` on until every batch shape of an epoch has run once
    (each compiled or captured before timing starts; at most `--warmup-max` updates)."""
    import dataclasses

    wanted, seen, n, t = (epoch_shapes(trainer) if args.warmup_shapes else set()), set(), 0, time.perf_counter()
    while n < args.warmup or (wanted - seen and n < args.warmup_max):
        seen.add(batch_shapes(trainer.batches.next(dataclasses.replace(trainer.progress), trainer.dist)))
        trainer.step()
        n += 1
    _sync(args.device)
    return {
        "warmup": n,
        "warmup_s": time.perf_counter() - t,
        "shapes": len(wanted) or None,
        "shapes_warmed": len(seen & wanted) if wanted else None,
    }


def wait_for_the_others(folder: Path, n: int, most_s: float = 300.0) -> None:
    """Say this process is ready (a file in `folder`), then wait until `n` are (at most `most_s` seconds)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"ready-{os.getpid()}-{time.monotonic_ns()}").touch()
    end = time.monotonic() + most_s
    while len(list(folder.glob("ready-*"))) < n and time.monotonic() < end:
        time.sleep(0.05)


def measure_train(trainer, precision: str, flops: tuple, gemm: dict, args) -> dict:
    trainer.cfg.train.bf16 = precision == "bf16"  # the loop reads it at every update (autocast)
    peak_memory(args.device, reset=True)
    warm = warm_up(trainer, args)
    if args.sync_dir:  # K processes time the same window (benchmarks/bench_kscale.py): all warmed up first
        wait_for_the_others(Path(args.sync_dir), args.sync_n)
    n, tokens, t0 = 0, 0, time.perf_counter()
    while n < args.updates and (n < 2 or time.perf_counter() - t0 < args.max_update_s):
        tokens += trainer.step().target_tokens
        n += 1
    _sync(args.device)
    dt = time.perf_counter() - t0
    counted, counted_tokens, non_pad = flops
    model_flops = counted / counted_tokens * tokens / dt
    row = {
        "precision": precision,
        "updates": n,
        **warm,
        "seconds": dt,
        "target_tokens": tokens,
        "target_tokens_per_s": tokens / dt,
        "s_per_update": dt / n,
        "peak_memory_mib": peak_memory(args.device),
        "flops_per_target_token": counted / counted_tokens,
        "model_flops_per_s": model_flops,
        "non_padding_share": non_pad,
    }
    for kind, peak in gemm.items():
        row[f"mfu_vs_{kind}_gemm"] = model_flops / peak
    if args.device == "cuda":
        row["launches_per_update"] = launches_per_update(trainer)
    return row


def launches_per_update(trainer, updates: int = 2) -> float:
    """Host-side kernel and graph launches (CUDA runtime/driver launch calls, torch.profiler) per update: what
    a launch-bound update pays for, comparable with benchmarks/count_ops.py's operators (issue 45)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(updates):
            trainer.step()
        torch.cuda.synchronize()
    names = ("LaunchKernel", "GraphLaunch", "cuLaunch")
    return sum(any(n in e.name for n in names) for e in prof.events()) / updates


def measure_decode(trainer, beam: int, args) -> dict:
    import torch

    model = trainer.model.eval()
    examples = (trainer.data.valid or trainer.data.train)[: args.decode_sentences]
    _sync(args.device)
    t = time.perf_counter()
    try:
        with torch.no_grad():
            preds = trainer.task.predict(model, examples, trainer.data.vocabs, beam=beam)
        _sync(args.device)
    finally:
        model.train()
    dt = time.perf_counter() - t
    lengths = [len(p) for p in preds if isinstance(p, (list, tuple))]
    return {
        "beam": beam,
        "sentences": len(examples),
        "seconds": dt,
        "sentences_per_s": len(examples) / dt,
        "output_tokens": sum(lengths) / len(lengths) if lengths else None,
        "max_len": [trainer.cfg.decode.max_len_a, trainer.cfg.decode.max_len_b],
        "batch_size": trainer.cfg.decode.batch_size,
    }


# ---------------------------------------------------------------- driver


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, help="folder for gemm.json, train.json, decode.json")
    p.add_argument("--device", choices=["cuda", "cpu"], help="default: cuda (cpu with --cpu-smoke)")
    p.add_argument("--cpu-smoke", action="store_true", help="tiny models, few updates, on the CPU: seconds")
    p.add_argument("--budget-s", type=float, default=420.0, help="start no measurement after this many seconds")
    p.add_argument("--only", nargs="*", default=None, help="models whose name contains one of these")
    p.add_argument("--updates", type=int, default=30, help="timed updates (at most; see --max-update-s)")
    p.add_argument("--max-update-s", type=float, default=4.0, help="stop timing updates after this long")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--warmup-shapes", action="store_true", help="warm up until every batch shape of an epoch ran")
    p.add_argument("--warmup-max", type=int, default=400, help="the most warm-up updates with --warmup-shapes")
    p.add_argument("--precisions", nargs="*", default=None, help="fp32, bf16 (default: both on CUDA, fp32 on a CPU)")
    p.add_argument("--sync-dir", default=None, help="after warm-up, wait until --sync-n processes are ready here")
    p.add_argument("--sync-n", type=int, default=1)
    p.add_argument("--decode-sentences", type=int, default=256)
    p.add_argument("--data-root", default=None, help="benchmark data [default: $STRUCTSEQ_DATA, ../shared/data]")
    p.add_argument("--device-json", type=Path, help="write the machine record (with nvidia-smi) here and exit")
    p.add_argument("--set", nargs="*", default=[], help="overrides for every model, e.g. optim.static_shapes=true")
    args = p.parse_args(argv)
    if args.device_json:
        print(json.dumps(device_json(args.device_json)))
        return
    if args.out is None:
        p.error("--out is required")
    if args.cpu_smoke:
        args.device = args.device or "cpu"
        args.updates, args.warmup, args.decode_sentences = min(args.updates, 2), min(args.warmup, 1), 4
        args.warmup_max = min(args.warmup_max, 20)
    args.device = args.device or "cuda"
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device here (--cpu-smoke or --device cpu run on the CPU)")
    start = time.perf_counter()

    def say(msg: str) -> None:
        print(f"[bench_gpu {time.perf_counter() - start:6.1f}s] {msg}", flush=True)

    def over_budget(what: str) -> bool:
        if time.perf_counter() - start > args.budget_s:
            say(f"budget of {args.budget_s:.0f}s spent: {what} not measured")
            return True
        return False

    machine = {**machine_info(args.device), "cpu_smoke": args.cpu_smoke}
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    sections = {name: Section(args.out, name, machine, settings) for name in ("gemm", "train", "decode")}
    say(f"{machine['device_name']} ({args.device}), torch {machine['torch']}; results in {args.out}")
    n, reps = (128, 2) if args.cpu_smoke else (8192, 20) if args.device == "cuda" else (1024, 3)
    gemm = {}
    for kind in ("bf16", "fp32", "tf32")[: 3 if args.device == "cuda" else 2]:
        gemm[kind] = gemm_flops(args.device, kind, n, reps)
        sections["gemm"].add({"dtype": kind, "n": n, "reps": reps, "flops_per_s": gemm[kind]})
        say(f"gemm {kind} {n}^3: {gemm[kind] / 1e12:.2f} TFLOP/s")
    precisions = ["fp32", "bf16"] if args.device == "cuda" and torch.cuda.is_bf16_supported() else ["fp32"]
    precisions = [p for p in precisions if args.precisions is None or p in args.precisions]
    work = Path(tempfile.mkdtemp(prefix="bench_gpu-"))
    try:
        for spec in SPECS:
            if args.only is not None and not any(s in spec.name for s in args.only):
                continue
            if over_budget(spec.name):
                break
            try:
                run_spec(spec, args, work, gemm, precisions, sections, say, over_budget)
            except Exception as e:  # one model's failure (missing data, out of memory) is a row, not the end
                sections["train"].add(
                    {
                        "model": spec.name,
                        "error": f"{type(e).__name__}: {e}",
                        "traceback": traceback.format_exc()[-2000:],
                    }
                )
                say(f"{spec.name}: FAILED {type(e).__name__}: {e}")
            if args.device == "cuda":
                torch.cuda.empty_cache()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    say(f"done in {time.perf_counter() - start:.0f}s")


def run_spec(spec: Spec, args, work: Path, gemm: dict, precisions: list[str], sections: dict, say, over_budget) -> None:
    from structseq.testing.bench import count_flops

    t = time.perf_counter()
    trainer, data = make_trainer(spec, args, work / spec.name.replace("/", "_"))
    setup_s = time.perf_counter() - t
    flops = count_flops(trainer)
    common = {
        "model": spec.name,
        "config": spec.config,
        "set": list(spec.set),
        "data": data,
        "arch": trainer.cfg.model.arch,
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "setup_s": setup_s,
    }
    for precision in precisions:
        if over_budget(f"{spec.name} {precision}"):
            return
        row = sections["train"].add({**common, **measure_train(trainer, precision, flops, gemm, args)})
        say(
            f"train {spec.name} {precision}: {row['target_tokens_per_s']:.0f} target tok/s, "
            f"{row['s_per_update']:.4f} s/update ({row['updates']} timed after {row['warmup']} warm-up), "
            f"MFU {row['mfu_vs_bf16_gemm']:.3f} of bf16 GEMM, peak {row['peak_memory_mib']:.0f} MiB"
        )
    for beam in (1, 5):
        if over_budget(f"{spec.name} beam {beam}"):
            return
        row = sections["decode"].add({**common, **measure_decode(trainer, beam, args)})
        say(f"decode {spec.name} beam {beam}: {row['sentences_per_s']:.1f} sentences/s")


if __name__ == "__main__":
    main()
