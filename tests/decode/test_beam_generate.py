"""Beam 5 equals transformers' `generate(num_beams=5)` under matched settings (length penalty, early_stopping,
a length limit with </s> forced, padding never generated) on tiny random BART, mBART and T5 built offline: the
same n-best lists, in the same order, with the same normalised scores (issue 44 item 1)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from structseq.config import config_from_dict  # noqa: E402
from structseq.data.colors import splits  # noqa: E402
from structseq.decode.search import beam_search  # noqa: E402
from structseq.models import build_model  # noqa: E402
from structseq.tasks import get_task  # noqa: E402
from structseq.testing.hf_tiny import tiny_bart, tiny_t5  # noqa: E402

K, LIMIT = 5, 6


class EndAtLimit:
    """A logits processor that leaves only </s> after LIMIT tokens without changing its log-probability, as
    structseq forces </s> (transformers' `forced_eos_token_id` would set it to 0: another score)."""

    def __init__(self, eos: int):
        self.eos = eos

    def __call__(self, input_ids, scores):
        if input_ids.shape[1] == LIMIT + 1:  # the decoder start and LIMIT tokens
            keep = torch.arange(scores.shape[-1], device=scores.device) == self.eos
            scores = scores.masked_fill(~keep, float("-inf"))
        return scores


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """family -> (task, model, inputs of 24 Colors sources), the model's </s> output row scaled so outputs vary
    in length (a random model that never ends would leave the stopping rules untested)."""
    root, out = tmp_path_factory.mktemp("beam"), {}
    examples = [e for part in splits().values() for e in part][:24]
    for family, folder, scale in [
        ("bart", tiny_bart(root / "bart", seed=3, init_std=0.3), 2.0),
        ("mbart", tiny_bart(root / "mbart", seed=4, init_std=0.3, family="mbart"), 2.0),
        ("t5", tiny_t5(root / "t5", seed=5), 3.0),
    ]:
        cfg = config_from_dict({"task": "hf-seq2seq", "model": {"arch": "hf-seq2seq", "pretrained": str(folder)}})
        task = get_task(cfg)
        vocabs = task.build_vocabs(examples)
        model = build_model(cfg.model, vocabs, task="hf-seq2seq").eval()
        with torch.no_grad():
            model.hf.get_output_embeddings().weight[task.ids.eos] *= scale
        out[family] = (task, model, task.decode_inputs(examples, vocabs))
    return out


@pytest.mark.parametrize("len_penalty,early_stopping", [(0.0, "never"), (1.0, False), (1.0, True), (0.6, "never")])
@pytest.mark.parametrize("family", ["bart", "mbart", "t5"])
def test_beam_five_equals_generate(models, family, len_penalty, early_stopping):
    compare(models[family], len_penalty, early_stopping, eos_at_limit=True)


@pytest.mark.parametrize("len_penalty", [0.0, 1.0])
def test_beam_five_equals_generate_where_the_limit_leaves_outputs_unterminated(models, len_penalty):
    """No </s> forced (a T5 checkpoint's generation config): outputs that reach the limit end there, ranked
    by their length without </s>, as `generate` ranks them."""
    compare(models["t5"], len_penalty, False, eos_at_limit=False)


def compare(setup, len_penalty, early_stopping, eos_at_limit):
    from transformers import LogitsProcessorList

    task, model, inputs = setup
    ids, B = task.ids, inputs["src"].shape[0]

    ours = beam_search(
        model, inputs, K, torch.full((B,), LIMIT), len_penalty, nbest=True,
        eos=ids.eos, bos=ids.pad, pad=ids.pad, early_stopping=early_stopping, eos_at_limit=eos_at_limit,
    )  # fmt: skip
    with torch.no_grad():  # LIMIT tokens then </s> forced, as structseq's search; padding never generated
        out = model.hf.generate(
            input_ids=inputs["src"],
            attention_mask=inputs["src"].ne(ids.pad).long(),
            do_sample=False,
            num_beams=K,
            num_return_sequences=K,
            length_penalty=len_penalty,
            early_stopping=early_stopping,
            max_length=LIMIT + 2,
            logits_processor=LogitsProcessorList([EndAtLimit(ids.eos)] if eos_at_limit else []),
            forced_eos_token_id=None,  # EndAtLimit instead (the BART configs set it)
            suppress_tokens=[ids.pad],
            forced_bos_token_id=None,
            min_length=0,
            no_repeat_ngram_size=0,
            output_scores=True,
            return_dict_in_generate=True,
        )
    rows, scores = out.sequences[:, 1:].tolist(), out.sequences_scores.view(B, K).tolist()
    lengths = set()
    for b in range(B):
        theirs = [row[: row.index(ids.eos)] if ids.eos in row else row for row in rows[b * K : (b + 1) * K]]
        mine = ours.nbest[b]
        assert [t for t, _ in mine] == theirs, f"sentence {b}"
        # ranked by the generated length: </s> included, or LIMIT + 1 tokens that reached the limit
        ranked = [s / min(len(t) + 1, LIMIT + 1) ** len_penalty for t, s in mine]
        assert ranked == pytest.approx(scores[b], abs=1e-4)
        lengths.update(len(t) for t in theirs)
    assert len(lengths) > 2 if eos_at_limit else LIMIT + 1 in lengths  # the rules under test were exercised
