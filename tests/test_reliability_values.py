"""Issue 12, values: duplicate YAML keys are errors naming the line."""

from __future__ import annotations

import pytest

from structseq.errors import ConfigError
from structseq.yamlio import load_yaml


@pytest.mark.parametrize("text, message", [
    ("optim:\n  lr: 1e-3\n  lr: 2\n", r"c\.yaml:3: duplicate key 'lr' \(first given on line 2\)"),
    ("train: {}\ntrain: {max_steps: 3}\n", r"c\.yaml:2: duplicate key 'train' \(first given on line 1\)"),
    ("data: {a: 1, a: 2}\n", r"c\.yaml:1: duplicate key 'a'"),
    ("data: [\n", r"c\.yaml:2: not valid YAML"),
])
def test_duplicate_keys_and_syntax_errors_name_file_and_line(text, message):
    with pytest.raises(ConfigError, match=message):
        load_yaml(text, "c.yaml")


def test_plain_yaml_still_loads():
    assert load_yaml("optim: {lr: 0.001, betas: [0.9, 0.98]}\n") == {"optim": {"lr": 0.001, "betas": [0.9, 0.98]}}
    assert load_yaml("a: &x {b: 1}\nc: *x\n") == {"a": {"b": 1}, "c": {"b": 1}}
