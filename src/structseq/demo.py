"""`structseq demo`: train and evaluate baselines on an embedded compositional split, print a table.

Runs on the built-in Colors grammar (no data files needed) in a few minutes on 2 CPU cores: each
model is trained with its shipped config, then scored on the training examples and on the
compositional test split, so the gap between fitting the data and generalising from it is visible.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from structseq import api

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"

#: (label, config file, overrides)
DEMO_MODELS = [
    ("LSTM (Akyürek & Andreas 2021 baseline)", "colors/lstm.yaml", []),
    ("Transformer", "colors/transformer.yaml", []),
]


def run_demo(out: str | Path = "runs/demo", steps: int | None = None, seed: int = 1, console: Console | None = None
             ) -> list[dict]:
    console = console or Console()
    out = Path(out)
    rows = []
    for label, config, overrides in DEMO_MODELS:
        run_dir = out / Path(config).with_suffix("").as_posix().replace("/", "-")
        if run_dir.exists():
            import shutil

            shutil.rmtree(run_dir)
        extra = [f"train.max_steps={steps}", f"train.valid_every={steps}"] if steps else []
        console.print(f"[bold]training[/] {label} ({config}) -> {run_dir}")
        t0 = time.time()
        api.train(CONFIG_DIR / config, run_dir, overrides=overrides + extra, seed=seed, show_progress=True)
        run = api.load_run(run_dir)
        train_m = run.evaluate("train")
        test_m = run.evaluate("test")
        rows.append({"model": label, "config": config, "seed": seed, "train_exact_match": train_m["exact_match"]["score"],
                     "test_exact_match": test_m["exact_match"]["score"], "wall_s": round(time.time() - t0, 1)})
    table = Table(title=f"Colors (compositional split, seed {seed}): exact match")
    for col in ("model", "train", "test", "wall s"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for r in rows:
        table.add_row(r["model"], f"{r['train_exact_match']:.2f}", f"{r['test_exact_match']:.2f}", f"{r['wall_s']:.0f}")
    console.print(table)
    (out / "demo.json").write_text(json.dumps(rows, indent=1))
    console.print(f"results: {out / 'demo.json'}; predictions under {out}/*/predictions/")
    return rows
