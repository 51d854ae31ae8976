"""Configs: validation errors name the key; every shipped config loads and builds."""

import pytest

from structseq.config import apply_overrides, config_from_dict, load_config
from structseq.data.vocab import Vocab
from structseq.errors import ConfigError
from structseq.models import build_model
from structseq.models.lstm import LSTMConfig
from structseq.models.transformer import TransformerConfig
from tests.fixtures.paths import ROOT as REPO

CONFIGS = sorted(
    p for p in REPO.glob("configs/**/*.yaml") if p.parent.name != "plans"
)  # reproduction plans (scripts/plan.py), not training configs


def test_unknown_key_is_named():
    with pytest.raises(ConfigError, match="unknown key 'optim.learning_rate'"):
        config_from_dict({"optim": {"learning_rate": 0.1}})
    with pytest.raises(ConfigError, match="unknown key 'model.d_model'"):
        config_from_dict({"model": {"arch": "lstm", "d_model": 3}})  # a Transformer key on an LSTM
    with pytest.raises(ConfigError, match="unknown key 'trainer'"):
        config_from_dict({"trainer": {}})


def test_wrong_type_is_named():
    with pytest.raises(ConfigError, match="'train.max_steps' must be an integer"):
        config_from_dict({"train": {"max_steps": "many"}})
    with pytest.raises(ConfigError, match="'model.norm_first' must be true or false"):
        config_from_dict({"model": {"norm_first": "yes"}})
    with pytest.raises(ConfigError, match="'optim.betas' must be a list"):
        config_from_dict({"optim": {"betas": 0.9}})
    with pytest.raises(ConfigError, match="unknown model 'gru'"):
        config_from_dict({"model": {"arch": "gru"}})


def test_overrides_parse_yaml_values_and_nest(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("model: {arch: lstm, hidden_dim: 64}\noptim: {lr: 0.1}\n")
    cfg = load_config(
        path,
        [
            "optim.lr=2e-3",
            "model.head.type=copy",
            "data.test=[gen, test]",
            "optim.max_tokens=null",
            "optim.batch_size=8",
        ],
    )
    assert isinstance(cfg.model, LSTMConfig) and cfg.model.hidden_dim == 64
    assert cfg.optim.lr == 0.002 and cfg.model.head.type == "copy"
    assert cfg.data.test == ["gen", "test"] and cfg.optim.max_tokens is None
    with pytest.raises(ConfigError, match=r"c\.yaml: unknown key 'optim.lrr'"):
        load_config(path, ["optim.lrr=1"])
    with pytest.raises(ConfigError, match="not of the form key=value"):
        apply_overrides({}, ["optim.lr"])


def test_round_trip_through_dict():
    cfg = config_from_dict({"model": {"arch": "transformer", "positions": "relative"}, "train": {"seed": 7}})
    again = config_from_dict(cfg.to_dict())
    assert again == cfg and isinstance(again.model, TransformerConfig)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_every_shipped_config_loads_and_builds(path):
    cfg = load_config(path)
    if getattr(type(cfg.model), "build_requires", ()):  # e.g. a local pretrained folder the config names by a
        pytest.skip("builds from a local checkpoint folder (model.pretrained: a placeholder path)")  # placeholder
    vocab = Vocab.build([["a", "b", "c"]])
    model = build_model(cfg.model, {"src": vocab, "tgt": vocab})
    assert model.num_parameters() > 0


def test_configs_exist():
    assert len(CONFIGS) >= 10


@pytest.mark.parametrize(
    "model, key",
    [
        ({"arch": "transformer", "head": {"type": "softmax", "lexicon": "simple"}}, "model.head.lexicon"),
        ({"arch": "lstm", "head": {"type": "copy", "tau": 0.5}}, "model.head.tau"),
        ({"arch": "dangle", "encoder_layers": 4}, "model.encoder_layers"),
        ({"arch": "rdangle-shr", "share_post_fusion": True}, "model.share_post_fusion"),
    ],
)
def test_keys_of_another_schema_are_errors(model, key):
    with pytest.raises(ConfigError, match=f"unknown key '{key}'"):
        config_from_dict({"model": model})


def test_one_registry_names_config_and_builder():
    from structseq.registry import ARCHS

    for name, arch in ARCHS.items():
        cfg = config_from_dict({"task": arch.tasks[0], "model": {"arch": name}}).model
        assert isinstance(cfg, arch.config) and cfg.arch == name
    with pytest.raises(ConfigError, match="unknown model 'nosuch'; choices: .*lstm, .*transformer"):
        config_from_dict({"model": {"arch": "nosuch"}})


def test_task_section_shorthand_and_unknown_task():
    assert config_from_dict({"task": "seq2seq"}).task.type == "seq2seq"
    assert config_from_dict({}).to_dict()["task"] == {
        "type": "seq2seq",
        "metrics": [],
        "subword": "none",
        "subword_vocab_size": 8000,
        "tokenizer_path": None,
        "source_bos": False,
    }  # the seq2seq task's own keys
    with pytest.raises(ConfigError, match=r"'task.type': unknown task 'nosuch'.* \(plugin modules are loaded from "):
        config_from_dict({"task": "nosuch"})
    with pytest.raises(ConfigError, match=r"'model.head.type': unknown head 'nosuch'.* \(plugin modules are loaded"):
        config_from_dict({"model": {"arch": "transformer", "head": {"type": "nosuch"}}})  # a nested choice too


def test_single_test_path_is_a_list():
    assert config_from_dict({"data": {"test": "gen"}}).data.test == ["gen"]


def test_builder_gives_the_schedule_width():
    vocab = Vocab.build([["a"]])
    from structseq.models import build_model

    for model, width in (
        ({"arch": "lstm", "hidden_dim": 24, "embed_dim": 8}, 24),
        ({"arch": "transformer", "d_model": 16, "n_heads": 2, "ffn_dim": 8}, 16),
    ):
        assert build_model(config_from_dict({"model": model}).model, {"src": vocab, "tgt": vocab}).width == width


def test_saved_configs_of_earlier_versions_still_load():
    """A run directory written before the per-type schemas: inapplicable keys dropped, not fatal."""
    old = {
        "model": {
            "arch": "dangle",
            "encoder_layers": 2,
            "share_pre_fusion": False,
            "head": {"type": "softmax", "gate": "learned", "lexicon": None, "tau": 0.0},
        }
    }
    cfg = config_from_dict(old, saved=True)
    assert cfg.model.arch == "dangle" and cfg.model.head.type == "softmax"
    with pytest.raises(ConfigError):
        config_from_dict(old)


def test_limits_are_the_fields_a_model_declares_whatever_their_names():
    """Config and readers find a model's longest input by its declared role, not by the name `max_length`."""
    from dataclasses import dataclass

    from structseq.data.limits import input_limits
    from structseq.fields import option
    from structseq.registry import ARCHS, register_arch

    @dataclass
    class LimitsProbe:
        arch: str = option("limits-probe", "a model whose longest input is `longest`")
        longest: int = option(50, "longest source or target", ge=1, role="max_length")
        max_length: int = option(7, "an unrelated setting that happens to have the conventional name", ge=1)

    register_arch("limits-probe", config=LimitsProbe)(lambda cfg, vocabs, train=None: None)
    try:
        cfg = config_from_dict({"model": "limits-probe"})
        assert input_limits(cfg)["max_length"] == 50 and input_limits(cfg)["length_key"] == "model.longest"
        assert input_limits(config_from_dict({"model": "lstm"}))["length_key"] == "model.max_length"
        with pytest.raises(ConfigError, match=r"'data.max_length' \(60\) exceeds 'model.longest' \(50\)"):
            config_from_dict({"model": "limits-probe", "data": {"max_length": 60}})
        assert config_from_dict({"model": "limits-probe", "data": {"max_length": 20}}).data.max_length == 20
    finally:
        ARCHS.remove("limits-probe")


def test_optimisers_and_schedules_are_registered_and_a_plugin_adds_one():
    import torch

    from structseq.registry import OPTIMIZERS, SCHEDULES, register_optimizer, register_schedule
    from structseq.train.optim import build_optimizer, lr_multiplier

    assert list(OPTIMIZERS) == ["adam", "adamw"]
    assert list(SCHEDULES) == ["constant", "noam", "inverse_sqrt", "cosine"]
    with pytest.raises(ConfigError, match="'optim.optimizer': invalid value 'sgd'; choices: adam, adamw"):
        config_from_dict({"optim": {"optimizer": "sgd"}})

    register_optimizer("sgd-probe")(lambda cfg, params: torch.optim.SGD(params, lr=cfg.lr))
    register_schedule("halving-probe")(lambda cfg, model_dim, max_steps: lambda step: 0.5 ** (step // 10))
    try:
        cfg = config_from_dict({"optim": {"optimizer": "sgd-probe", "schedule": "halving-probe", "lr": 0.1}})
        opt = build_optimizer(cfg.optim, [torch.nn.Parameter(torch.zeros(2))])
        assert isinstance(opt, torch.optim.SGD) and opt.param_groups[0]["lr"] == 0.1
        assert [lr_multiplier(cfg.optim, 8, 100)(s) for s in (1, 10, 25)] == [1.0, 0.5, 0.25]
    finally:
        OPTIMIZERS.remove("sgd-probe")
        SCHEDULES.remove("halving-probe")
