"""What `predict --nbest` reports for Hugging Face checkpoints, against transformers (issue 54 item 6, issue 52):
an n-best entry that reaches the length limit without </s> (a T5 checkpoint forces none) has the normalised score
transformers' BeamSearchScorer gives it, score / tokens ** len_penalty (da0ad07: / (tokens + 1) **); and the
a * |x| + b length limit counts a source's tokens with the checkpoint's own padding id (BART's is 1)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from structseq.config import config_from_dict  # noqa: E402
from structseq.data.colors import splits  # noqa: E402
from structseq.decode.strategies import Settings, choose  # noqa: E402
from structseq.models import build_model  # noqa: E402
from structseq.tasks import get_task  # noqa: E402
from structseq.testing.hf_tiny import tiny_bart, tiny_t5  # noqa: E402

K, LIMIT = 5, 6


def _setup(folder, n=16):
    examples = [e for part in splits().values() for e in part][:n]
    cfg = config_from_dict(
        {"task": "hf-seq2seq", "model": {"arch": "hf-seq2seq", "pretrained": str(folder)}, "decode": {"beam": K}}
    )
    task = get_task(cfg)
    vocabs = task.build_vocabs(examples)
    model = build_model(cfg.model, vocabs, task="hf-seq2seq").eval()
    return cfg, task, vocabs, model, examples


@pytest.mark.parametrize("len_penalty", [1.0, 0.6])
def test_unterminated_nbest_entries_are_normalised_as_transformers_does(tmp_path, len_penalty):
    cfg, task, vocabs, model, examples = _setup(tiny_t5(tmp_path / "t5", seed=5))
    assert not task.special_ids()["eos_at_limit"]  # a T5 checkpoint: no </s> forced at the limit
    inputs = task.decode_inputs(examples, vocabs)
    d = config_from_dict({"decode": {"max_len_a": 0, "max_len_b": LIMIT, "len_penalty": len_penalty, "beam": K}}).decode
    strategy = choose("beam", Settings(K, K, len_penalty, False, options=d))
    with torch.no_grad():
        lists = strategy.outputs(model, inputs, task, vocabs, d)  # what `predict --nbest` prints
        out = model.hf.generate(
            input_ids=inputs["src"], attention_mask=inputs["src"].ne(task.ids.pad).long(), num_beams=K,
            num_return_sequences=K, length_penalty=len_penalty, early_stopping=False, max_length=LIMIT + 2,
            suppress_tokens=[task.ids.pad], min_length=0, no_repeat_ngram_size=0, output_scores=True,
            return_dict_in_generate=True, do_sample=False,
        )  # fmt: skip
    theirs = out.sequences_scores.view(len(examples), K).tolist()
    rows = out.sequences[:, 1:].tolist()
    unterminated = 0
    for b, cands in enumerate(lists):
        ids = [r[: r.index(task.ids.eos)] if task.ids.eos in r else r for r in rows[b * K : (b + 1) * K]]
        assert [list(c.ids) for c in cands] == ids
        assert [c.normalized for c in cands] == pytest.approx(theirs[b], abs=1e-4)
        unterminated += sum(len(c.ids) == LIMIT + 1 for c in cands)
    assert unterminated > 0  # the case under test occurred


def test_the_length_limit_counts_source_tokens_with_the_checkpoints_padding_id(tmp_path):
    """max_len_a 1, max_len_b 0: each output's limit is its own source's token count (from the tokenizer,
    unpadded); counting BART's padding (id 1) as tokens would give shorter sources longer outputs."""
    cfg, task, vocabs, model, examples = _setup(tiny_bart(tmp_path / "bart", seed=3, init_std=0.3), n=12)
    with torch.no_grad():
        model.hf.final_logits_bias[0, task.ids.eos] = -1e4  # never ends before its limit
    inputs = task.decode_inputs(examples, vocabs)
    assert inputs["src"].eq(task.ids.pad).any()  # sources of several lengths, padded with id 1
    own = [len(task.tokenizer(e.source_text)["input_ids"]) for e in examples]
    d = config_from_dict({"decode": {"max_len_a": 1.0, "max_len_b": 0}}).decode
    with torch.no_grad():
        lists = choose("greedy", Settings(options=d)).outputs(model, inputs, task, vocabs, d)
    assert [len(c[0].ids) for c in lists] == own  # </s> forced at the limit (BART's forced_eos_token_id)
