"""Issue 12: checkpoints with a checksum, a format version and a checked layout."""

from __future__ import annotations

import random

import pytest
import torch

from structseq.errors import StructseqError
from structseq.run.checkpoint import (
    RUN_KEYS,
    content_digest,
    load_checkpoint,
    load_model_state,
    save_atomic,
    save_checkpoint,
)


def _ckpt() -> dict:
    return {
        "model": {"w": torch.arange(64, dtype=torch.float32).reshape(8, 8), "b": torch.zeros(8)},
        "vocab": {"src": ["<pad>", "<s>", "</s>", "<unk>", "dax"], "tgt": ["<pad>", "<s>", "</s>", "<unk>"]},
        "config": {"train": {"max_steps": 3}},
        "progress": {"step": 3, "best": 0.5, "history": []},
    }


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


def test_round_trip_carries_format_and_checksum(tmp_path):
    save_checkpoint(_ckpt(), tmp_path / "c.pt")
    raw = torch.load(tmp_path / "c.pt", weights_only=True)
    assert raw["format"] == 2 and len(raw["checksum"]) == 64
    loaded = load_checkpoint(tmp_path / "c.pt", RUN_KEYS)
    assert _same({k: v for k, v in loaded.items() if k != "format"}, _ckpt())


def test_a_flipped_bit_in_the_weights_is_detected(tmp_path):
    path = tmp_path / "best.pt"
    save_checkpoint(_ckpt(), path)
    data = bytearray(path.read_bytes())
    at = bytes(data).find(torch.arange(64, dtype=torch.float32).numpy().tobytes())
    assert at > 0
    data[at + 101] ^= 0x10  # one bit of one weight
    path.write_bytes(bytes(data))
    assert torch.load(path, weights_only=True)["model"]["w"].sum() != _ckpt()["model"]["w"].sum()  # loads silently
    with pytest.raises(StructseqError, match=r"best\.pt: checksum mismatch"):
        load_checkpoint(path)


def test_any_flipped_bit_is_an_error_or_changes_nothing(tmp_path):
    path = tmp_path / "c.pt"
    save_checkpoint(_ckpt(), path)
    good = path.read_bytes()
    reference = load_checkpoint(path)
    rng = random.Random(0)
    errors = 0
    for at in rng.sample(range(len(good)), 150):
        data = bytearray(good)
        data[at] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(data))
        try:
            loaded = load_checkpoint(path)
        except StructseqError as e:
            assert "c.pt" in str(e)
            errors += 1
            continue
        assert _same(loaded, reference), at  # a flip in zip padding or metadata nobody reads
    assert errors > 0


@pytest.mark.parametrize(
    "obj, message",
    [
        ({"a": 1}, "not a structseq checkpoint \\(no 'format' field; keys: a\\)"),
        ([1, 2], "not a structseq checkpoint \\(holds a list"),
        ({"format": 99, "model": {}}, "checkpoint format 99; this version of structseq reads formats 1, 2"),
        ({"format": 1, "model": {}}, "checkpoint lacks 'vocab'"),
        ({"format": 1, "model": [], "vocab": {}, "config": {}, "progress": {}}, "checkpoint field 'model' is a list"),
        (
            {"format": 1, "model": {}, "vocab": {"src": 3}, "config": {}, "progress": {}},
            "checkpoint field 'vocab' must map names to token lists",
        ),
    ],
)
def test_wrong_layouts_are_errors_naming_the_file(tmp_path, obj, message):
    path = tmp_path / "last.pt"
    save_atomic(obj, path)
    with pytest.raises(StructseqError, match=r"last\.pt: " + message):
        load_checkpoint(path, RUN_KEYS)


def test_format_1_without_checksum_still_loads(tmp_path):
    save_atomic({"format": 1, **_ckpt()}, tmp_path / "old.pt")
    assert load_checkpoint(tmp_path / "old.pt", RUN_KEYS)["progress"]["step"] == 3


def test_a_directory_is_not_a_checkpoint(tmp_path):
    with pytest.raises(StructseqError, match="is a directory"):
        load_checkpoint(tmp_path)


def test_wrong_shapes_name_the_checkpoint():
    model = torch.nn.Linear(3, 2)
    with pytest.raises(StructseqError, match=r"x\.pt: the parameters do not fit.*size mismatch"):
        load_model_state(model, {"weight": torch.zeros(5, 3), "bias": torch.zeros(2)}, "x.pt")
    with pytest.raises(StructseqError, match=r"x\.pt: the parameters do not fit.*Missing key"):
        load_model_state(model, {"a": torch.zeros(1)}, "x.pt")


def test_digest_sees_dtype_shape_order_and_values():
    base = content_digest({"a": torch.zeros(4), "b": 1})
    assert base == content_digest({"a": torch.zeros(4), "b": 1})
    for other in (
        {"a": torch.zeros(2, 2), "b": 1},
        {"a": torch.zeros(4, dtype=torch.float64), "b": 1},
        {"b": 1, "a": torch.zeros(4)},
        {"a": torch.zeros(4), "b": 1.0},
        {"a": torch.zeros(4), "b": 2},
    ):
        assert content_digest(other) != base
