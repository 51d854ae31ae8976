"""Whole outputs under per-step processors equal transformers' `generate` with the same processors, on tiny
random BART and T5 built offline (issue 54 item 2): beam 5 n-best lists and greedy outputs, with a no-repeat
n-gram size, a repetition penalty, a minimum length, a banned token and (BART) a forced BOS. The processors see
exactly generate's input_ids: the decoder's start token first (</s> for BART, <pad> for T5), then the forced BOS
where there is one, so a repetition penalty penalises what generate's does (it saw the pad id as BART's start).
Beam search: both sides penalise log-probabilities. Greedy: generate's greedy hands its processors logits, so it
is given the same transformers processors behind a log-softmax (`_on_log_probs`), what our greedy search does."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from transformers import (  # noqa: E402
    ForcedBOSTokenLogitsProcessor,
    LogitsProcessor,
    LogitsProcessorList,
    MinLengthLogitsProcessor,
    NoBadWordsLogitsProcessor,
    NoRepeatNGramLogitsProcessor,
    RepetitionPenaltyLogitsProcessor,
    SuppressTokensLogitsProcessor,
)

from structseq.data.colors import splits  # noqa: E402
from structseq.decode.processors import ProcessorList  # noqa: E402
from structseq.decode.processors.builtin import (  # noqa: E402
    BannedTokens,
    Forced,
    MinLength,
    NoRepeatNGram,
    RepetitionPenalty,
)
from structseq.decode.strategies import decode  # noqa: E402
from structseq.testing.hf_tiny import hf_setup, tiny_bart, tiny_t5  # noqa: E402

LIMIT = 8


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root, out = tmp_path_factory.mktemp("proc"), {}
    examples = [e for part in splits().values() for e in part][:16]
    for family, folder in [
        ("bart", tiny_bart(root / "bart", seed=3, init_std=0.3)),
        ("t5", tiny_t5(root / "t5", seed=5)),
    ]:
        task, vocabs, model = hf_setup(folder, examples)
        out[family] = (task, model, task.decode_inputs(examples, vocabs))
    return out


SETTINGS = [  # (ours, generate's keywords, families)
    (lambda eos: [NoRepeatNGram(2)], {"no_repeat_ngram_size": 2}, ("bart", "t5")),
    (lambda eos: [RepetitionPenalty(1.8)], {"repetition_penalty": 1.8}, ("bart", "t5")),
    (lambda eos: [MinLength(5, eos)], {"min_length": 6}, ("bart", "t5")),
    (lambda eos: [BannedTokens([7, 11])], {"bad_words_ids": [[7], [11]]}, ("bart", "t5")),
    (
        lambda eos: [RepetitionPenalty(1.3), NoRepeatNGram(3), BannedTokens([5]), MinLength(2, eos)],
        {"repetition_penalty": 1.3, "no_repeat_ngram_size": 3, "bad_words_ids": [[5]], "min_length": 3},
        ("bart", "t5"),
    ),
    (  # BART's forced <s> (id 0): input_ids </s> <s> ..., both penalised
        lambda eos: [RepetitionPenalty(1.8), NoRepeatNGram(2), Forced(0, 0)],
        {"repetition_penalty": 1.8, "no_repeat_ngram_size": 2, "forced_bos_token_id": 0},
        ("bart",),
    ),
]


class _LogSoftmax(LogitsProcessor):
    def __call__(self, input_ids, scores):
        return scores.log_softmax(-1)


def _on_log_probs(theirs: dict, eos: int, pad: int) -> LogitsProcessorList:
    """transformers' own processors for `theirs`, in generate's order, behind a log-softmax and before the pad
    ban: generate's greedy search then chooses as ours, which hands processors log-probabilities."""
    out = LogitsProcessorList([_LogSoftmax()])
    if "repetition_penalty" in theirs:
        out.append(RepetitionPenaltyLogitsProcessor(theirs["repetition_penalty"]))
    if "no_repeat_ngram_size" in theirs:
        out.append(NoRepeatNGramLogitsProcessor(theirs["no_repeat_ngram_size"]))
    if "bad_words_ids" in theirs:
        out.append(NoBadWordsLogitsProcessor(theirs["bad_words_ids"], eos))
    if "min_length" in theirs:
        out.append(MinLengthLogitsProcessor(theirs["min_length"], eos))
    if "forced_bos_token_id" in theirs:
        out.append(ForcedBOSTokenLogitsProcessor(theirs["forced_bos_token_id"]))
    out.append(SuppressTokensLogitsProcessor([pad]))
    return out


@pytest.mark.parametrize("beam", [1, 5])
@pytest.mark.parametrize("setting", range(len(SETTINGS)))
@pytest.mark.parametrize("family", ["bart", "t5"])
def test_outputs_equal_generate(models, family, setting, beam):
    ours_of, theirs, families = SETTINGS[setting]
    if family not in families:
        pytest.skip(f"{family} has no such token")
    task, model, inputs = models[family]
    ids, B = task.ids, inputs["src"].shape[0]
    start = model.hf.config.decoder_start_token_id
    hyp = decode(
        model, inputs, torch.full((B,), LIMIT), beam=beam, nbest=beam, len_penalty=1.0, early_stopping=False,
        eos=ids.eos, bos=ids.pad, pad=ids.pad, eos_at_limit=False, processors=ProcessorList(ours_of(ids.eos)),
    )  # fmt: skip
    if beam == 1:  # generate's greedy: the same processors on log-probabilities
        keywords = {"logits_processor": _on_log_probs(theirs, ids.eos, ids.pad), "suppress_tokens": None}
    else:
        keywords = {"suppress_tokens": [ids.pad], "forced_bos_token_id": None, **theirs}
    with torch.no_grad():
        out = model.hf.generate(
            input_ids=inputs["src"], attention_mask=inputs["src"].ne(ids.pad).long(), do_sample=False,
            num_beams=beam, num_return_sequences=beam, length_penalty=1.0, early_stopping=False,
            max_length=LIMIT + 2, forced_eos_token_id=None, decoder_start_token_id=start,
            **{"min_length": 0, "no_repeat_ngram_size": 0, "forced_bos_token_id": None, **keywords},
        )  # fmt: skip
    rows = out[:, 1:].tolist()
    for b in range(B):
        theirs_b = [row[: row.index(ids.eos)] if ids.eos in row else row for row in rows[b * beam : (b + 1) * beam]]
        theirs_b = [[t for t in row if t != ids.pad] for row in theirs_b]
        mine = [t for t, _ in hyp.nbest[b]] if hyp.nbest is not None else [hyp.tokens[b]]
        assert mine == theirs_b, f"sentence {b}"


def test_processors_see_generates_first_token(models):
    """The input_ids a processor sees at the first step start with the decoder's start token, as generate's."""
    for family in ("bart", "t5"):
        task, model, inputs = models[family]
        seen = []

        class Spy(LogitsProcessor):
            def __call__(self, input_ids, scores):
                seen.append(input_ids[:, 0].unique().tolist())
                return scores

        ids, B = task.ids, inputs["src"].shape[0]
        decode(
            model, inputs, torch.full((B,), 2), beam=2, eos=ids.eos, bos=ids.pad, pad=ids.pad, eos_at_limit=False,
            processors=ProcessorList([Spy()]),
        )  # fmt: skip
        assert seen and all(s == [model.hf.config.decoder_start_token_id] for s in seen), family
