"""Issue 47 item 1, through the CLI: every evaluation keeps its own files named for what produced it (checkpoint,
decoding, limit) with a metrics JSON stating all of it; nothing earlier is replaced without --overwrite; `compare`
prints each side's settings and refuses a side whose seeds were evaluated differently unless --allow-mixed."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from typer.testing import CliRunner

from structseq import api
from structseq.cli import app
from structseq.run.checkpoint import load_checkpoint, save_checkpoint
from tests.fixtures.toy import toy_config, toy_tsv

runner = CliRunner()


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("evalfiles")
    data = toy_tsv(tmp, n=12)
    out = []
    for seed in (1, 2):
        api.train(toy_config(data, seed=seed, max_steps=3, valid_every=0), tmp / f"s{seed}", show_progress=False)
        out.append(tmp / f"s{seed}")
    return data, out


class _Result:
    """A CliRunner result whose `output` holds the one-line error the CLI's boundary prints (`run_cli`)."""

    def __init__(self, r):
        self.exit_code, self.stdout = r.exit_code, r.stdout
        self.output = r.output + ("" if r.exception is None else f"error: {r.exception}")


def _cli(*args):
    return _Result(runner.invoke(app, [str(a) for a in args]))


def _evaluate(*args):
    r = _cli("evaluate", *args, "--json", "-q")
    return r, (json.loads(r.stdout.strip().splitlines()[-1]) if r.exit_code == 0 else None)


def test_each_evaluation_keeps_its_own_named_files(runs):
    data, (run, _) = runs
    shutil.copy(run / "checkpoints" / "last.pt", run / "checkpoints" / "other.pt")
    made = {}
    for extra in ([], ["--checkpoint", "other"], ["--beam", "2"], ["--set", "decode.len_penalty=0.5"]):
        r, m = _evaluate(run, "--split", data, "--limit", 5, *extra)
        assert r.exit_code == 0, r.output
        made[tuple(extra)] = m
    names = {m["predictions"].rsplit("/", 1)[1] for m in made.values()}
    assert len(names) == 4, names  # four evaluations, four files
    assert made[()]["predictions"].endswith(".first5.tsv")
    assert made[("--checkpoint", "other")]["predictions"].endswith(".other.first5.tsv")
    assert made[("--beam", "2")]["predictions"].endswith(".beam2.first5.tsv")
    assert ".dec-" in made[("--set", "decode.len_penalty=0.5")]["predictions"]
    for extra, m in made.items():  # each sidecar states everything that produced it
        side = json.loads(
            (run / "predictions" / m["predictions"].rsplit("/", 1)[1]).with_suffix(".metrics.json").read_text()
        )
        assert side["settings"] == m["settings"]
        s = m["settings"]
        assert s["limit"] == 5 and len(s["checkpoint_sha256"][0]) == 64
        own = made[()]["settings"]["checkpoint"]
        assert own in ("best", "last") and s["checkpoint"] == ("other" if "other" in extra else own)
        assert s["decode"]["beam"] == (2 if "2" in extra else 1)
        assert s["decode"]["len_penalty"] == (0.5 if extra and extra[0] == "--set" else 1.0)


def test_an_earlier_evaluation_is_replaced_only_with_overwrite(runs):
    data, (_, run) = runs
    r, m = _evaluate(run, "--split", data, "--limit", 4)
    assert r.exit_code == 0, r.output
    r, again = _evaluate(run, "--split", data, "--limit", 4)  # the same evaluation redone: allowed
    assert r.exit_code == 0 and again["settings"] == m["settings"]
    ckpt = run / "checkpoints" / f"{m['settings']['checkpoint']}.pt"  # changed (training resumed, say)
    state = load_checkpoint(ckpt)
    first = next(iter(state["model"]))
    state["model"][first] = state["model"][first] + 0.01
    state.pop("checksum", None)
    save_checkpoint(state, ckpt)
    r, _ = _evaluate(run, "--split", data, "--limit", 4)
    assert r.exit_code != 0 and "earlier evaluation" in r.output and "checkpoint file changed" in r.output
    assert "--overwrite" in r.output
    r, new = _evaluate(run, "--split", data, "--limit", 4, "--overwrite")
    assert r.exit_code == 0 and new["settings"]["checkpoint_sha256"] != m["settings"]["checkpoint_sha256"]
    tsv = run / "predictions" / new["predictions"].rsplit("/", 1)[1]
    tsv.write_text(tsv.read_text() + "my own note\n")  # a user's edit is never replaced unasked
    r, _ = _evaluate(run, "--split", data, "--limit", 4)
    assert r.exit_code != 0 and "--overwrite" in r.output and "my own note" in tsv.read_text()


def test_compare_states_settings_and_refuses_a_mixed_side(runs):
    data, (s1, s2) = runs
    for run in (s1, s2):
        assert _evaluate(run, "--split", data, "--limit", 6)[0].exit_code == 0
    r, beam2 = _evaluate(s1, "--split", data, "--limit", 6, "--beam", "2")
    assert r.exit_code == 0
    r = _cli(*["compare", f"{s1},{s2}", f"{s2},{s1}", "--split", str(data), "--limit", "6", "--resamples", "50"])
    assert r.exit_code == 0, r.output
    assert re.search(r"Settings: A checkpoint (best|last), beam 1, .*limit 6", r.stdout)
    assert "|limit:6" in r.stdout  # recomputed scores keep the limit in their signatures
    default_s2 = s2 / "predictions" / (beam2["predictions"].rsplit("/", 1)[1].replace(".beam2", ""))
    mixed = f"{beam2['predictions']},{default_s2}"
    r = _cli("compare", mixed, mixed, "--resamples", "50")
    assert r.exit_code != 0 and "mixes evaluations made with different settings" in r.output
    assert "beam 2" in r.output and "--allow-mixed" in r.output
    r = _cli(*["compare", mixed, mixed, "--resamples", "50", "--allow-mixed", "-f", "json"])
    assert r.exit_code == 0, r.output
    beams = [o["settings"]["decode"]["beam"] for o in json.loads(r.stdout)["systems"]["A"]["outputs"]]
    assert sorted(beams) == [1, 2]
