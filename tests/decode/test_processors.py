"""Per-step logits processors (`structseq.decode.processors`): each equals its transformers namesake on random
prefixes and scores (the independent reference), the config route builds them in transformers' order with typed
settings and dotted-key errors, and the sampling warpers reproduce the draw's own filtering bit for bit."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
from transformers.generation import logits_process as hf  # noqa: E402

from structseq.config import config_from_dict, load_config  # noqa: E402
from structseq.decode.processors import OutputSpace, ProcessorList, build_processors  # noqa: E402
from structseq.decode.processors.builtin import (  # noqa: E402
    BannedTokens,
    Forced,
    MinLength,
    NoRepeatNGram,
    PrefixAllowedTokens,
    RepetitionPenalty,
    Temperature,
    TopK,
    TopP,
    sampling_warpers,
)
from structseq.decode.sampling import Sampling, _draw  # noqa: E402
from structseq.errors import ConfigError  # noqa: E402

V = 23


def _inputs(seed: int, rows: int = 6, length: int = 7, vocab: int = 5):
    """Prefixes over a few ids (so n-grams and repeats occur) and log-probabilities over V."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (rows, length), generator=g)
    scores = torch.randn(rows, V, generator=g).mul(3).log_softmax(-1)
    return ids, scores


def _same(ours, theirs, ids, scores):
    a, b = ours(ids, scores.clone()), theirs(ids, scores.clone())
    assert torch.equal(a.isinf(), b.isinf())
    torch.testing.assert_close(a, b, rtol=0, atol=0)


CASES = [
    (lambda: Temperature(0.7), lambda: hf.TemperatureLogitsWarper(0.7)),
    (lambda: TopK(4), lambda: hf.TopKLogitsWarper(4)),
    (lambda: TopK(2, min_keep=5), lambda: hf.TopKLogitsWarper(2, min_tokens_to_keep=5)),
    (lambda: RepetitionPenalty(1.3), lambda: hf.RepetitionPenaltyLogitsProcessor(1.3)),
    (lambda: RepetitionPenalty(0.8), lambda: hf.RepetitionPenaltyLogitsProcessor(0.8)),
    (lambda: BannedTokens([3, 7, 22]), lambda: hf.NoBadWordsLogitsProcessor([[3], [7], [22]], eos_token_id=2)),
]


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("case", range(len(CASES)))
def test_equals_transformers(case, seed):
    ours, theirs = CASES[case]
    ids, scores = _inputs(seed)
    _same(ours(), theirs(), ids, scores)


@pytest.mark.parametrize("p", [0.3, 0.75, 0.95])
@pytest.mark.parametrize("seed", range(5))
def test_top_p_equals_transformers(p, seed):
    ids, scores = _inputs(seed)
    _same(TopP(p), hf.TopPLogitsWarper(p), ids, scores)
    _same(TopP(p, min_keep=3), hf.TopPLogitsWarper(p, min_tokens_to_keep=3), ids, scores)


@pytest.mark.parametrize("n", [1, 2, 3, 4])
@pytest.mark.parametrize("length", [1, 2, 3, 6, 12])
def test_no_repeat_ngram_equals_transformers(n, length):
    for seed in range(4):
        ids, scores = _inputs(seed, length=length, vocab=3)
        _same(NoRepeatNGram(n), hf.NoRepeatNGramLogitsProcessor(n), ids, scores)


@pytest.mark.parametrize("length", [1, 2, 3, 4, 5])
def test_min_length_and_forced_equal_transformers(length):
    """Positions count output tokens; transformers' lengths count the decoder start too (input_ids' first)."""
    ids, scores = _inputs(length, length=length)
    _same(MinLength(3, eos=2), hf.MinLengthLogitsProcessor(4, eos_token_id=2), ids, scores)
    _same(Forced(5, 0), hf.ForcedBOSTokenLogitsProcessor(5), ids, scores)
    _same(Forced(2, 2), hf.ForcedEOSTokenLogitsProcessor(4, eos_token_id=2), ids, scores)


def test_prefix_allowed_equals_transformers():
    def allowed(batch_id, prefix):
        return sorted({int(prefix[-1]) + batch_id, (int(prefix.sum()) * 7) % V, 2})

    ids, scores = _inputs(0, rows=6)
    _same(PrefixAllowedTokens(allowed, num_beams=3), hf.PrefixConstrainedLogitsProcessor(allowed, 3), ids, scores)


@pytest.mark.parametrize("settings", [(1.0, 0, 1.0), (0.6, 0, 1.0), (1.3, 5, 1.0), (0.8, 0, 0.7), (0.9, 8, 0.6)])
def test_sampling_warpers_reproduce_the_draw(settings):
    """temperature, top-k, top-p as processors give the scores the seeded draw filters, bit for bit: the same
    generator state then draws the same tokens."""
    t, k, p = settings
    ids, lp = _inputs(3, rows=64)
    warped = sampling_warpers(t, k, p)(ids, lp)
    g1, g2 = torch.Generator().manual_seed(11), torch.Generator().manual_seed(11)
    ours = torch.multinomial(warped.softmax(-1), 1, generator=g1)[:, 0]
    assert torch.equal(ours, _draw(lp, Sampling(t, k, p), g2))


def _decode(processors, grammar=None):
    d = {"decode": {"processors": processors}}
    return config_from_dict(d).decode


def test_config_builds_in_transformers_order():
    space = OutputSpace(tokens=[f"w{i}" for i in range(V)])
    cfg = _decode(
        {"top_p": {"p": 0.5}, "temperature": {"value": 0.5}, "no_repeat_ngram": {}, "banned_tokens": {"tokens": ["w4"]}}
    )
    built = build_processors(cfg, space)
    assert [type(p).__name__ for p in built] == ["NoRepeatNGram", "BannedTokens", "Temperature", "TopP"]
    assert built[0].size == 3 and built[1].ids == [4]
    assert build_processors(_decode({}), space) == ProcessorList()


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"'decode.processors.top_k.k' must be >= 1, got 0"):
        _decode({"top_k": {"k": 0}})
    with pytest.raises(ConfigError, match=r"'decode.processors.topk': unknown processor 'topk'; choices: .*top_k"):
        _decode({"topk": {}})
    with pytest.raises(ConfigError, match=r"unknown key 'decode.processors.top_p.k'"):
        _decode({"top_p": {"k": 3}})
    cfg = load_config(
        None, ["decode.processors.repetition_penalty.penalty=1.5", "decode.processors.min_length.tokens=2"]
    )
    assert cfg.decode.processors["repetition_penalty"].penalty == 1.5
    assert cfg.decode.processors["min_length"].tokens == 2
    space = OutputSpace(tokens=["a", "b"])
    with pytest.raises(ConfigError, match=r"'decode.processors.banned_tokens.tokens\[1\]': 'zz' is not an output"):
        build_processors(_decode({"banned_tokens": {"tokens": ["a", "zz"]}}), space)


def test_config_round_trips_through_a_saved_run():
    cfg = _decode({"top_k": {"k": 7}})
    again = config_from_dict(
        {"decode": config_from_dict({"decode": {"processors": {"top_k": {"k": 7}}}}).to_dict()["decode"]}
    )
    assert again.decode.processors == cfg.processors


def test_cli_config_lists_processor_keys(capsys):
    from structseq.cli.config import find_schema, schema_rows

    section, cls = find_schema("decode")
    keys = {r["key"] for r in schema_rows(cls, section + ".")}
    assert {"decode.processors", "decode.processors.top_k.k", "decode.processors.no_repeat_ngram.size"} <= keys
