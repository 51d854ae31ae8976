"""arch hf-seq2seq and task hf-seq2seq on tiny random BART and T5 checkpoints built offline (structseq.testing.hf_tiny):
the weights are the checkpoint's, teacher forcing = incremental decoding = beam scores, greedy = the backbone's
own `generate`, fine-tuning learns, save / resume / export / reload, and every bad input is a clear error."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")

from structseq import api  # noqa: E402
from structseq.config import config_from_dict  # noqa: E402
from structseq.data.example import Example  # noqa: E402
from structseq.decode.search import beam_search, sequence_log_prob  # noqa: E402
from structseq.errors import ConfigError, StructseqError  # noqa: E402
from structseq.models import build_model  # noqa: E402
from structseq.tasks import get_task  # noqa: E402
from structseq.testing.hf_tiny import tiny_bart, tiny_bert, tiny_t5  # noqa: E402

EXAMPLES = [
    Example.from_text("dax lug", "RED BLUE"),
    Example.from_text("zup", "YELLOW YELLOW RED GREEN BLUE"),
    Example.from_text("wif blicket dax fep", "GREEN"),
    Example.from_text("lug kiki zup", "YELLOW BLUE"),
]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    return {
        "bart": tiny_bart(root / "bart", seed=1, init_std=0.3),
        "t5": tiny_t5(root / "t5", seed=1),
    }


def setup(folder, **model):
    cfg = config_from_dict({"task": "hf-seq2seq", "model": {"arch": "hf-seq2seq", "pretrained": str(folder), **model}})
    task = get_task(cfg)
    vocabs = task.build_vocabs(EXAMPLES)
    return task, vocabs, build_model(cfg.model, vocabs).eval()


@pytest.mark.parametrize("family", ["bart", "t5"])
def test_before_training_the_log_probs_are_the_backbones(folders, family):
    from transformers import AutoModelForSeq2SeqLM

    task, vocabs, model = setup(folders[family])
    batch = task.batch(EXAMPLES, vocabs)
    own = AutoModelForSeq2SeqLM.from_pretrained(str(folders[family]), local_files_only=True).eval()
    with torch.no_grad():
        ref = own(
            input_ids=batch["src"],
            attention_mask=batch["src"].ne(task.ids.pad).long(),
            decoder_input_ids=batch["tgt_in"],
        ).logits.log_softmax(-1)
        assert torch.allclose(model(batch), ref, atol=1e-5)
    # the decoder input is Hugging Face's shift_tokens_right of the labels (padding after each sentence's end)
    assert batch["tgt_in"][:, 0].eq(own.config.decoder_start_token_id).all()
    real = batch["tgt_out"][:, 1:].ne(task.ids.pad)
    assert batch["tgt_in"][:, 1:][real].equal(batch["tgt_out"][:, :-1][real])


@pytest.mark.parametrize("family", ["bart", "t5"])
def test_teacher_forced_equals_incremental_and_beam_scores(folders, family):
    task, vocabs, model = setup(folders[family])
    batch = task.batch(EXAMPLES, vocabs)
    full, steps = model(batch), model.incremental_log_probs(batch)
    mask = batch["tgt_out"].ne(task.ids.pad)
    assert torch.allclose(full[mask], steps[mask], atol=1e-5)
    ids = task.ids
    inputs = task.decode_inputs(EXAMPLES, vocabs)
    hyp = beam_search(
        model, inputs, 3, torch.full((len(EXAMPLES),), 6), 0.0, nbest=True, eos=ids.eos, bos=ids.pad, pad=ids.pad
    )
    checked = 0
    for i, entries in enumerate(hyp.nbest):
        for toks, score in entries:
            tgt = torch.tensor([toks + [ids.eos]])
            with torch.no_grad():
                lp = model({"src": inputs["src"][i : i + 1], "tgt_in": torch.tensor([[ids.start] + toks])})
            assert float(sequence_log_prob(lp, tgt, pad=ids.pad)) == pytest.approx(score, abs=1e-4)
            checked += 1
    assert checked >= len(EXAMPLES)


def test_predictions_are_detokenized_text(folders):
    task, vocabs, model = setup(folders["bart"])
    preds = task.predict(model, EXAMPLES, vocabs, beam=2)
    assert all(isinstance(p, list) and all(isinstance(w, str) for w in p) for p in preds)
    words = set(task.tokenizer.get_vocab()) - {"<s>", "</s>", "<pad>", "<unk>", "<mask>"}
    assert all(w in words for p in preds for w in p)  # special tokens never reach a metric


# ---------------------------------------------------------------- bad inputs


def test_a_missing_folder_or_a_hub_name_is_one_line_saying_nothing_is_downloaded(tmp_path):
    for path in (str(tmp_path / "nowhere"), "facebook/bart-base"):
        with pytest.raises(ConfigError, match="does not exist.*nothing is downloaded") as e:
            setup(path)
        assert "\n" not in str(e.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="not a Hugging Face checkpoint \\(no config.json\\)"):
        setup(tmp_path / "empty")


def test_an_encoder_only_checkpoint_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="bert model, which is encoder-only"):
        setup(tiny_bert(tmp_path / "bert"))


def test_a_tokenizer_lacking_a_needed_special_token_is_refused(tmp_path):
    folder = tiny_bart(tmp_path / "nopad", drop=("pad",))
    with pytest.raises(ConfigError, match="its tokenizer has no pad token"):
        setup(folder)


def test_the_pretrained_key_is_required_when_the_model_is_built():
    cfg = config_from_dict({"task": "hf-seq2seq", "model": {"arch": "hf-seq2seq"}})  # loads: checked at build
    with pytest.raises(ConfigError, match="'model.pretrained' is required"):
        build_model(cfg.model, {})
    with pytest.raises(ConfigError, match="does not serve task 'seq2seq'"):
        config_from_dict({"model": {"arch": "hf-seq2seq", "pretrained": "x"}})


# ---------------------------------------------------------------- training, resume, export


def train_config(folder, steps: int, **train) -> dict:
    return {
        "task": "hf-seq2seq",
        "data": {"dataset": "colors", "valid": "train", "test": ["train", "test"]},
        "model": {"arch": "hf-seq2seq", "pretrained": str(folder)},
        "optim": {"lr": 3e-3, "schedule": "constant", "max_tokens": None, "batch_size": 7},
        "train": {"max_steps": steps, "valid_every": steps, "seed": 1, "threads": 1, "log_every": 1, **train},
        "decode": {"max_len_a": 3.0, "max_len_b": 4},
    }


def _losses(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in rows if "loss" in r]


@pytest.mark.learned
def test_fine_tuning_on_colors_lowers_the_loss_learns_the_training_sentences_and_exports(
    tmp_path, learned_seed, learned
):
    """The 14 Colors training sentences, a random BART of width 64 (2 + 2 layers, dropout 0.1), 200 updates of
    all 14 (about 20 s on one CPU core): the mean loss of the last 10 updates falls under 0.35 of the first 10,
    and exact match on the training sentences reaches 0.3 (Colors' test split asks for few-shot composition,
    which a random backbone this small does not reach: 0.0). The export loads in transformers with the same
    log-probabilities. A seeded trajectory is not portable (float kernels differ by CPU: at seed 1 an AMD EPYC
    got 0.5 where the test's author got 0.93), so both thresholds sit well below the worst of seeds 1-5 (BART
    and training seeds; `STRUCTSEQ_LEARNED_SEEDS=1,2,3,4,5 pytest -m learned`, one CPU): loss ratio
    0.067-0.182, exact match 0.64-0.93."""
    base = tiny_bart(tmp_path / "base", d_model=64, dropout=0.1, seed=learned_seed + 1)
    cfg = train_config(base, 200)
    cfg["optim"].update(lr=5e-3, batch_size=14)
    cfg["train"]["seed"] = learned_seed
    api.train(config_from_dict(cfg), tmp_path / "run", show_progress=False)
    losses = _losses(tmp_path / "run")
    ratio = learned("loss_ratio", sum(losses[-10:]) / sum(losses[:10]))
    run = api.load_run(tmp_path / "run", "last")
    em = learned("train_exact_match", run.evaluate("train", write_predictions=False)["exact_match"]["score"])
    assert ratio < 0.35 and em >= 0.3, (ratio, em)
    _check_export(run, tmp_path / "export")


def test_resume_is_bit_exact(tmp_path):
    """6 updates, then 6 more resumed from the checkpoint, give the weights of 12 in one go, bit for bit
    (dropout on: the RNG state travels with the checkpoint)."""
    base = tiny_bart(tmp_path / "base", d_model=32, dropout=0.1, seed=2)
    api.train(config_from_dict(train_config(base, 12)), tmp_path / "whole", show_progress=False)
    api.train(config_from_dict(train_config(base, 6)), tmp_path / "parts", show_progress=False)
    api.resume(tmp_path / "parts", overrides=["train.max_steps=12"], show_progress=False)
    a = api.load_run(tmp_path / "whole", "last").model.state_dict()
    b = api.load_run(tmp_path / "parts", "last").model.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _check_export(run, out):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from structseq.export import export_run

    record = export_run(run.run_dir, out, "last")
    assert record["format"] == "huggingface" and (out / "model.safetensors").is_file()
    hf = AutoModelForSeq2SeqLM.from_pretrained(str(out), local_files_only=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(out), local_files_only=True)
    batch = run.task.batch(EXAMPLES, run.vocabs)
    assert tokenizer("dax lug")["input_ids"] == run.task.encode(EXAMPLES[0], run.vocabs)["src"]
    with torch.no_grad():
        theirs = hf(
            input_ids=batch["src"],
            attention_mask=batch["src"].ne(run.task.ids.pad).long(),
            decoder_input_ids=batch["tgt_in"],
        ).logits.log_softmax(-1)
        assert torch.allclose(run.model(batch), theirs, atol=1e-5)


def test_a_base_folder_changed_since_training_is_refused(tmp_path):
    base = tiny_bart(tmp_path / "base", seed=3)
    api.train(config_from_dict(train_config(base, 2)), tmp_path / "run", show_progress=False)
    api.load_run(tmp_path / "run", "last")  # unchanged: loads
    tiny_bart(base, seed=4)  # other weights in the same folder
    for load in (
        lambda: api.load_run(tmp_path / "run", "last"),
        lambda: api.resume(tmp_path / "run", overrides=["train.max_steps=4"], show_progress=False),
    ):
        with pytest.raises(
            StructseqError,
            match="changed since this run was trained: its content hash is now "
            "[0-9a-f]{64}, the run was trained on [0-9a-f]{64}",
        ):
            load()
