"""Ensemble uncertainty through the real `structseq.api.Run` interface (two tiny trained models)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from structseq.api import load_run, train
from structseq.cli import compose as cli
from structseq.compose import MEASURES, read_uncertainty_tsv, score_ensemble
from structseq.config import Config
from structseq.models.transformer import TransformerConfig
from tests.fixtures.tiny import tiny_transformer


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    dirs = []
    for seed in (1, 2):
        cfg = Config()
        cfg.data.dataset, cfg.data.valid = "colors", "test"  # a fixed valid split: same vocabulary for both seeds
        cfg.model = TransformerConfig(**tiny_transformer(arch=None))
        cfg.train.max_steps, cfg.train.valid_every, cfg.train.seed = 20, 20, seed
        cfg.optim.warmup = 5
        cfg.train.threads = 1
        cfg.decode.max_len_b = 5
        train(cfg, root / f"seed{seed}", show_progress=False)
        dirs.append(root / f"seed{seed}")
    return dirs


def test_real_runs_fit_the_interface(run_dirs, tmp_path):
    runs = [load_run(d) for d in run_dirs]
    sources = ["dax fep", "lug blicket wif", "zup kiki dax"]
    result = score_ensemble(runs, sources, batch_size=2)
    assert result.hypotheses == runs[0].translate(sources)
    for name in MEASURES:
        assert np.isfinite(result.measures[name]).all() and (result.measures[name] >= 0).all()
    lps = [r.token_log_probs(sources[:1], result.hypotheses[:1])[0] for r in runs]
    torch.testing.assert_close(torch.logsumexp(lps[0], -1), torch.zeros(lps[0].shape[0]), atol=1e-5, rtol=0)
    assert result.n_rows[0] == lps[0].shape[0]

    pool = tmp_path / "pool.txt"
    pool.write_text("\n".join(sources) + "\n")
    out = tmp_path / "unc.tsv"
    args = ["uncertainty", "--ensemble", str(run_dirs[0].parent / "seed*"), "--pool", str(pool), "-o", str(out)]
    completed = CliRunner().invoke(cli.app, args)
    assert completed.exit_code == 0, completed.output
    table = read_uncertainty_tsv(out)
    assert table.sources == sources
    assert table.measures["rmi"] == pytest.approx(result.measures["rmi"], rel=1e-5)
