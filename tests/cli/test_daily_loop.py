"""Issue 47 items 2 and 3 through the CLI: validation reaches the console as fairseq prints it, with a closing
summary; seeds of one config share the held-out sample and vocabularies, so their ensemble just works."""

from __future__ import annotations

import re

import yaml
from typer.testing import CliRunner

from structseq.cli import app
from tests.fixtures.toy import toy_config, toy_tsv

runner = CliRunner()


def _config(tmp_path, **train):
    """The toy config as a YAML file (`valid` held out of `train` when `holdout` is true)."""
    cfg = toy_config(toy_tsv(tmp_path), **train).to_dict()
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_train_prints_each_validation_and_a_closing_summary(tmp_path):
    cfg = _config(tmp_path, max_steps=4, valid_every=2, log_every=2, valid_metric="exact_match")
    r = runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    lines = [x for x in r.output.splitlines() if x.startswith("valid | ")]
    assert [re.match(r"valid \| update (\d+) \|", x).group(1) for x in lines] == ["2", "4"]
    assert all("| valid_loss " in x and "| valid_exact_match " in x and "| best_exact_match " in x for x in lines)
    summary = re.search(r"best exact_match (\S+) at update (\d+) → (\S+); last (\S+) at update 4 → (\S+)", r.output)
    assert summary, r.output
    assert summary.group(3) == str(tmp_path / "run" / "checkpoints" / "best.pt")
    assert summary.group(5) == str(tmp_path / "run" / "checkpoints" / "last.pt")
    values = [float(re.search(r"valid_exact_match (\S+)", x).group(1)) for x in lines]
    assert float(summary.group(1)) == max(values) and int(summary.group(2)) == 2 * (values.index(max(values)) + 1)
    quiet = runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "quiet"), "-q"])
    assert quiet.exit_code == 0 and "valid | " not in quiet.output


def _train(cfg, out, *extra):
    r = runner.invoke(app, ["train", str(cfg), "-o", str(out), "-q", *extra])
    assert r.exit_code == 0, r.output


def _held_out_config(tmp_path, lines):
    data = tmp_path / "data.tsv"
    data.write_text("".join(f"{s}\t{t}\n" for s, t in lines))
    d = toy_config(data, max_steps=2, valid_every=2).to_dict()
    d["data"].update(valid=None, valid_fraction=0.25)
    path = tmp_path / "held.yaml"
    path.write_text(yaml.safe_dump(d))
    return path


def test_seeds_of_one_config_share_vocabularies_and_ensemble(tmp_path):
    """Each line its own words: two held-out samples give two vocabularies. By default (the data seed apart
    from train.seed) the seeds share one; with the old rule (holdout_seed null) the error names the fix."""
    cfg = _held_out_config(tmp_path, [(f"w{i} x", f"W{i} X") for i in range(16)])
    for seed in (1, 2):
        _train(cfg, tmp_path / f"runs/t-s{seed}", "--seed", str(seed))
        _train(cfg, tmp_path / f"old/t-s{seed}", "--seed", str(seed), "--set", "data.holdout_seed=null")
    test = tmp_path / "test.tsv"
    test.write_text("w1 x\tW1 X\nw2 x\tW2 X\n")
    r = runner.invoke(app, ["evaluate", str(tmp_path / "runs/t-s*"), "--split", str(test), "--json", "-q"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["evaluate", str(tmp_path / "old/t-s*"), "--split", str(test), "-q"])
    assert r.exit_code != 0
    assert "data.holdout_seed" in str(r.exception) and "vocabulary" in str(r.exception)


def test_members_with_the_same_tokens_at_other_ids_are_remapped(tmp_path):
    """Held-out samples that keep every token but change their frequencies reorder the vocabularies; the
    ensemble maps each member to the first one's ids. Reference: per token string, the log of the members'
    mean probability from each run alone (`token_log_probs`)."""
    import torch

    from structseq import api

    cfg = _held_out_config(tmp_path, [(t, t.upper()) for t in "abcd" for _ in range(4)])
    runs = []
    for seed in (1, 3):
        _train(cfg, tmp_path / f"s{seed}", "--seed", str(seed), "--set", "data.holdout_seed=null")
        runs.append(api.load_run(tmp_path / f"s{seed}"))
    itos = [r.vocabs["tgt"].itos for r in runs]
    assert itos[0] != itos[1] and sorted(itos[0]) == sorted(itos[1])  # the same tokens at other ids
    ens = api.load_ensemble([r.run_dir for r in runs])
    src, tgt = ["a", "d"], ["A", "D"]
    got = ens.token_log_probs(src, tgt)
    alone = [r.token_log_probs(src, tgt) for r in runs]
    for k in range(len(src)):
        for i, token in enumerate(itos[0]):
            j = itos[1].index(token)
            want = torch.logsumexp(torch.stack([alone[0][k][:, i], alone[1][k][:, j]]), 0) - torch.log(
                torch.tensor(2.0)
            )
            assert torch.allclose(got[k][:, i], want, atol=1e-5)
    r = runner.invoke(
        app, ["evaluate", str(tmp_path / "s1"), str(tmp_path / "s3"), "--split", str(tmp_path / "data.tsv"), "-q"]
    )
    assert r.exit_code == 0, r.output
