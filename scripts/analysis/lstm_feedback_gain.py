"""How strongly an LSTM decoder with `combine_feed` amplifies its own fed-back vector (issue 14 diagnosis).

    python scripts/analysis/lstm_feedback_gain.py runs/budget/scan-around-right-lstm-lex-simple-256-s1 [RUN ...] \
        [--longest 64] [--json]

With `combine_feed`, the combined vector is `combine([emb; feed; h_t; context])` and becomes the next step's
feed: a *linear* recurrence through the `feed` columns W_f of `combine` (no nonlinearity, as the reference
code). Its growth per step is the spectral radius rho(W_f); rho > 1 makes the vector grow geometrically with
the output length until it overflows (inf, then NaN log-probabilities and a NaN training loss).

For each run and each of its checkpoints (`last`, `best`, `stepK` of a learning curve) this prints rho(W_f),
and for the last checkpoint the largest feed norm at every 4th step of teacher-forced decoding (eval mode) of
the `--longest` test examples with the longest targets, and, from the run's `predictions/<test split>.tsv`
(written by `structseq evaluate`), exact match by reference length: where the growth bites.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import torch


def feed_radius(state_dict: dict) -> float:
    W = state_dict["combine.weight"]
    H, E = W.shape[0], state_dict["tgt_embed.weight"].shape[1]
    return float(torch.linalg.eigvals(W[:, E : E + H].double()).abs().max())


@torch.no_grad()
def feed_norms(run_dir: str, longest: int) -> list[float]:
    from structseq import api

    run = api.load_run(run_dir, device="cpu")
    _, _, examples = run.load_split(run.config.data.test[0])
    examples = sorted(examples, key=lambda e: -len(e.target))[:longest]
    batch = run.task.collate([run.task.encode(e, run.vocabs) for e in examples], list(range(len(examples))))
    model = run.model.eval()
    state = model.init_state(model.encode(batch))
    norms = []
    for t in range(batch["tgt_in"].shape[1]):
        _, state = model.step(batch["tgt_in"][:, t], state)
        norms.append(float(state["feed"].norm(dim=1).max()))
    return norms


def exact_match_by_length(run_dir: str, width: int = 8) -> dict[str, list]:
    """{"lo-hi": [examples, exact match]} from the run's first test split's predictions, if written."""
    import csv

    from structseq.config import load_config

    split = load_config(Path(run_dir, "config.yaml")).data.test[0]
    path = Path(run_dir, "predictions", f"{split}.tsv")
    if not path.exists():
        return {}
    bins: dict[int, list] = {}
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE):
            b = bins.setdefault(len(row["reference"].split()) // width, [0, 0])
            b[0], b[1] = b[0] + 1, b[1] + int(row["correct"])
    return {f"{k * width}-{k * width + width - 1}": [n, round(c / n, 3)] for k, (n, c) in sorted(bins.items())}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs", nargs="+")
    p.add_argument("--longest", type=int, default=64, help="test examples with the longest targets to decode")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    from structseq.run.checkpoint import load_checkpoint

    out = {}
    for run in a.runs:
        ckpts = sorted(
            Path(run, "checkpoints").glob("*.pt"),
            key=lambda f: int(m.group(1)) if (m := re.fullmatch(r"step(\d+)", f.stem)) else 10**9,
        )
        rec = {}
        for f in ckpts:
            ck = load_checkpoint(f)
            if not ck["config"]["model"].get("combine_feed"):
                raise SystemExit(
                    f"{run}: model.combine_feed is off: the feed reaches the next step only through the LSTM"
                )
            rec[f.stem] = {"step": ck["progress"]["step"], "rho": round(feed_radius(ck["model"]), 3)}
        rec["feed_norm_every_4th_step"] = [float(f"{n:.3g}") for n in feed_norms(run, a.longest)[::4]]
        rec["exact_match_by_reference_length"] = exact_match_by_length(run)
        out[run] = rec
        if not a.json:
            print(run)
            for k, v in rec.items():
                if "step" in v:
                    print(f"  {k:>10}: step {v['step']:>5}  rho(W_feed) {v['rho']:.2f}")
            print(
                "  largest feed norm, every 4th step (last checkpoint, eval mode, longest test targets):",
                " ".join(f"{n:.3g}" for n in rec["feed_norm_every_4th_step"]),
            )
            if rec["exact_match_by_reference_length"]:
                print(
                    "  exact match by reference length (examples, score):",
                    ", ".join(f"{k}: {n}, {em:.3f}" for k, (n, em) in rec["exact_match_by_reference_length"].items()),
                )
    if a.json:
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
