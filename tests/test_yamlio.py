"""Issue 12, values: duplicate YAML keys are errors naming the line."""

from __future__ import annotations

import pytest

from structseq.errors import ConfigError
from structseq.yamlio import load_yaml


@pytest.mark.parametrize(
    "text, message",
    [
        ("optim:\n  lr: 1e-3\n  lr: 2\n", r"c\.yaml:3: duplicate key 'lr' \(first given on line 2\)"),
        ("train: {}\ntrain: {max_steps: 3}\n", r"c\.yaml:2: duplicate key 'train' \(first given on line 1\)"),
        ("data: {a: 1, a: 2}\n", r"c\.yaml:1: duplicate key 'a'"),
        ("data: [\n", r"c\.yaml:2: not valid YAML"),
    ],
)
def test_duplicate_keys_and_syntax_errors_name_file_and_line(text, message):
    with pytest.raises(ConfigError, match=message):
        load_yaml(text, "c.yaml")


def test_plain_yaml_still_loads():
    assert load_yaml("optim: {lr: 0.001, betas: [0.9, 0.98]}\n") == {"optim": {"lr": 0.001, "betas": [0.9, 0.98]}}
    assert load_yaml("a: &x {b: 1}\nc: *x\n") == {"a": {"b": 1}, "c": {"b": 1}}


# ---------------------------------------------------------------- every value range-checked at load


def _load(tmp_path, text: str, overrides=()):
    from structseq.config import load_config

    path = tmp_path / "c.yaml"
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return load_config(path, list(overrides))


@pytest.mark.parametrize(
    "text, message",
    [
        ("optim: {accumulate: 0}", r"'optim.accumulate' must be >= 1, got 0"),
        ("train: {patience: -1}", r"'train.patience' must be >= 0, got -1"),
        (
            "train: {valid_metric: chrf}",
            r"'train.valid_metric': 'chrf' is not a metric of task 'seq2seq'; "
            r"choices: loss, exact_match, bleu",
        ),
        ("train: {max_steps: 0}", r"'train.max_steps' must be >= 1, got 0"),
        ("decode: {beam: 0}", r"'decode.beam' must be >= 1, got 0"),
        ("optim: {batch_size: 0}", r"'optim.batch_size' must be >= 1, got 0"),
        ("decode: {batch_size: 0}", r"'decode.batch_size' must be >= 1, got 0"),
        ("optim: {label_smoothing: 2}", r"'optim.label_smoothing' must be >= 0 and < 1, got 2"),
        ("data: {valid_fraction: -0.5}", r"'data.valid_fraction' must be > 0 and < 1, got -0.5"),
        ("train: {log_every: 0}", r"'train.log_every' must be >= 1, got 0"),
        ("model: {arch: lstm, dropout: 2}", r"'model.dropout' must be >= 0 and < 1, got 2"),
        ("model: {arch: lstm, hidden_dim: 0}", r"'model.hidden_dim' must be >= 1, got 0"),
        ("model: {head: {type: copy, dropout: -0.1}}", r"'model.head.dropout' must be >= 0 and < 1"),
        ("optim: {lr: -1}", r"'optim.lr' must be > 0, got -1"),
        ("optim: {lr: .nan}", r"'optim.lr' must be a finite number"),
        ("optim: {betas: [0.9]}", r"'optim.betas' must be a list of 2 items, got \[0.9\]"),
        ("optim: {betas: [0.9, 1.5]}", r"each item of 'optim.betas' must be >= 0 and < 1, got 1.5"),
        ("train: {threads: -1}", r"'train.threads' must be >= 0, got -1"),
        ("optim: {max_tokens: null, batch_size: null}", r"'optim.max_tokens' and 'optim.batch_size' are both null"),
        ("optim: {schedule: linear}", r"'optim.schedule': invalid value 'linear'; choices: constant, noam"),
        ("train: {device: gpu}", r"'train.device': invalid value 'gpu'; choices: auto, cpu, cuda, cuda:N"),
        ("data: {bleu_tokenize: nosuch}", r"'data.bleu_tokenize': invalid value 'nosuch'; choices: .*13a"),
        ("data: {max_length: 0}", r"'data.max_length' must be >= 1, got 0"),
        ("model: {d_model: 30, n_heads: 4}", r"'model.d_model' \(30\) must be a multiple of 'model.n_heads' \(4\)"),
        ("model: {head: {type: [1]}}", r"'model.head.type': unknown head"),
        ("", r"c\.yaml: empty config file"),
        ("# only a comment\n", r"c\.yaml: empty config file"),
        ("- a list\n", r"c\.yaml: the top level must be a mapping"),
        ("optim: {lr: 1e-3}\noptim: {lr: 2e-3}\n", r"c\.yaml:2: duplicate key 'optim'"),
        (b"optim: {lr: 1e-3}  # caf\xe9\n", r"c\.yaml:1: not UTF-8 \(byte 0xe9\)"),
    ],
)
def test_invalid_values_name_the_key_and_the_valid_range(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text)


@pytest.mark.parametrize(
    "override, message",
    [
        ("optim.lr=[1", r"override 'optim.lr=\[1'.*not valid YAML"),
        ("optim.lr", r"override 'optim.lr' is not of the form key=value"),
        ("=3", r"override '=3': '' is not a dotted key"),
        ("optim..lr=3", r"override 'optim..lr=3': 'optim..lr' is not a dotted key"),
        ("model.arch.x=1", r"override 'model.arch.x=1': 'arch' is not a section"),
        ("optim.betas={a: 1, a: 2}", r"duplicate key 'a'"),
        ("optim.accumulate=0", r"'optim.accumulate' must be >= 1"),
    ],
)
def test_malformed_overrides_are_errors_naming_them(tmp_path, override, message):
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, "model: {arch: lstm}\n", [override])


def test_an_empty_section_takes_overrides(tmp_path):
    assert _load(tmp_path, "optim:\nmodel: {arch: lstm}\n", ["optim.lr=0.5"]).optim.lr == 0.5


def test_every_limit_is_declared_next_to_its_field():
    """Each numeric field of the schemas declares its range (ge/gt/le/lt) and each string field whose help
    lists alternatives (`a | b`) its choices, so no value reaches the model or the loop unchecked."""
    import dataclasses
    import typing

    from structseq.config import Config, schemas

    classes = {*schemas("model").values(), *schemas("head").values()}
    classes |= {typing.get_type_hints(Config)[f.name] for f in dataclasses.fields(Config) if "choose" not in f.metadata}
    classes = {c for c in classes if c.__module__ == "structseq.config"}  # schemas in other modules: their own tests
    checked_elsewhere = {"arch", "type", "lexicon", "valid_metric"}  # the registries, a learner or file, the task
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            base = {a for a in typing.get_args(hints[f.name]) if a is not type(None)} or {hints[f.name]}
            if base & {int, float} or hints[f.name] == list[float]:
                assert {"ge", "gt", "le", "lt"} & set(f.metadata), f"{cls.__name__}.{f.name} has no range"
            elif base == {str} and " | " in f.metadata["help"] and f.name not in checked_elsewhere:
                assert {"choices", "pattern"} & set(f.metadata), f"{cls.__name__}.{f.name} has no choices"


def test_evaluate_rejects_an_unknown_bleu_tokenizer(tmp_path):
    from structseq.api import Run
    from structseq.config import config_from_dict
    from structseq.tasks import get_task

    cfg = config_from_dict({})
    run = Run(tmp_path, cfg, None, {}, "best", get_task(cfg))
    with pytest.raises(ConfigError, match="'--bleu-tokenize': invalid value 'nosuch'; choices: .*13a"):
        run.evaluate("nosuch-split", bleu_tokenize="nosuch")
