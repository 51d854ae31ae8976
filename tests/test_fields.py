"""What `fields` promises for every field shape: bounds exact at their edges (ge/le inclusive, gt/lt strict,
every item of a list), a list of exactly `length` items, choices (a tuple or a function) and patterns matched
whole, bools never numbers, YAML's string floats read as floats and non-finite ones refused, a single path
where a list is expected, unknown keys named with the valid ones, list defaults never shared between
configs, and overrides that never change the caller's dict."""

import math
from dataclasses import dataclass, field

import pytest

from structseq.errors import ConfigError
from structseq.fields import apply_overrides, build_section, check_type, check_value, option


@dataclass
class Inner:
    depth: int = option(2, "depth", ge=1, le=8)


@dataclass
class Toy:
    width: int = option(4, "width", ge=1)
    rate: float = option(0.5, "rate", gt=0.0, lt=1.0)
    scale: float = option(1.0, "scale")
    sizes: list[int] = option([1, 2], "sizes", ge=0, length=2)
    name: str = option("a", "name", choices=lambda: ("a", "b"))
    tag: str = option("x1", "tag", pattern=(r"x\d", "x and a digit"))
    files: list[str] = option([], "files")
    limit: int | None = option(None, "limit", ge=0)
    flag: bool = option(False, "flag")
    inner: Inner = field(default_factory=Inner)


def build(**values):
    return build_section(Toy, values, "toy.", lambda kind: {})


@pytest.mark.parametrize(
    "values, ok",
    [
        ({"width": 1}, True),
        ({"width": 0}, False),
        ({"rate": 0.999}, True),
        ({"rate": 0.0}, False),
        ({"rate": 1.0}, False),
        ({"rate": 1e-9}, True),
        ({"sizes": [0, 5]}, True),
        ({"sizes": [3, -1]}, False),
        ({"sizes": [1, 2, 3]}, False),
        ({"sizes": [1]}, False),
        ({"inner": {"depth": 8}}, True),
        ({"inner": {"depth": 9}}, False),
        ({"inner": {"depth": 1}}, True),
        ({"inner": {"depth": 0}}, False),
        ({"limit": None}, True),
        ({"limit": 0}, True),
        ({"limit": -1}, False),
    ],
)
def test_bounds_are_exact_at_their_edges(values, ok):
    if ok:
        build(**values)
    else:
        with pytest.raises(ConfigError, match=r"'toy\.(width|rate|sizes|inner\.depth|limit)'"):
            build(**values)


def test_choices_and_patterns_match_whole_strings():
    assert build(name="b", tag="x7").tag == "x7"
    with pytest.raises(ConfigError, match=r"'toy.name': invalid value 'c'; choices: a, b"):
        build(name="c")
    for bad in ("x12", "ax1", "x"):
        with pytest.raises(ConfigError, match="choices: x and a digit"):
            build(tag=bad)


def test_types_bools_string_floats_and_non_finite_numbers():
    assert build(rate="5e-1").rate == 0.5  # PyYAML reads 5e-1 as a string
    assert build(rate=0.25).rate == 0.25 and isinstance(build(width=3).width, int)
    for key, value, what in (
        ("width", True, "an integer"),
        ("scale", False, "a number"),
        ("scale", True, "a number"),
        ("width", 2.0, "an integer"),
        ("flag", 1, "true or false"),
        ("width", "3", "an integer"),
    ):
        with pytest.raises(ConfigError, match=f"'toy.{key}' must be {what}"):
            build(**{key: value})
    for value in ("inf", "nan", 1e999, 10**400):
        with pytest.raises(ConfigError, match="finite"):
            check_type(value, float, "k")
    assert math.isclose(check_type(3, float, "k"), 3.0)


def test_a_single_path_where_a_list_is_expected_and_list_items_are_checked():
    assert build(files="one.tsv").files == ["one.tsv"]
    with pytest.raises(ConfigError, match=r"'toy.files\[1\]' must be a string"):
        build(files=["a", 2])
    with pytest.raises(ConfigError, match=r"each item of 'toy.sizes' must be >= 0, got -1"):
        build(sizes=[-1, 0])


def test_unknown_keys_are_named_with_the_valid_ones():
    with pytest.raises(ConfigError, match=r"unknown key 'toy.widht'; valid keys: files, flag, inner, limit, name"):
        build(widht=3)
    assert build_section(Toy, {"widht": 3}, "toy.", lambda kind: {}, lenient=True).width == 4
    with pytest.raises(ConfigError, match="'toy' must be a mapping"):
        build_section(Toy, [1], "toy.", lambda kind: {})


def test_list_defaults_are_not_shared_between_configs():
    a, b = build(), build()
    a.sizes.append(9)
    a.files.append("x")
    assert b.sizes == [1, 2] and b.files == [] and Toy().sizes == [1, 2]


def test_overrides_nest_parse_yaml_and_leave_the_input_alone():
    base = {"optim": {"lr": 0.1}, "task": "seq2seq"}
    out = apply_overrides(base, ["optim.lr=0.002", "train.max_steps=10", "task.subword=bpe"], {"task": "type"})
    assert out == {"optim": {"lr": 0.002}, "train": {"max_steps": 10}, "task": {"type": "seq2seq", "subword": "bpe"}}
    assert base == {"optim": {"lr": 0.1}, "task": "seq2seq"}
    for bad in ("optim.lr", "optim..lr=1", "1x=2"):
        with pytest.raises(ConfigError, match="override"):
            apply_overrides(base, [bad])
    with pytest.raises(ConfigError, match="'lr' is not a section"):
        apply_overrides(base, ["optim.lr.x=1"])


def test_check_value_passes_none_and_names_each_bound():
    check_value(None, {"ge": 1}, "k")
    with pytest.raises(ConfigError, match=r"'k' must be >= 1 and < 3, got 3"):
        check_value(3, {"ge": 1, "lt": 3}, "k")
