"""Issue 55: a model whose logits blew up (the Colors lexical run: valid_loss 382.7, `score` -9,113 on long
outputs, exact match 0.80) says so on the console: `structseq train`'s validation line and `structseq score`
warn past a stated threshold (`metrics.blowup.BLOWUP_NATS`, 50 nats), and stay quiet for a sane model."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from structseq.cli import app
from structseq.metrics.blowup import BLOWUP_NATS
from structseq.run.checkpoint import load_checkpoint, save_checkpoint
from tests.fixtures.toy import toy_config, toy_tsv

runner = CliRunner()


def test_train_and_score_warn_when_the_logits_blew_up(tmp_path):
    data = toy_tsv(tmp_path, n=20)
    d = toy_config(data, max_steps=3, valid_every=0).to_dict()
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(d))
    assert runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "run"), "-q"]).exit_code == 0
    r = runner.invoke(app, ["score", str(tmp_path / "run"), "--pairs", str(data)])
    assert r.exit_code == 0 and "warning" not in r.output  # a sane model: no warning

    blown = tmp_path / "blown.pt"  # the output layer's logits 10^4 times larger: what an expansive feedback does
    state = load_checkpoint(tmp_path / "run" / "checkpoints" / "last.pt")
    state["model"]["head.proj.weight"] = state["model"]["head.proj.weight"] * 1e4
    state.pop("checksum", None)
    save_checkpoint(state, blown)
    for name in ("best", "last"):
        save_checkpoint(state, tmp_path / "run" / "checkpoints" / f"{name}.pt")
    r = runner.invoke(app, ["score", str(tmp_path / "run"), "--pairs", str(data)])
    assert r.exit_code == 0, r.output
    assert f"targets hold a token scored below -{BLOWUP_NATS:g} nats" in r.output
    assert "docs/papers/lexicon.md" in r.output and "threshold 50 nats" in r.output

    d["train"].update(init_from=str(blown), max_steps=1, valid_every=1)
    d["optim"]["lr"] = 1e-12
    cfg.write_text(yaml.safe_dump(d))
    r = runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "again")])
    assert r.exit_code == 0, r.output
    assert "valid | update 1" in r.output and "warning: valid_loss" in r.output and "nats a token" in r.output


def test_a_target_unk_masked_by_head_mask_special_is_not_a_blow_up(tmp_path):
    """Review of issue 55: with head.mask_special a target <unk> (a word outside the target vocabulary) scores
    about -1e5 (models.heads.MASKED) on purpose, and `score` said the activations blew up; now only the <unk>
    warning, while a sane model's other tokens are still checked."""
    data = toy_tsv(tmp_path, n=20)
    d = toy_config(data, max_steps=3, valid_every=0).to_dict()
    d["model"]["head"] = {"type": "softmax", "mask_special": True}
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(d))
    assert runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "run"), "-q"]).exit_code == 0, "train"
    source, target = data.read_text().splitlines()[0].split("\t")
    pairs = tmp_path / "oov.tsv"
    pairs.write_text(f"{source}\t{target} zzzunseen\n")
    r = runner.invoke(app, ["score", str(tmp_path / "run"), "--pairs", str(pairs), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert "scored as <unk>" in r.output and min(yaml.safe_load(r.stdout.splitlines()[-1])["token_scores"]) < -5e4
    assert "blew up" not in r.output


def test_validation_leaves_out_the_targets_head_mask_special_masks(tmp_path):
    """Issue 55 review, the validation half: with head.mask_special a validation target's word outside the target
    vocabulary is <unk>, scored -1e5 on purpose (the reference code masks it in training and decoding and has no
    validation loss); valid_loss averaged that in (thousands of nats) and warned of a blow-up. Now valid_loss
    is the mean NLL of the other target tokens: what `score` gives for them, the reference here."""
    import json

    data = toy_tsv(tmp_path, n=20)
    valid = tmp_path / "valid.tsv"
    valid.write_text("".join(f"{line} ZZZUNSEEN\n" for line in data.read_text().splitlines()[:6]))
    d = toy_config(data, max_steps=2, valid_every=2).to_dict()
    d["data"]["valid"] = str(valid)
    d["model"]["head"] = {"type": "softmax", "mask_special": True}
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(d))
    r = runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "run")])
    assert r.exit_code == 0 and "valid | update 2" in r.output, r.output
    assert "warning" not in r.output
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    valid_loss = [json.loads(x)["valid_loss"] for x in lines if "valid_loss" in x][-1]

    r = runner.invoke(app, ["score", str(tmp_path / "run"), "--pairs", str(valid), "--checkpoint", "last"])
    assert r.exit_code == 0, r.output
    kept = [float(x) for row in r.stdout.splitlines()[1:] for x in row.split("\t")[5].split() if float(x) > -5e4]
    masked = sum(float(x) <= -5e4 for row in r.stdout.splitlines()[1:] for x in row.split("\t")[5].split())
    assert masked == 6 and len(kept) > 6
    assert abs(valid_loss - -sum(kept) / len(kept)) < 1e-4
