"""Issue 55 friction 3: a from-scratch Transformer becomes a transformers model. `structseq export RUN -o DIR`
writes, beside the structseq folder, a MarianMTModel that stock transformers loads (AutoModelForSeq2SeqLM,
trust_remote_code=False): its log-probabilities equal the run's within 1e-5 and `generate` (greedy and beam 3,
with the folder's own generation config) equals structseq's search. Models Marian cannot hold are refused with
--format transformers in one line naming why, and exported as a structseq folder that says why by default."""

from __future__ import annotations

import json
import math

import pytest
import torch
import yaml
from typer.testing import CliRunner

pytest.importorskip("transformers")

from structseq import api  # noqa: E402
from structseq.cli import app  # noqa: E402
from structseq.data.vocab import Vocab  # noqa: E402
from tests.fixtures.toy import toy_config, toy_tsv  # noqa: E402

runner = CliRunner()


def _train(tmp, name, data, **model):
    d = toy_config(data, max_steps=8, valid_every=0).to_dict()
    d["model"].update(model)
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(yaml.safe_dump(d))
    r = runner.invoke(app, ["train", str(cfg), "-o", str(tmp / name), "-q"])
    assert r.exit_code == 0, r.output
    return tmp / name


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("marian")
    data = toy_tsv(tmp, n=30)
    run = _train(tmp, "run", data)
    r = runner.invoke(app, ["export", str(run), "-o", str(tmp / "hf")])
    assert r.exit_code == 0, r.output
    assert "which transformers loads too (MarianMTModel" in r.stdout
    return data, tmp / "hf"


def _examples(path):
    from structseq.data.example import Example

    return [Example.from_text(*line.split("\t")) for line in path.read_text().splitlines()]


class EndAtLimit:
    """Only </s> after `limit` tokens, its log-probability unchanged: structseq's search forces </s> so."""

    def __init__(self, limit):
        self.limit = limit

    def __call__(self, input_ids, scores):
        if input_ids.shape[1] == self.limit + 1:  # the decoder start and `limit` tokens
            keep = torch.arange(scores.shape[-1]) == Vocab.eos
            scores = scores.masked_fill(~keep, float("-inf"))
        return scores


def test_the_export_loads_in_stock_transformers_with_the_runs_log_probabilities(exported):
    from transformers import AutoModelForSeq2SeqLM

    data, folder = exported
    hf = AutoModelForSeq2SeqLM.from_pretrained(folder, trust_remote_code=False).eval()
    assert type(hf).__name__ == "MarianMTModel"
    run = api.load_run(folder, device="cpu")  # the same folder as a structseq run
    examples = _examples(data)[:8]
    src = run.task.decode_inputs(examples, run.vocabs)["src"]
    tgt = [[Vocab.bos, *run.vocabs["tgt"].encode(e.target)] for e in examples]
    width = max(map(len, tgt))
    tgt_in = torch.tensor([t + [Vocab.pad] * (width - len(t)) for t in tgt])
    with torch.no_grad():
        ours = run.model({"src": src, "tgt_in": tgt_in})
        theirs = hf(input_ids=src, attention_mask=src.ne(Vocab.pad), decoder_input_ids=tgt_in).logits.log_softmax(-1)
    real = tgt_in.ne(Vocab.pad)
    assert ours.shape == theirs.shape
    assert torch.allclose(ours[real], theirs[real], atol=1e-5, rtol=0)
    vocab = json.loads((folder / "vocab-tgt.json").read_text())
    assert vocab == run.vocabs["tgt"].stoi and (folder / "README.md").is_file()


@pytest.mark.parametrize("beam", [1, 3])
def test_generate_equals_structseqs_search(exported, beam):
    from transformers import AutoModelForSeq2SeqLM, LogitsProcessorList

    data, folder = exported
    hf = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    run = api.load_run(folder, device="cpu")
    examples = _examples(data)[:10]
    ours = [c[0].tokens for c in run.search(examples, beam=beam)]
    d, itos = run.config.decode, run.vocabs["tgt"].itos
    lengths = set()
    for e, mine in zip(examples, ours):
        src = run.task.decode_inputs([e], run.vocabs)["src"]
        limit = math.ceil(src.ne(Vocab.pad).sum().item() * d.max_len_a + d.max_len_b)
        with torch.no_grad():  # the folder's generation config, the per-input limit as structseq sets it
            out = hf.generate(
                input_ids=src,
                attention_mask=src.ne(Vocab.pad),
                num_beams=beam,
                max_length=limit + 2,
                logits_processor=LogitsProcessorList([EndAtLimit(limit)]),
            )
        ids = out[0, 1:].tolist()
        ids = ids[: ids.index(Vocab.eos)] if Vocab.eos in ids else ids
        assert [itos[i] for i in ids] == list(mine), e.source
        lengths.add(len(ids))
    assert len(lengths) > 1  # outputs of several lengths: not all cut at one limit


def test_what_marian_cannot_hold_is_refused_naming_why(tmp_path):
    data = toy_tsv(tmp_path, n=12)
    for name, model, why in [
        ("rel", {"positions": "relative"}, "relative positions"),
        ("pre", {"norm_first": True}, "pre-norm layers"),
        ("lstm", {"arch": "lstm"}, "arch lstm declares no layout a stock transformers class holds"),
    ]:
        if model.get("arch") == "lstm":
            d = toy_config(data, max_steps=1, valid_every=0).to_dict()
            d["model"] = {"arch": "lstm", "hidden_dim": 16, "embed_dim": 16}
            cfg = tmp_path / "lstm.yaml"
            cfg.write_text(yaml.safe_dump(d))
            assert runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / name), "-q"]).exit_code == 0
            run = tmp_path / name
        else:
            run = _train(tmp_path, name, data, **model)
        r = runner.invoke(app, ["export", str(run), "-o", str(tmp_path / f"{name}-hf"), "--format", "transformers"])
        assert r.exit_code != 0 and why in str(r.exception) and "\n" not in str(r.exception)
        assert not (tmp_path / f"{name}-hf").exists()
        r = runner.invoke(app, ["export", str(run), "-o", str(tmp_path / f"{name}-out")])  # auto: structseq only
        assert r.exit_code == 0 and f"not a transformers model: {why}" in r.stdout
        assert not (tmp_path / f"{name}-out" / "config.json").exists()
        assert (tmp_path / f"{name}-out" / "config.yaml").is_file()


def test_without_safetensors_the_export_says_so(exported, tmp_path, monkeypatch):
    """safetensors comes with the optional hf extra: without it a Transformer exports as a structseq folder and
    says why; --format transformers refuses in one line."""
    import importlib.util

    run = exported[1].with_name("run")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "safetensors" else real(name, *a))
    r = runner.invoke(app, ["export", str(run), "-o", str(tmp_path / "out")])
    assert r.exit_code == 0 and "not a transformers model: the safetensors package is not installed" in r.stdout
    assert not (tmp_path / "out" / "config.json").exists() and (tmp_path / "out" / "config.yaml").is_file()
    r = runner.invoke(app, ["export", str(run), "-o", str(tmp_path / "hf"), "--format", "transformers"])
    assert r.exit_code != 0 and "safetensors package is not installed" in str(r.exception)
