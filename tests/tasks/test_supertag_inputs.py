"""Supertagging inputs and settings that used to crash deep in torch or pass silently (issue 31, sections 3
and 4): every out-of-range setting is refused when the config loads, naming the key; a too-deep category is
a DataError naming the file and line; a pretrained encoder folder that is missing, moved, broken or a hub
name is a one-line ConfigError (nothing is downloaded); a sentence of more subword pieces than the encoder
has positions is a DataError naming the sentence."""

from __future__ import annotations

import re
import shutil

import pytest
import torch

from structseq.config import apply_overrides, config_from_dict
from structseq.data.ab_grammar import splits
from structseq.data.categories import MAX_DEPTH, CategoryError, parse_category
from structseq.data.example import Example
from structseq.data.tlgbank import read_tagged
from structseq.errors import ConfigError, DataError
from structseq.models import build_model
from structseq.tasks import get_task

torch.set_num_threads(1)

BASE = {"task": {"type": "supertag"}, "model": {"arch": "supertag-tree"}}


@pytest.mark.parametrize(
    "override, key",
    [
        ("model.dropout=1.5", "model.dropout"),
        ("model.max_depth=-1", "model.max_depth"),
        (f"model.max_depth={MAX_DEPTH + 1}", "model.max_depth"),
        ("model.encoder.layers=0", "model.encoder.layers"),
        ("model.node_heads=0", "model.node_heads"),
        ("model.node_heads=3", "model.node_heads"),  # does not divide d_model 256
        ("model.state_heads=0", "model.state_heads"),
        ("model.max_distance=-1", "model.max_distance"),
        ("model.encoder.word_dropout=1.5", "model.encoder.word_dropout"),
        ("model.edge_dropout=-0.5", "model.edge_dropout"),
        ("model.encoder.lr_scale=-1", "model.encoder.lr_scale"),
        ("model.encoder.char_dim=-4", "model.encoder.char_dim"),
        ("model.encoder.pooling=bogus", "model.encoder.pooling"),
        ("model.d_model=0", "model.d_model"),
        ("task.beta=-1", "task.beta"),
        ("task.betas=[-1, 2]", "task.betas"),
        ("task.max_tags=0", "task.max_tags"),
    ],
)
def test_out_of_range_settings_are_refused_when_the_config_loads(override, key):
    with pytest.raises(ConfigError, match=re.escape(f"'{key}")):
        config_from_dict(apply_overrides(BASE, [override]))


def test_the_classifier_schema_is_bounded_too():
    for override in ("model.dropout=1.5", "model.encoder.layers=0", "model.encoder.pooling=bogus"):
        with pytest.raises(ConfigError, match=re.escape(f"'{override.split('=')[0]}")):
            config_from_dict(apply_overrides({**BASE, "model": {"arch": "supertag-classifier"}}, [override]))


def _deep(depth: int) -> str:
    return "dr(0," * depth + "np" + ",n)" * depth


def test_a_70_deep_category_is_a_data_error_naming_the_file_and_line(tmp_path):
    assert parse_category(_deep(MAX_DEPTH))  # the limit itself is accepted
    with pytest.raises(CategoryError, match=f"depth 70, deeper than the limit of {MAX_DEPTH}"):
        parse_category(_deep(70))
    path = tmp_path / "deep.txt"
    path.write_text(f"le|dr(0,np,n) chat|n\nun|{_deep(70)} mot|n\n")
    with pytest.raises(DataError, match=r"deep\.txt:2: .*depth 70.*limit of 16"):
        read_tagged(path)


def test_a_too_deep_category_from_any_reader_is_refused_before_batching():
    cfg = config_from_dict(BASE)
    task = get_task(cfg)
    with pytest.raises(DataError, match=r"train: example 2: bad category: .*depth 70"):
        task.check_examples([Example(("a",), ("np",)), Example(("a", "b"), ("np", _deep(70)))], "train")


# ---------------------------------------------------------------- pretrained encoders


def _tiny_bert(folder, positions: int = 512):
    transformers = pytest.importorskip("transformers")
    words = sorted({w for e in splits(30, 5)["train"] for w in e.source})
    vocab = (
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        + sorted({w[:2] for w in words})
        + sorted({"##" + w[2:] for w in words if len(w) > 2})
    )
    folder.mkdir(parents=True)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n")
    transformers.BertTokenizerFast(str(folder / "vocab.txt"), do_lower_case=False).save_pretrained(folder)
    torch.manual_seed(0)
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=positions,
    )
    transformers.BertModel(config).save_pretrained(folder)
    return folder


def _pretrained(folder, arch="supertag-tree"):
    model = {"arch": arch, "d_model": 16, "encoder": {"pretrained": str(folder)}}
    if arch == "supertag-tree":
        model.update(node_dim=8, node_heads=2, state_heads=2)
    cfg = config_from_dict({"task": "supertag", "model": model, "decode": {"batch_size": 4}})
    task = get_task(cfg)
    train = splits(30, 5, seed=0)["train"]
    return cfg, task, task.build_vocabs(train), train


@pytest.mark.parametrize("name", ["camembert-base", "missing/encoder", "file"])
def test_a_pretrained_encoder_that_is_not_a_local_folder_is_one_config_error(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("not a folder\n")
    cfg, task, vocabs, train = _pretrained(name)
    for attempt in (lambda: build_model(cfg.model, vocabs, train), lambda: task.tokenizer):
        with pytest.raises(
            ConfigError,
            match=r"'model\.encoder\.pretrained': the encoder folder .* nothing is "
            r"downloaded",
        ) as e:
            attempt()
        assert "\n" not in str(e.value) and name in str(e.value)


def test_a_moved_or_broken_pretrained_folder_is_one_config_error(tmp_path):
    folder = _tiny_bert(tmp_path / "enc")
    cfg, task, vocabs, train = _pretrained(folder)
    build_model(cfg.model, vocabs, train)  # loads
    shutil.move(folder, tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="does not exist .moved or deleted"):
        build_model(cfg.model, vocabs, train)
    broken = tmp_path / "broken"
    shutil.copytree(tmp_path / "elsewhere", broken)
    (broken / "config.json").write_text("{not json")
    for weights in broken.glob("model.safetensors"):
        weights.write_bytes(b"garbage")
    cfg, task, vocabs, train = _pretrained(broken)
    with pytest.raises(ConfigError, match=r"'model\.encoder\.pretrained': cannot load the encoder's model") as e:
        build_model(cfg.model, vocabs, train)
    assert "\n" not in str(e.value)
    empty = tmp_path / "empty"
    empty.mkdir()
    cfg, task, vocabs, train = _pretrained(empty)
    with pytest.raises(ConfigError, match="cannot load the encoder's tokenizer"):
        _ = task.tokenizer


def test_a_sentence_longer_than_the_encoder_positions_is_an_error_naming_it(tmp_path):
    folder = _tiny_bert(tmp_path / "enc", positions=16)
    cfg, task, vocabs, train = _pretrained(folder)
    model = build_model(cfg.model, vocabs, train).eval()
    long = Example(tuple(("the", "dog", "sleeps") * 6))
    with pytest.raises(
        DataError,
        match=r"sentence 2: the sentence 'the dog sleeps .*' of 18 words is \d+ subword "
        r"pieces, more than the 16 positions",
    ):
        task.predict(model, [train[0], long, train[1]], vocabs, beam=1)
    assert len(task.predict(model, [Example(("the", "dog", "sleeps"))], vocabs, beam=1)[0].kbest) == 3
