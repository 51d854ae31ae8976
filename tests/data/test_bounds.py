"""Issue 31, sections 2 and 3: values that make no sense are refused naming the key, and every input a model
sees has a finite maximum length, refused (or, in training, skipped) by name and line, quickly.

The generic walk over every schema is tests/config/test_schema_bounds.py; here are the issue's own examples, the
cross-field rules, the vocabulary `data.min_freq` leaves, and the lengths."""

from __future__ import annotations

import inspect
import time
import warnings

import pytest

from structseq.api import Run
from structseq.config import config_from_dict
from structseq.data.limits import MAX_CONTEXT_LENGTH, MAX_LENGTH
from structseq.data.training import load_training_data
from structseq.errors import ConfigError, DataError, StructseqError
from structseq.tasks import get_task

CONTEXT = {"task": {"type": "context-seq2seq"}, "model": {"arch": "context-transformer"}}


def _ctx(**task) -> dict:
    return {"task": {"type": "context-seq2seq", **task}, "model": {"arch": "context-transformer"}}


@pytest.mark.parametrize(
    "config, message",
    [
        (_ctx(context_sentences=-1), r"'task.context_sentences' must be >= 0, got -1"),
        (_ctx(max_context_tokens=-1), r"'task.max_context_tokens' must be >= 0, got -1"),
        (_ctx(p_drop_context=1.5), r"'task.p_drop_context' must be >= 0 and <= 1, got 1.5"),
        (_ctx(p_predict_context=-0.1), r"'task.p_predict_context' must be >= 0 and <= 1"),
        (_ctx(subword="wordpiece"), r"'task.subword': invalid value 'wordpiece'; choices: none, bpe"),
        (_ctx(subword_vocab_size=0), r"'task.subword_vocab_size' must be >= 1, got 0"),
        (
            {**CONTEXT, "model": {"arch": "context-transformer", "decoder": "bogus"}},
            r"'model.decoder': invalid value 'bogus'; choices: sequential, concatenate",
        ),
        (
            {**CONTEXT, "model": {"arch": "context-transformer", "context_logit_scale": 0}},
            r"'model.context_logit_scale' must be > 0, got 0",
        ),
        (
            {**CONTEXT, "model": {"arch": "context-transformer", "context_window": -4}},
            r"'model.context_window' must be > 0, got -4",
        ),
        (
            {**CONTEXT, "model": {"arch": "context-transformer", "source_layers": [0, 1]}},
            r"each item of 'model.source_layers' must be >= 1, got 0",
        ),
        ({**CONTEXT, "model": {"arch": "context-transformer", "dropout": 1}}, r"'model.dropout' must be >= 0 and < 1"),
        (
            {"model": {"arch": "transformer", "attention_dropout": 1.0}},
            r"'model.attention_dropout' must be >= 0 and < 1",
        ),
        ({"model": {"arch": "dangle", "activation_dropout": 1.2}}, r"'model.activation_dropout' must be >= 0 and < 1"),
        ({"model": {"arch": "lstm", "dropout": 1}}, r"'model.dropout' must be >= 0 and < 1"),
        ({"model": {"arch": "lstm", "head": {"type": "lexical", "dropout": 1}}}, r"'model.head.dropout' must be >= 0"),
        ({"model": {"arch": "transformer", "max_length": 0}}, r"'model.max_length' must be >= 1, got 0"),
        ({"data": {"columns": ["source", "target", "source"]}}, r"'data.columns': 'source' named twice"),
        ({"train": {"patience": 3, "valid_every": 0}}, r"'train.patience' needs validation"),
        ({"optim": {"lr": 1e-3, "min_lr": 1e-2}}, r"'optim.min_lr' \(0.01\) must not exceed 'optim.lr' \(0.001\)"),
        (_ctx(p_drop_context=0.6, p_predict_context=0.6), r"'task.p_drop_context' \(0.6\) \+ 'task.p_predict_context'"),
        ({"data": {"max_length": 5000}}, r"'data.max_length' \(5000\) exceeds 'model.max_length' \(1024\)"),
        (
            _ctx(max_context_tokens=5000),
            r"'task.max_context_tokens' \(5000\) exceeds 'model.max_context_length' \(4096\)",
        ),
    ],
)
def test_values_that_make_no_sense_are_refused_naming_the_key(config, message):
    with pytest.raises(ConfigError, match=message):
        cfg = config_from_dict(config)
        get_task(cfg)  # the one rule that involves two task keys is the task's


def test_duplicate_columns_ignore_dropped_ones():
    assert config_from_dict({"data": {"columns": ["source", "-", "target", "-"]}}).data.columns[1] == "-"


def test_builders_hold_no_second_copy_of_a_schema_bound():
    """One owner: a range or a choice the schema declares is not checked again where the model or the task
    is built (such copies drift apart)."""
    from structseq.models.context import build_context_transformer
    from structseq.tasks.context import ContextSeq2SeqTask

    builder = inspect.getsource(build_context_transformer)
    assert "not in DECODERS" not in builder and "context_logit_scale <= 0" not in builder
    assert "context_window <= 0" not in builder
    task_init = inspect.getsource(ContextSeq2SeqTask.__init__)
    assert '("none", "bpe")' not in task_init and "0 <= o.p_drop_context" not in task_init


# ---------------------------------------------------------------- data.min_freq


def _tsv(tmp_path, text: str, name: str = "d.tsv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _files(path, **data) -> dict:
    return {"data": {"dataset": "files", "train": str(path), "valid": str(path), **data}}


def test_min_freq_leaving_only_special_symbols_is_refused(tmp_path):
    path = _tsv(tmp_path, "a b\tA B\nb c\tB C\n")
    cfg = config_from_dict(_files(path, min_freq=1000))
    with pytest.raises(ConfigError, match=r"'data.min_freq' \(1000\): the src, tgt vocabulary keeps no token"):
        load_training_data(cfg, get_task(cfg))


def test_min_freq_says_how_many_tokens_it_kept(tmp_path):
    path = _tsv(tmp_path, "a b\tA B\nb c\tB C\n")
    cfg = config_from_dict(_files(path, min_freq=2))
    with pytest.warns(UserWarning, match=r"data.min_freq 2 kept 1 src, 1 tgt tokens"):
        data = load_training_data(cfg, get_task(cfg))
    assert data.vocabs["src"].itos[4:] == ["b"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # min_freq 1 keeps everything: nothing to say
        load_training_data(config_from_dict(_files(path)), get_task(config_from_dict(_files(path))))


# ---------------------------------------------------------------- lengths: a finite default for every input


def test_every_model_has_a_finite_default_maximum():
    for arch in ("transformer", "lstm", "dangle", "rdangle-sep", "context-transformer"):
        cfg = config_from_dict(
            {"task": "context-seq2seq" if arch.startswith("context") else "seq2seq", "model": {"arch": arch}}
        )
        assert cfg.data.max_length is None and cfg.model.max_length == MAX_LENGTH == 1024
    assert config_from_dict(CONTEXT).model.max_context_length == MAX_CONTEXT_LENGTH == 4096


def _quick(fn, seconds: float = 5.0):
    start = time.perf_counter()
    fn()
    assert time.perf_counter() - start < seconds


def _run(tmp_path, config: dict) -> Run:
    """A run without a model: input checks come before any decoding."""
    cfg = config_from_dict(config)
    return Run(tmp_path, cfg, None, {}, "best", get_task(cfg))


def test_a_100000_token_predict_line_is_a_one_line_error(tmp_path):
    run = _run(tmp_path, {})
    line = " ".join(["jump"] * 100_000)

    def predict():
        with pytest.raises(
            DataError,
            match=r"^<stdin>:2: source has 100000 tokens, more than the maximum length "
            r"1024 \(model.max_length\)$",
        ):
            run.predict(["jump twice", line], where="<stdin>")

    _quick(predict)
    with pytest.raises(DataError, match=r"<input>:1: source has 100000 tokens"):
        run.translate([line])


def test_a_huge_context_is_a_one_line_error_in_predict(tmp_path):
    run = _run(tmp_path, CONTEXT)
    line = "dax twice\t" + " ".join(["w"] * 100_000)

    def predict():
        with pytest.raises(
            DataError,
            match=r"^<stdin>:1: context has 100000 tokens, more than the maximum length "
            r"4096 \(model.max_context_length\)$",
        ):
            run.predict([line], where="<stdin>")

    _quick(predict)
    trimmed = _run(tmp_path, _ctx(max_context_tokens=50))  # the task keeps the last 50: nothing to refuse
    trimmed.check_input(trimmed.task.parse_input(line), "<stdin>", 1)


def test_training_skips_or_refuses_a_100000_token_line_by_name_and_line(tmp_path):
    path = _tsv(tmp_path, "a b\tA B\n" + " ".join(["a"] * 100_000) + "\tA\nc\tC\n")
    cfg = config_from_dict(_files(path))

    def skip():
        with pytest.warns(
            UserWarning,
            match=rf"skipped 2 examples longer than model.max_length 1024 tokens "
            rf"\(first: {path}:2\)",
        ):
            data = load_training_data(cfg, get_task(cfg))
        assert [e.source for e in data.train] == [("a", "b"), ("c",)]

    _quick(skip)
    cfg = config_from_dict(_files(path, too_long="error"))
    with pytest.raises(
        DataError,
        match=rf"^{path}:2: source has 100000 tokens, more than the maximum length 1024 "
        r"\(model.max_length\)$",
    ):
        load_training_data(cfg, get_task(cfg))


def test_training_skips_a_huge_context_and_evaluation_refuses_it(tmp_path):
    path = _tsv(tmp_path, "source\tcontext\ttarget\na\tx y\tA\nb\t" + " ".join(["w"] * 100_000) + "\tB\n")
    cfg = config_from_dict({**CONTEXT, **_files(path)})
    with pytest.warns(UserWarning, match=r"or with a context longer than model.max_context_length 4096"):
        data = load_training_data(cfg, get_task(cfg))
    assert [e.source for e in data.train] == [("a",)]
    run = Run(tmp_path, cfg, None, {}, "best", get_task(cfg))
    with pytest.raises(
        DataError,
        match=rf"^{path}:3: context has 100000 tokens, more than the maximum length 4096 "
        r"\(model.max_context_length\)$",
    ):
        run.load_split(str(path))


def test_a_generated_split_over_the_context_limit_is_refused_in_evaluation(tmp_path):
    cfg = config_from_dict(
        {
            **CONTEXT,
            "data": {"dataset": "ctx-commands"},
            "model": {"arch": "context-transformer", "max_context_length": 10},
        }
    )
    run = Run(tmp_path, cfg, None, {}, "best", get_task(cfg))
    with pytest.raises(
        DataError,
        match=r"ctx-commands/valid: example 1: context has \d+ tokens, more than "
        r"model.max_context_length 10",
    ):
        run.load_split("valid")


def test_data_max_length_below_the_model_maximum_is_what_applies(tmp_path):
    path = _tsv(tmp_path, "a b c\tA\nc\tC\n")
    cfg = config_from_dict(_files(path, max_length=2, too_long="error"))
    with pytest.raises(
        DataError,
        match=r"d\.tsv:1: source has 3 tokens, more than the maximum length 2 "
        r"\(data.max_length\)",
    ):
        load_training_data(cfg, get_task(cfg))


def test_a_model_without_a_declared_maximum_gets_the_default():
    from types import SimpleNamespace

    from structseq.data.limits import input_limits

    cfg = SimpleNamespace(data=SimpleNamespace(max_length=None), model=SimpleNamespace(), task=SimpleNamespace())
    assert input_limits(cfg) == {
        "max_length": MAX_LENGTH,
        "length_key": "data.max_length",
        "max_context": None,
        "context_key": "model.max_context_length",
    }


def test_no_training_examples_left_says_why(tmp_path):
    path = _tsv(tmp_path, " ".join(["a"] * 3000) + "\tA\n")
    cfg = config_from_dict(_files(path))
    with pytest.warns(UserWarning), pytest.raises(StructseqError, match=r"\(\d+ longer than model.max_length\)"):
        load_training_data(cfg, get_task(cfg))
