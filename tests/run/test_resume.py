"""What `run.resume` promises: a run is finished exactly at its budget (or when it stopped early); --resume
accepts a larger (or equal) train.max_steps and the runtime settings, refuses every other key and a smaller
budget, and reports only what changed; the rebuilt vocabularies must be the checkpoint's token for token in id
order (the error says whether only the order differs, and where), except for a run started from another
checkpoint (train.init_from), which goes on with its own saved vocabularies."""

import os

import pytest

from structseq.config import config_from_dict
from structseq.data.vocab import SPECIALS, Vocab
from structseq.errors import ConfigError, StructseqError
from structseq.run.resume import (
    RESUME_OVERRIDES,
    RUNTIME_SETTINGS,
    check_vocabs,
    file_identity,
    finished,
    resume_changes,
    resumed_vocabs,
)


def test_a_run_is_finished_exactly_at_its_budget_or_when_it_stopped_early():
    assert finished({"step": 99}, 100) is None
    assert finished({"step": 100}, 100) == "max_steps"
    assert finished({"step": 101}, 100) == "max_steps"
    assert finished({"step": 3, "stopped": "early_stopping"}, 100) == "early_stopping"
    assert finished({"step": 3, "stopped": "interrupted"}, 100) is None
    assert finished({}, 1) is None


def test_resume_accepts_a_larger_budget_and_runtime_settings_only():
    cfg = config_from_dict({"train": {"max_steps": 50}})
    assert resume_changes(cfg, []) == {}
    assert resume_changes(cfg, ["train.max_steps=80"]) == {"train.max_steps": (50, 80)}
    assert resume_changes(cfg, ["train.max_steps=50"]) == {}  # the same budget: nothing changes
    assert resume_changes(cfg, ["train.threads=2", "train.log_every=10"]) == {"train.threads": (0, 2)}
    with pytest.raises(ConfigError, match=r"can only extend a run's budget \(50\), not cut it to 49"):
        resume_changes(cfg, ["train.max_steps=49"])
    for key in ("optim.lr=0.1", "train.seed=3", "model.d_model=8", "train.valid_every=5"):
        with pytest.raises(ConfigError, match=f"'{key.split('=')[0]}' cannot be changed"):
            resume_changes(cfg, [key])
    assert RESUME_OVERRIDES == ("train.max_steps",) and "train.seed" not in RUNTIME_SETTINGS


def _v(*tokens):
    return Vocab([*SPECIALS, *tokens])


def test_rebuilt_vocabularies_must_match_in_id_order():
    check_vocabs({"src": list(_v("a", "b").itos)}, {"src": _v("a", "b")})
    with pytest.raises(StructseqError, match=r"source vocabulary .* another order \(first at id 4: 'a' in the"):
        check_vocabs({"src": list(_v("a", "b").itos)}, {"src": _v("b", "a")})
    with pytest.raises(StructseqError, match=r"target vocabulary .*new in data: \['c'\], only in checkpoint: \['b'\]"):
        check_vocabs({"tgt": list(_v("a", "b").itos)}, {"tgt": _v("a", "c")})


def test_a_run_started_from_another_checkpoint_keeps_its_saved_vocabularies():
    saved = {"src": list(_v("x", "y").itos)}
    built = {"src": _v("y", "x")}  # its own data counts the tokens another way
    assert resumed_vocabs({"vocab": saved}, built, "base/checkpoints/best.pt")["src"].itos == saved["src"]
    with pytest.raises(StructseqError, match="another order"):
        resumed_vocabs({"vocab": saved}, built, None)
    assert resumed_vocabs({"vocab": saved}, {"src": _v("x", "y")}, None)["src"] == _v("x", "y")


def test_a_replaced_checkpoint_changes_its_identity(tmp_path):
    path = tmp_path / "last.pt"
    path.write_bytes(b"one")
    first = file_identity(path)
    assert file_identity(path) == first
    tmp = tmp_path / "new"
    tmp.write_bytes(b"one")
    os.replace(tmp, path)  # same bytes, another file
    assert file_identity(path) != first
