"""Supertagger throughput on TLGbank light batches, in one run (issue 10):

- training words/s (forward + backward + AdamW step, batches of 16 training sentences) of the token classifier
  and the constructive tree tagger with the same encoder (configs/tlgbank-light/*-cpu.yaml sizes, untrained);
- decoding sentences/s of the dev split: classifier (argmax), tree greedy, tree beam 5;
- peak memory (CUDA: max allocated; CPU: growth of the process's peak RSS, a coarse upper bound);
- node feedback's message passing with dense/segment torch ops (what the model uses) against
  torch_geometric's `softmax` + scatter (when installed), on the node/word counts of real batches.

    python benchmarks/bench_supertag.py -o results/supertag/bench.json [--device cpu] [--batches 20]

The load average before and after is recorded: on the shared 2-core development machine, numbers taken
under load (other jobs) are indicative only.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build(config: str, device, train):
    from structseq.config import load_config
    from structseq.models import build_model
    from structseq.tasks import get_task

    cfg = load_config(ROOT / config)
    task = get_task(cfg)
    vocabs = task.build_vocabs(train)
    torch.manual_seed(0)
    return task, vocabs, build_model(cfg.model, vocabs, train, task="supertag").to(device)


def bench_train(task, vocabs, model, train, device, n_batches: int) -> dict:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model.train()
    enc = [task.encode(e, vocabs) for e in train]
    batches = [task.collate(enc[i : i + 16], range(i, i + 16)) for i in range(0, 16 * (n_batches + 2), 16)]
    words, elapsed = 0, 0.0
    for j, b in enumerate(batches):
        b = b.to(device)
        start = time.perf_counter()
        loss, _, n = task.loss(model, b, 0.1)
        opt.zero_grad()
        (loss / n).backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if j >= 2:  # warm-up
            words, elapsed = words + n, elapsed + time.perf_counter() - start
    return {"train_words_per_s": words / elapsed, "train_batches": len(batches) - 2}


def bench_decode(task, vocabs, model, dev, beam: int, device) -> dict:
    model.eval()
    task.predict(model, dev[:16], vocabs, beam=beam)  # warm-up
    start = time.perf_counter()
    task.predict(model, dev, vocabs, beam=beam)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return {"sentences_per_s": len(dev) / (time.perf_counter() - start), "sentences": len(dev)}


def bench_message_passing(device, rounds: int = 50) -> dict:
    """Node feedback's segment softmax + weighted scatter: dense/segment torch ops vs torch_geometric."""
    from structseq.nn.segment import segment_softmax

    n_words, n_nodes, heads, d = 16 * 22, 16 * 22 * 2, 4, 256  # a batch of 16 sentences at depth 2
    g = torch.Generator().manual_seed(0)
    seg = torch.randint(0, n_words, (n_nodes,), generator=g).to(device)
    scores = torch.randn(n_nodes, heads, generator=g).to(device)
    msg = torch.randn(n_nodes, heads, d // heads, generator=g).to(device)

    def ours():
        a = segment_softmax(scores, seg, n_words)
        return torch.zeros(n_words, heads, d // heads, device=device).index_add_(0, seg, msg * a[..., None])

    out = {"ours_ms": timeit(ours, rounds, device)}
    try:
        from torch_geometric.utils import scatter, softmax

        def pyg():
            a = softmax(scores, seg, num_nodes=n_words)
            return scatter(msg * a[..., None], seg, 0, dim_size=n_words, reduce="sum")

        assert torch.allclose(ours(), pyg(), atol=1e-5)
        import torch_geometric

        out.update(pyg_ms=timeit(pyg, rounds, device), torch_geometric=torch_geometric.__version__)
    except ImportError:
        out["torch_geometric"] = "not installed"
    return out


def timeit(fn, rounds: int, device) -> float:
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-o", "--out", type=Path, default=None)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batches", type=int, default=20, help="timed training batches per model")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    from structseq.data.registry import load_dataset

    train, dev = load_dataset("tlgbank-light", "train"), load_dataset("tlgbank-light", "dev")
    report = {
        "device": str(device),
        "threads": args.threads,
        "torch": torch.__version__,
        "loadavg_before": os.getloadavg(),
        "note": "2-core development machine; compare with the load averages",
        "models": {},
    }
    for name, config, beams in (
        ("classifier", "configs/tlgbank-light/classifier-cpu.yaml", (1,)),
        ("tree", "configs/tlgbank-light/tree-cpu.yaml", (1, 5)),
    ):
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        rss = peak_rss_mb()
        task, vocabs, model = build(config, device, train)
        r = {
            "parameters": sum(p.numel() for p in model.parameters()),
            **bench_train(task, vocabs, model, train, device, args.batches),
        }
        for beam in beams:
            r[f"decode_beam{beam}"] = bench_decode(task, vocabs, model, dev, beam, device)
        r["peak_memory_mb"] = (
            torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else peak_rss_mb() - rss
        )
        report["models"][name] = r
        print(name, json.dumps(r), file=sys.stderr)
    report["message_passing"] = bench_message_passing(device)
    report["loadavg_after"] = os.getloadavg()
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    print(text)
    return report


if __name__ == "__main__":
    main()
