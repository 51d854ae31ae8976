"""arch rdangle-pretrained (R-Dangle_shr on BART) on tiny random checkpoints built offline (structseq.testing.hf_tiny): its
encoder and decoder weights are the checkpoint's, teacher forcing = incremental decoding at every interval, the
batched training path = the per-step reference (structseq/testing/oracles/rdangle_pretrained_reference.py), beam scores =
teacher-forced scores, fine-tuning learns and resumes bit-exactly, export writes a folder load_run reads."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")

from structseq import api  # noqa: E402
from structseq.config import config_from_dict  # noqa: E402
from structseq.data.example import Example  # noqa: E402
from structseq.decode.search import beam_search, sequence_log_prob  # noqa: E402
from structseq.errors import ConfigError  # noqa: E402
from structseq.models import build_model  # noqa: E402
from structseq.tasks import get_task  # noqa: E402
from structseq.testing.hf_tiny import tiny_bart, tiny_mbart_lang, tiny_t5  # noqa: E402
from structseq.testing.oracles.rdangle_pretrained_reference import per_step_log_probs  # noqa: E402
from tests.fixtures.tiny import tiny_transformer  # noqa: E402

EXAMPLES = [
    Example.from_text("dax lug", "RED BLUE"),
    Example.from_text("zup", "YELLOW YELLOW RED GREEN BLUE RED"),
    Example.from_text("wif blicket dax fep", "GREEN"),
    Example.from_text("lug kiki zup", "YELLOW BLUE"),
]
INTERVALS = [1, 2, 3, 0]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("rdangle")
    sharp = {"seed": 1, "init_std": 0.3}  # weights large enough that every input visibly moves the outputs
    return {
        "bart": tiny_bart(root / "bart", **sharp),
        "mbart": tiny_bart(root / "mbart", family="mbart", **sharp),
        "mbart_lang": tiny_mbart_lang(root / "mbart_lang", seed=1),
        "t5": tiny_t5(root / "t5", seed=1),
    }


def setup(folder, randomise: bool = True, **model):
    settings = {"arch": "rdangle-pretrained", "pretrained": str(folder), "fusion_layers": 1, "post_fusion_layers": 1}
    cfg = config_from_dict({"task": "hf-seq2seq", "model": {**settings, **model}})
    task = get_task(cfg)
    vocabs = task.build_vocabs(EXAMPLES)
    m = build_model(cfg.model, vocabs).eval()
    if randomise:  # the type vectors start at zero: give them values so that the tests see them
        with torch.no_grad():
            m.type_src.normal_(0, 0.5)
            m.type_tgt.normal_(0, 0.5)
    return task, vocabs, m


def test_the_encoder_and_decoder_weights_are_the_checkpoints(folders):
    from transformers import AutoModelForSeq2SeqLM

    _, _, model = setup(folders["bart"], randomise=False)
    own = AutoModelForSeq2SeqLM.from_pretrained(str(folders["bart"]), local_files_only=True).state_dict()
    ours = model.hf.state_dict()
    assert ours.keys() == own.keys()
    for name in own:
        assert torch.equal(ours[name], own[name]), name
    assert any(n.startswith("model.encoder.layers.1.") for n in own) and any("decoder.layers" in n for n in own)
    new = {n for n, _ in model.named_parameters() if not n.startswith("hf.")}
    assert new == {"type_src", "type_tgt", "end"}
    assert model.type_src.abs().sum() == 0 and model.type_tgt.abs().sum() == 0
    assert torch.equal(model.end, model.hf.get_encoder().embed_tokens(torch.tensor([2]))[0])  # BART's </s>
    groups = model.param_groups()
    assert {id(p) for p in groups[0]["params"]} == {id(p) for p in model.hf.parameters()}
    assert [g["lr_scale"] for g in groups] == [1.0, 1.0] and len(groups[1]["params"]) == 3


@pytest.mark.parametrize("family", ["bart", "mbart", "mbart_lang"])  # mbart_lang: decoder inputs `ro_RO y </s>`
@pytest.mark.parametrize("interval", INTERVALS)
def test_teacher_forced_equals_incremental_and_the_per_step_reference(folders, family, interval):
    for chunk in (1, 0):
        task, vocabs, model = setup(folders[family], interval=interval, chunk_points=chunk)
        batch = task.batch(EXAMPLES, vocabs)
        with torch.no_grad():
            full = model(batch)
        steps = model.incremental_log_probs(batch)
        mask = batch["tgt_out"].ne(task.ids.pad)
        assert torch.allclose(full[mask], steps[mask], atol=1e-5), (interval, chunk)
        for b, ref in enumerate(per_step_log_probs(model, batch["src"], batch["tgt_in"])):
            assert torch.allclose(full[b, : ref.shape[0]], ref, atol=1e-5), (interval, chunk, b)


def test_recomputed_chunks_give_the_same_loss_and_gradients(folders):
    task, vocabs, model = setup(folders["bart"], interval=2, chunk_points=1)
    batch = task.batch(EXAMPLES, vocabs)
    grads = []
    for recompute in (False, True):
        model.recompute_chunks = recompute
        model.zero_grad()
        task.loss(model, batch, 0.1)[0].backward()
        grads.append([p.grad.clone() for p in model.parameters()])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(*grads))


@pytest.mark.parametrize("source_dropout", ["per_point", "per_batch"])
def test_source_dropout_is_drawn_per_re_encoding_point(tmp_path, source_dropout):
    """Training with dropout: the source part of the fused input that the first encoder layer reads differs
    between the re-encoding points of one sentence (`per_point`, the default: the reference embeds the source
    again for each point's copy of the batch) or is the same at every point (`per_batch`); recomputed chunks
    draw the same masks again in the backward pass (same gradients)."""
    base = tiny_bart(tmp_path / "drop", seed=1, init_std=0.3, dropout=0.5)
    task, vocabs, model = setup(base, interval=1, chunk_points=100, source_dropout=source_dropout)
    model.train()
    seen = []
    hook = model.encoder.layers[0].register_forward_pre_hook(lambda layer, args: seen.append(args[0].detach()))
    batch = task.batch(EXAMPLES[1:2], vocabs)  # one sentence: the rows of its one chunk are its points
    S = batch["src"].shape[1]
    torch.manual_seed(0)
    model(batch)
    hook.remove()
    rows = seen[0][:, :S]
    assert rows.shape[0] == batch["tgt_in"].shape[1] >= 3
    same = [torch.equal(rows[0], rows[r]) for r in range(1, rows.shape[0])]
    assert all(same) if source_dropout == "per_batch" else not any(same)
    assert rows.eq(0).any()  # dropout is on
    grads = []
    for recompute in (False, True):
        model.recompute_chunks, model.chunk_points = recompute, 2
        model.zero_grad()
        torch.manual_seed(1)
        task.loss(model, task.batch(EXAMPLES, vocabs), 0.1)[0].backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(*grads))


def test_a_sentence_encodes_alike_alone_and_in_a_batch(folders):
    """Positions count from each sentence's own source length, not the padded width."""
    task, vocabs, model = setup(folders["bart"], interval=2)
    with torch.no_grad():
        together = model(task.batch(EXAMPLES, vocabs))
        for b, e in enumerate(EXAMPLES):
            alone = model(task.batch([e], vocabs))[0]
            assert torch.allclose(together[b, : alone.shape[0]], alone, atol=1e-5)


def test_beam_scores_equal_teacher_forced_scores(folders):
    task, vocabs, model = setup(folders["bart"], interval=2)
    ids = task.ids
    inputs = task.decode_inputs(EXAMPLES, vocabs)
    hyp = beam_search(
        model, inputs, 3, torch.full((len(EXAMPLES),), 6), 0.0, nbest=True, eos=ids.eos, bos=ids.pad, pad=ids.pad
    )
    for i, entries in enumerate(hyp.nbest):
        for toks, score in entries:
            with torch.no_grad():
                lp = model({"src": inputs["src"][i : i + 1], "tgt_in": torch.tensor([[ids.start] + toks])})
            assert float(sequence_log_prob(lp, torch.tensor([toks + [ids.eos]]), pad=ids.pad)) == pytest.approx(
                score, abs=1e-4
            )


def test_the_split_must_cover_the_encoder_and_the_backbone_must_be_bart(folders):
    with pytest.raises(
        ConfigError,
        match=r"'model.fusion_layers' \(2\) \+ 'model.post_fusion_layers' \(10\) must "
        r"equal the encoder's 2 layers",
    ):
        setup(folders["bart"], fusion_layers=2, post_fusion_layers=10)
    with pytest.raises(ConfigError, match="runs on the BART family .* holds a t5 model"):
        setup(folders["t5"])


# ---------------------------------------------------------------- training, resume, export


def train_config(folder, steps: int, arch: str = "rdangle-pretrained") -> dict:
    model = {"arch": arch, "pretrained": str(folder), "fusion_layers": 1, "post_fusion_layers": 1, "interval": 2}
    if arch == "transformer":
        model = tiny_transformer(dropout=None)
    return {
        "task": "hf-seq2seq" if arch != "transformer" else "seq2seq",
        "data": {"dataset": "colors", "valid": "train", "test": ["train"]},
        "model": model,
        "optim": {"lr": 5e-3, "schedule": "constant", "max_tokens": None, "batch_size": 14},
        "train": {"max_steps": steps, "valid_every": steps, "seed": 1, "threads": 1, "log_every": 1},
        "decode": {"max_len_a": 3.0, "max_len_b": 4},
    }


@pytest.mark.learned
def test_fine_tuning_lowers_the_loss_and_resumes_bit_exactly(tmp_path, learned_seed, learned):
    """60 updates on Colors (random BART of width 32, dropout 0.1, interval 2): the mean loss of the last 5
    updates is under 0.6 of the first 5 (over BART and training seeds 1-5, `STRUCTSEQ_LEARNED_SEEDS=1,2,3,4,5
    pytest -m learned`, one CPU: 0.305-0.386); 30 + resumed 30 updates give the same weights, bit for bit."""
    base = tiny_bart(tmp_path / "base", d_model=32, dropout=0.1, seed=learned_seed + 1)
    cfg = train_config(base, 60)
    cfg["train"]["seed"] = learned_seed
    api.train(config_from_dict(cfg), tmp_path / "whole", show_progress=False)
    rows = [json.loads(line) for line in (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows if "loss" in r]
    ratio = learned("loss_ratio", sum(losses[-5:]) / sum(losses[:5]))
    assert ratio < 0.6, ratio
    cfg["train"]["max_steps"] = cfg["train"]["valid_every"] = 30
    api.train(config_from_dict(cfg), tmp_path / "parts", show_progress=False)
    api.resume(tmp_path / "parts", overrides=["train.max_steps=60"], show_progress=False)
    a = api.load_run(tmp_path / "whole", "last").model.state_dict()
    b = api.load_run(tmp_path / "parts", "last").model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("arch", ["rdangle-pretrained", "transformer"])
def test_export_of_other_archs_is_a_folder_load_run_reads(tmp_path, arch):
    from typer.testing import CliRunner

    from structseq.cli import app

    base = tiny_bart(tmp_path / "base", seed=2)
    api.train(config_from_dict(train_config(base, 3, arch)), tmp_path / "run", show_progress=False)
    result = CliRunner().invoke(app, ["export", str(tmp_path / "run"), "-o", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "as a structseq folder" in result.output
    out = tmp_path / "out"
    assert (out / "config.yaml").is_file() and (out / "vocab").is_dir()
    record = json.loads((out / "structseq-export.json").read_text())
    assert record["format"] == "structseq" and record["arch"] == arch
    assert "optimizer" not in torch.load(out / "checkpoints" / f"{record['checkpoint']}.pt", weights_only=True)
    run, again = api.load_run(tmp_path / "run"), api.load_run(out)
    sources = ["dax lug", "zup fep", "wif blicket dax"]
    assert run.translate(sources) == again.translate(sources)
    result = CliRunner().invoke(app, ["export", str(tmp_path / "run"), "-o", str(tmp_path / "out")])
    assert result.exit_code != 0  # never over an existing folder


def test_lr_scale_reaches_the_backbone_only(folders):
    """`model.lr_scale` is the learning-rate factor of the pretrained backbone's weights (`hf.`); the model's own
    parameters (type vectors, the end vector) keep the full rate, whatever the factor (0 freezes the backbone)."""
    for scale in (0.25, 0.0):
        _, _, model = setup(folders["bart"], lr_scale=scale)
        rate = {id(p): g["lr_scale"] for g in model.param_groups() for p in g["params"]}
        assert {rate[id(p)] for p in model.hf.parameters()} == {scale}
        assert [rate[id(p)] for p in (model.type_src, model.type_tgt, model.end)] == [1.0, 1.0, 1.0]
        assert len(rate) == len(list(model.parameters()))
