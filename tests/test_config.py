"""Configs: validation errors name the key; every shipped config loads and builds."""

from pathlib import Path

import pytest

from structseq.config import LSTMConfig, TransformerConfig, apply_overrides, config_from_dict, load_config
from structseq.data.vocab import Vocab
from structseq.errors import ConfigError
from structseq.models.build import build_model

CONFIGS = sorted(Path(__file__).resolve().parents[1].glob("configs/**/*.yaml"))


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
    cfg = load_config(path, ["optim.lr=2e-3", "model.head.type=copy", "data.test=[gen, test]", "optim.max_tokens=null"])
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
    vocab = Vocab.build([["a", "b", "c"]])
    model = build_model(cfg.model, vocab, vocab)
    assert model.num_parameters() > 0


def test_configs_exist():
    assert len(CONFIGS) >= 10
