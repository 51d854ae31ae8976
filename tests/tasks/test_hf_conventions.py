"""task hf-seq2seq trains and decodes each backbone in its own conventions (issue 44 item 2), checked against
transformers itself on tiny random checkpoints built offline (structseq.testing.hf_tiny): BART (`<s> y </s>`, decoder
start </s>), mBART with language codes (transformers' MBartTokenizer: labels `y </s> ro_RO`, decoder input
`ro_RO y </s>`), T5 and Marian (`y </s>`, decoder start <pad>). The reference is the backbone's own
`forward(labels=...)` on the tokenizer's own `text_target` labels; structseq used to append </s> to mBART's
labels and shift them BART-style (loss off by about 1e-2 a token, one position more)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from structseq import api  # noqa: E402
from structseq.config import config_from_dict  # noqa: E402
from structseq.data.example import Example  # noqa: E402
from structseq.decode.sampling import sample  # noqa: E402
from structseq.decode.search import beam_search, sequence_log_prob  # noqa: E402
from structseq.errors import ConfigError  # noqa: E402
from structseq.models.hf_checkpoint import special_ids  # noqa: E402
from structseq.testing.hf_tiny import EXAMPLES as SENTENCES  # noqa: E402
from structseq.testing.hf_tiny import convention_checkpoints, hf_setup, labels_loss, tiny_bart, tiny_mbart_lang  # noqa: E402

EXAMPLES = [Example.from_text(src, tgt) for src, tgt in SENTENCES]
FAMILIES = ["bart", "mbart_lang", "t5", "marian"]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("conventions")
    free = tiny_bart(root / "bart_free", seed=1, init_std=0.3, forced_eos_token_id=None)  # no </s> at the limit
    return {**convention_checkpoints(root), "bart_free": free}


def setup(folder):
    return hf_setup(folder, EXAMPLES)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_teacher_forced_loss_is_the_backbones_own(folders, family):
    """Per-token NLL equals `model(labels=...).loss` on the tokenizer's labels (measured difference <= 5e-7),
    over the same positions (the labels themselves are the tokenizer's)."""
    task, vocabs, model = setup(folders[family])
    batch = task.batch(EXAMPLES, vocabs)
    with torch.no_grad():
        _, nll, n = task.loss(model, batch, 0.0)
    theirs, labels = labels_loss(folders[family], EXAMPLES)
    assert n == int(labels.ne(-100).sum())
    assert batch["tgt_out"].equal(labels.masked_fill(labels.eq(-100), task.ids.pad))
    assert float(nll) / n == pytest.approx(theirs, abs=2e-6)


def test_mbart_labels_end_with_the_language_code_and_decoding_starts_from_it(folders):
    task, vocabs, model = setup(folders["mbart_lang"])
    ro = task.tokenizer.convert_tokens_to_ids("ro_RO")
    batch = task.batch(EXAMPLES[:1], vocabs)
    pieces = task.tokenizer.convert_ids_to_tokens
    assert pieces(batch["tgt_out"][0].tolist()) == ["▁RED", "▁BLUE", "</s>", "ro_RO"]
    assert pieces(batch["tgt_in"][0].tolist()) == ["ro_RO", "▁RED", "▁BLUE", "</s>"]
    assert task.ids.start == model.start == ro


@pytest.mark.parametrize("family", [*FAMILIES, "bart_free"])
def test_greedy_equals_the_backbones_generate_at_the_length_limit(folders, family):
    """Greedy search equals `generate` under the checkpoint's own generation config (its decoder start; its
    `forced_eos_token_id`), at the length limit too: BART, mBART and Marian set it (the limit's last position
    is </s>), `bart_free` and T5 set none (an output reaching the limit ends there without </s>; forcing </s>
    changed the last token of these)."""
    task, vocabs, model = setup(folders[family])
    ids, limit = task.ids, 7
    assert ids.eos_at_limit == (family not in ("bart_free", "t5"))
    with torch.no_grad():  # a random model that rarely ends (its </s> logit 0), so outputs reach the limit
        model.hf.get_output_embeddings().weight[ids.eos] = 0.0
    inputs = task.decode_inputs(EXAMPLES, vocabs)
    hyp = beam_search(
        model,
        inputs,
        1,
        torch.full((len(EXAMPLES),), limit),
        0.0,
        eos=ids.eos,
        bos=ids.pad,
        pad=ids.pad,
        eos_at_limit=ids.eos_at_limit,
    )
    with torch.no_grad():  # the checkpoint's generation config; padding never generated, as structseq's search
        out = model.hf.generate(
            input_ids=inputs["src"],
            attention_mask=inputs["src"].ne(ids.pad).long(),
            do_sample=False,
            num_beams=1,
            max_length=limit + 2,
            suppress_tokens=[ids.pad],
        )
    assert out[:, 0].eq(ids.start).all()
    theirs = [row[: row.index(ids.eos)] if ids.eos in row else row for row in out[:, 1:].tolist()]
    assert hyp.tokens == theirs
    assert any(len(t) >= limit for t in hyp.tokens)  # the limit is reached
    assert max(len(t) for t in hyp.tokens) == (limit if ids.eos_at_limit else limit + 1)
    drawn = sample(
        model,
        inputs,
        torch.full((len(EXAMPLES),), limit),
        n=3,
        eos=ids.eos,
        bos=ids.pad,
        pad=ids.pad,
        eos_at_limit=ids.eos_at_limit,
    )  # sampling follows the same rule
    assert max(len(t) for entries in drawn.nbest for t, _ in entries) == max(len(t) for t in hyp.tokens)
    # the score is the teacher-forced log-probability of what was output (</s> included only where output)
    for i, toks in enumerate(hyp.tokens):
        tgt = toks if len(toks) > limit else [*toks, ids.eos]
        with torch.no_grad():
            lp = model({"src": inputs["src"][i : i + 1], "tgt_in": torch.tensor([[ids.start, *tgt[:-1]]])})
        assert float(sequence_log_prob(lp, torch.tensor([tgt]), pad=ids.pad)) == pytest.approx(hyp.scores[i], abs=1e-4)


def test_a_config_without_a_decoder_start_starts_from_the_language_code(tmp_path):
    """mBART-cc25 style (no decoder_start_token_id): the start is the model's own shift's, and the built model's
    generation config records it, so an export's `generate` starts where training did."""
    folder = tiny_mbart_lang(tmp_path / "cc25", start=None)
    ro = special_ids(str(folder)).start
    task, vocabs, model = setup(folder)
    assert task.tokenizer.convert_ids_to_tokens(ro) == "ro_RO"
    assert model.hf.generation_config.decoder_start_token_id == ro


def test_a_generation_config_that_starts_elsewhere_is_refused(tmp_path):
    folder = tiny_mbart_lang(tmp_path / "mismatch", start="</s>")
    with pytest.raises(ConfigError, match="training starts the decoder from 'ro_RO'.*decoder_start_token_id is '</s>'"):
        special_ids(str(folder))


def test_an_mbart_run_exports_a_model_that_scores_its_targets_as_structseq_does(tmp_path):
    """A short fine-tuning run on mBART with language codes, exported: transformers' `model(labels=...)` on the
    exported folder gives structseq's teacher-forced loss, over the same number of positions."""
    from structseq.export import export_run

    base = tiny_mbart_lang(tmp_path / "base", seed=2)
    cfg = {
        "task": "hf-seq2seq",
        "data": {"dataset": "colors", "valid": "train"},
        "model": {"arch": "hf-seq2seq", "pretrained": str(base)},
        "optim": {"lr": 3e-3, "schedule": "constant", "max_tokens": None, "batch_size": 7},
        "train": {"max_steps": 2, "valid_every": 2, "seed": 1, "threads": 1},
        "decode": {"max_len_a": 1.0, "max_len_b": 3},
    }
    api.train(config_from_dict(cfg), tmp_path / "run", show_progress=False)
    run = api.load_run(tmp_path / "run", "last")
    export_run(run.run_dir, tmp_path / "export", "last")
    batch = run.task.batch(EXAMPLES, run.vocabs)
    with torch.no_grad():
        _, nll, n = run.task.loss(run.model, batch, 0.0)
    theirs, labels = labels_loss(tmp_path / "export", EXAMPLES)
    assert n == int(labels.ne(-100).sum())
    assert float(nll) / n == pytest.approx(theirs, abs=2e-6)
