"""Every field of every registered schema declares the values it accepts, and a value just outside each
declared bound is refused when a config is loaded, with an error naming the dotted key (issue 31, section 3).

The walk covers every task, model and head schema the registries hold (plugins included) and the shared
sections, so a new numeric field cannot ship without a bound, nor a string field with a fixed set of values
without `choices`: this test fails first.
"""

from __future__ import annotations

import math
import re
import typing

import pytest

from structseq.config import DataConfig, DecodeConfig, OptimConfig, TrainConfig, config_from_dict, schemas
from structseq.errors import ConfigError
from structseq.fields import walk_fields
from structseq.registry import ARCHS

#: numeric fields where no bound makes sense (none today; say why when adding one)
UNBOUNDED_NUMBERS: dict[str, str] = {}

#: string fields whose values are not a fixed list known to the schema, and who checks them instead
OPEN_STRINGS = {
    "type": "the task or head registry (a chosen section's key: unknown names are refused by build_section)",
    "arch": "the model registry (a chosen section's key)",
    "dataset": "the dataset registry or 'files' (config is a leaf and cannot list datasets; load_dataset refuses)",
    "train": "a split name or a file",
    "valid": "a split name, a file or NAME:SPLIT",
    "test": "split names, files or NAME:SPLIT",
    "columns": "column names of a TSV file (duplicates refused by check_config)",
    "valid_metric": "the task's metrics (check_config, which knows the task)",
    "init_from": "a checkpoint file or a run directory",
    "lexicon": "a learner name or a lexicon file (build_lexical_head refuses anything else)",
    "pretrained": "a local folder of a Hugging Face encoder",
}

SECTIONS = {"data": DataConfig, "optim": OptimConfig, "train": TrainConfig, "decode": DecodeConfig}


def _placements() -> list[tuple[str, type, dict]]:
    """(label, schema, config dict that selects it) for every schema a config can hold."""
    out = [(name, cls, {}) for name, cls in SECTIONS.items()]
    for name, cls in schemas("task").items():
        out.append((f"task:{name}", cls, {"task": {"type": name}}))
    for name, cls in schemas("model").items():
        out.append((f"model:{name}", cls, {"model": {"arch": name}, "task": {"type": ARCHS.get(name).tasks[0]}}))
    for name, cls in schemas("head").items():
        out.append((f"head:{name}", cls, {"model": {"head": {"type": name}}}))
    return out


def _prefix(label: str) -> str:
    return {"task": "task", "model": "model", "head": "model.head"}.get(label.split(":")[0], label)


def _with(base: dict, prefix: str, key: str, value) -> dict:
    """`base` with `prefix.key` set to `value` (sections merged)."""
    d = {k: dict(v) for k, v in base.items()}
    parts = f"{prefix}.{key}".split(".")
    node = d
    for p in parts[:-1]:
        if isinstance(node.get(p), dict):
            node[p] = dict(node[p])
        else:
            node[p] = {}
        node = node[p]
    node[parts[-1]] = value
    return d


def _numeric(hint) -> type | None:
    """int or float when `hint` is a number, an optional number or a list of numbers, else None."""
    args = {a for a in typing.get_args(hint) if a is not type(None)} or {hint}
    if typing.get_origin(hint) is list:
        args = set(typing.get_args(hint))
    for t in (float, int):
        if t in args:
            return t
    return None


def _outside(kind: type, op: str, bound) -> list:
    """Values just outside a bound `op bound`: the bound itself for strict ones, the nearest value beyond
    it for the others (integers: one step; floats: the next representable number and a visible step)."""
    if op in ("gt", "lt"):
        return [bound]
    direction = -1 if op == "ge" else 1
    if kind is int:
        return [bound + direction]
    return [math.nextafter(float(bound), direction * math.inf), float(bound) + direction * 0.5]


def _cases():
    for label, cls, base in _placements():
        for key, f, hint in walk_fields(cls):
            yield label, cls, base, key, f, hint


CASES = list(_cases())


def _id(case) -> str:
    return f"{case[0]}.{case[3]}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_every_field_declares_its_values(case):
    label, _, _, key, f, hint = case
    name = key.rsplit(".", 1)[-1]
    if _numeric(hint) is not None:
        assert {"ge", "gt", "le", "lt"} & set(f.metadata) or key in UNBOUNDED_NUMBERS, (
            f"{label}: numeric field '{key}' declares no bound (ge/gt/le/lt); add one to its option()"
        )
    base = {a for a in typing.get_args(hint) if a is not type(None)} or {hint}
    if base == {str} and name not in OPEN_STRINGS:
        alternatives = " | " in f.metadata.get("help", "")
        assert {"choices", "pattern"} & set(f.metadata) or not alternatives, (
            f"{label}: string field '{key}' lists alternatives in its help but declares no choices"
        )


@pytest.mark.parametrize("case", [c for c in CASES if _numeric(c[5]) is not None], ids=_id)
def test_a_value_just_outside_each_bound_is_refused_naming_the_key(case):
    label, cls, base, key, f, hint = case
    kind = _numeric(hint)
    dotted = f"{_prefix(label)}.{key}"
    checked = 0
    for op in ("ge", "gt", "le", "lt"):
        if op not in f.metadata:
            continue
        for bad in _outside(kind, op, f.metadata[op]):
            if kind is int and isinstance(bad, float):
                continue
            value = bad
            if typing.get_origin(hint) is list:
                size = f.metadata.get("length", 1)
                good = f.default_factory()
                value = ([bad] + list(good[1:size])) if good else [bad] * size
            with pytest.raises(
                ConfigError, match=re.escape(f"'{dotted}") + r"(\[0\])?' must be|each item of '" + re.escape(dotted)
            ):
                config_from_dict(_with(base, _prefix(label), key, value))
            checked += 1
    assert checked or key in UNBOUNDED_NUMBERS


@pytest.mark.parametrize("case", [c for c in CASES if "choices" in c[4].metadata], ids=_id)
def test_a_value_outside_the_choices_is_refused_naming_the_key(case):
    label, _, base, key, _, _ = case
    dotted = f"{_prefix(label)}.{key}"
    with pytest.raises(ConfigError, match=re.escape(f"'{dotted}': invalid value 'no-such-choice'; choices: ")):
        config_from_dict(_with(base, _prefix(label), key, "no-such-choice"))


def test_the_walk_sees_every_kind_of_schema():
    labels = {c[0] for c in CASES}
    for expected in (
        "task:context-seq2seq",
        "model:transformer",
        "model:lstm",
        "model:dangle",
        "model:rdangle-sep",
        "model:context-transformer",
        "head:lexical",
        "data",
        "optim",
        "train",
        "decode",
    ):
        assert expected in labels
    assert len(CASES) > 150
