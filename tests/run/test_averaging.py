"""What `run.averaging` promises: fairseq's average (floating tensors summed in float64, cast back to their
dtype; integer tensors from the last input; optimiser, scheduler and RNG dropped; the last input's config and
progress), refusal of inputs of another model naming both files, exactly the last N step files kept (the step
file holds last.pt's bytes), and the last N step checkpoints by step number, not name."""

import pytest
import torch

from structseq.errors import StructseqError
from structseq.run.averaging import (
    average_checkpoints,
    average_states,
    keep_step_checkpoint,
    last_step_checkpoints,
    step_checkpoints,
)
from structseq.run.checkpoint import load_checkpoint, save_checkpoint


def _ckpt(step, w, *, vocab=("a", "b"), n=None, dtype=torch.float32, model_cfg=None):
    return {
        "model": {"w": torch.tensor(w, dtype=dtype), "n": torch.tensor(step if n is None else n)},
        "vocab": {"tgt": list(vocab)},
        "config": {"model": model_cfg or {"arch": "toy"}, "train": {"seed": step}},
        "progress": {"step": step},
        "optimizer": {"state": {}},
        "rng": {"torch": torch.zeros(3, dtype=torch.uint8)},
        "task": {"kind": "toy"},
    }


def test_average_is_the_float64_mean_cast_back_with_integers_from_the_last():
    states = [{"w": torch.tensor([1.0, 2.0], dtype=torch.float16), "n": torch.tensor(3)} for _ in range(3)]
    states[1]["w"] = torch.tensor([2.0, 4.0], dtype=torch.float16)
    states[2] = {"w": torch.tensor([6.0, 3.0], dtype=torch.float16), "n": torch.tensor(9)}
    avg = average_states(states)
    assert avg["w"].dtype == torch.float16 and avg["w"].tolist() == [3.0, 3.0]
    assert avg["n"].item() == 9 and avg["n"].dtype == states[2]["n"].dtype
    # float64 accumulation: 2**24 + 1 + 1 + 1 is exact in float64; in float32 each + 1 is lost
    big = [{"w": torch.tensor([x], dtype=torch.float32)} for x in (16777216.0, 1.0, 1.0, 1.0)]
    assert average_states(big)["w"].item() == pytest.approx(16777219.0 / 4, abs=0.3)
    assert average_states([states[0]])["w"].tolist() == [1.0, 2.0]


def test_average_checkpoints_writes_the_mean_and_the_last_inputs_metadata(tmp_path):
    paths = []
    for step, w in ((10, [0.0, 2.0]), (20, [1.0, 4.0]), (30, [5.0, 0.0])):
        paths.append(tmp_path / f"step{step}.pt")
        save_checkpoint(_ckpt(step, w), paths[-1])
    record = average_checkpoints(paths, tmp_path / "avg.pt")
    out = load_checkpoint(tmp_path / "avg.pt")
    assert out["model"]["w"].tolist() == [2.0, 2.0] and out["model"]["n"].item() == 30
    assert record == {"from": [str(p) for p in paths], "steps": [10, 20, 30]} == out["averaged"]
    assert out["progress"] == {"step": 30} and out["config"]["train"]["seed"] == 30 and out["task"] == {"kind": "toy"}
    assert not {"optimizer", "rng", "scheduler"} & set(out)
    # the order of the inputs changes only what comes from the last one
    average_checkpoints(paths[::-1], tmp_path / "rev.pt")
    rev = load_checkpoint(tmp_path / "rev.pt")
    assert rev["model"]["w"].tolist() == [2.0, 2.0] and rev["model"]["n"].item() == 10


@pytest.mark.parametrize(
    "other, what",
    [
        (_ckpt(2, [1.0, 1.0], vocab=("a", "c")), "vocabularies"),
        (_ckpt(2, [1.0, 1.0, 1.0]), "parameters"),
        (_ckpt(2, [1.0, 1.0], dtype=torch.float64), "parameters"),
        (_ckpt(2, [1.0, 1.0], model_cfg={"arch": "other"}), "model config"),
    ],
)
def test_checkpoints_of_another_model_are_refused_naming_both(tmp_path, other, what):
    save_checkpoint(_ckpt(1, [0.0, 0.0]), tmp_path / "a.pt")
    save_checkpoint(other, tmp_path / "b.pt")
    with pytest.raises(StructseqError, match=f"b.pt: its {what} differ from .*a.pt"):
        average_checkpoints([tmp_path / "a.pt", tmp_path / "b.pt"], tmp_path / "out.pt")
    assert not (tmp_path / "out.pt").exists()
    with pytest.raises(StructseqError, match="no checkpoints"):
        average_checkpoints([], tmp_path / "out.pt")


def test_keep_last_keeps_exactly_n_step_files_by_step(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    deleted = []
    for step in (5, 10, 100, 1000):  # 1000 sorts before 5 as a string
        (folder / "last.pt").unlink(missing_ok=True)  # saved atomically: a new file each time
        (folder / "last.pt").write_bytes(f"state at {step}".encode())
        deleted += keep_step_checkpoint(tmp_path, step, 2)
    assert [s for s, _ in step_checkpoints(tmp_path)] == [100, 1000]
    assert sorted(p.name for p in deleted) == ["step10.pt", "step5.pt"]
    assert (folder / "step1000.pt").read_bytes() == b"state at 1000" and (folder / "step100.pt").read_bytes() == (
        b"state at 100"
    )
    assert not list(folder.glob("*.tmp"))
    assert keep_step_checkpoint(tmp_path, 2000, 0) == [] and not (folder / "step2000.pt").exists()
    (folder / "stepx.pt").write_bytes(b"")  # not a step file
    assert [s for s, _ in step_checkpoints(tmp_path)] == [100, 1000]


def test_last_step_checkpoints_counts_exactly(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    for step in (9, 10, 11):
        (folder / f"step{step}.pt").write_bytes(b"x")
    assert [p.name for p in last_step_checkpoints(tmp_path, 2)] == ["step10.pt", "step11.pt"]
    assert len(last_step_checkpoints(tmp_path, 3)) == 3
    with pytest.raises(StructseqError, match="4 step checkpoints asked for, 3 kept"):
        last_step_checkpoints(tmp_path, 4)
    with pytest.raises(StructseqError, match="at least 1"):
        last_step_checkpoints(tmp_path, 0)
