"""`structseq config`: every key of a schema with its type, default, bounds and help, from the registries."""

import dataclasses
import json

from typer.testing import CliRunner

from structseq.cli import app
from structseq.fields import option
from structseq.models.lstm import LSTMConfig
from structseq.registry import ARCHS, register_arch

runner = CliRunner()


def test_lists_every_key_of_an_arch_with_its_bounds():
    out = runner.invoke(app, ["config", "lstm", "--json"])
    assert out.exit_code == 0, out.output
    rows = {r["key"]: r for r in json.loads(out.output)}
    assert set(rows) == {f"model.{f.name}" for f in dataclasses.fields(LSTMConfig)}
    assert rows["model.dropout"]["bounds"] == ">= 0; < 1" and rows["model.dropout"]["default"] == 0.4
    assert rows["model.combine_activation"]["bounds"] == "one of none, tanh"
    assert rows["model.head"]["type"] == "section" and "softmax" in rows["model.head"]["help"]


def test_shared_sections_and_names_and_unknown():
    out = runner.invoke(app, ["config", "optim", "--json"])
    assert {"optim.lr", "optim.warmup"} <= {r["key"] for r in json.loads(out.output)}
    names = json.loads(runner.invoke(app, ["config", "--json"]).output)
    assert "lstm" in names["model"] and "lexical" in names["head"] and "supertag" in names["task"]
    bad = runner.invoke(app, ["config", "nosuch"])
    assert bad.exit_code != 0


def test_a_registered_plugin_is_listed():
    @dataclasses.dataclass
    class ProbeConfig:
        arch: str = option("config-probe", "a plugin model")
        width: int = option(8, "its width", ge=1, le=64)

    register_arch("config-probe", config=ProbeConfig)(lambda cfg, vocabs, train=None: None)
    try:
        rows = json.loads(runner.invoke(app, ["config", "config-probe", "--json"]).output)
        assert {"key": "model.width", "type": "int", "default": 8, "bounds": ">= 1; <= 64", "help": "its width"} in rows
    finally:
        ARCHS.remove("config-probe")
