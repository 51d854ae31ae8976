"""Evaluation names and their protection, through the CLI (issue 52's surviving mutants, issue 55 frictions 8
and 10): `--bleu-tokenize` is part of an evaluation's name; predictions whose metrics file is gone are not
replaced without --overwrite; compare refuses, in one line, a side mixing checkpoints or --limit values; a
request names its evaluation alike in `evaluate` and `compare` (the checkpoint as loading resolves it: best
falls back to last); a missing checkpoint lists the run's checkpoints and says how to make an average."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from structseq import api
from structseq.cli import app
from tests.fixtures.toy import toy_config, toy_tsv

runner = CliRunner()


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Runs of seeds 1 and 2 on a 12-example file."""
    tmp = tmp_path_factory.mktemp("evalnames")
    data = toy_tsv(tmp, n=12)
    for seed in (1, 2):
        api.train(toy_config(data, seed=seed, max_steps=3, valid_every=0), tmp / f"r{seed}", show_progress=False)
    return data, tmp / "r1"


def _cli(*args):
    r = runner.invoke(app, [str(a) for a in args])
    message = "" if r.exception is None or isinstance(r.exception, SystemExit) else str(r.exception)
    return r.exit_code, r.stdout, message


def _evaluate(*args):
    code, out, message = _cli("evaluate", *args, "--json", "-q")
    return code, (json.loads(out.strip().splitlines()[-1]) if code == 0 else message)


def test_the_bleu_tokenizer_is_part_of_the_name(run):
    data, r = run
    code, plain = _evaluate(r, "--split", data, "--limit", 4)
    assert code == 0, plain
    code, intl = _evaluate(r, "--split", data, "--limit", 4, "--bleu-tokenize", "intl")
    assert code == 0, intl  # another evaluation, not a clash with the first
    assert intl["predictions"] == plain["predictions"][: -len(".tsv")] + ".tok-intl.tsv"
    assert "|tok:intl|" in intl["bleu"]["signature"]
    kept = json.loads(open(plain["predictions"][: -len(".tsv")] + ".metrics.json").read())
    assert "|tok:13a|" in kept["bleu"]["signature"]  # the first evaluation is still there, as it was


def test_predictions_without_their_metrics_file_are_kept_without_overwrite(run):
    data, r = run
    code, m = _evaluate(r, "--split", data, "--limit", 3)
    assert code == 0, m
    tsv = m["predictions"]
    sidecar = tsv[: -len(".tsv")] + ".metrics.json"
    before = open(tsv).read()
    shutil.os.unlink(sidecar)
    code, message = _evaluate(r, "--split", data, "--limit", 3)
    assert code != 0 and tsv in message and "--overwrite" in message and "settings not recorded" in message
    assert open(tsv).read() == before
    code, again = _evaluate(r, "--split", data, "--limit", 3, "--overwrite")
    assert code == 0 and json.loads(open(sidecar).read())["settings"] == again["settings"]


def test_compare_refuses_a_side_mixing_checkpoints_or_limits_in_one_line(run):
    data, r = run
    r2 = r.with_name("r2")  # seed 2
    shutil.copy(r2 / "checkpoints" / "last.pt", r2 / "checkpoints" / "other.pt")  # the same weights, another name
    made = {}
    for extra in ((), ("--checkpoint", "other"), ("--limit", 12)):  # 12: every example, as without a limit
        code, made[extra] = _evaluate(r if not extra else r2, "--split", data, *extra)
        assert code == 0, made[extra]
    plain = made[()]["predictions"]
    for extra, what in ((("--checkpoint", "other"), "checkpoint: "), (("--limit", 12), "limit: ")):
        mixed = f"{plain},{made[extra]['predictions']}"
        code, _, message = _cli("compare", mixed, plain, "--resamples", 20)
        assert code != 0 and f"system {mixed} mixes evaluations made with different settings (" in message
        assert what in message and plain in message and made[extra]["predictions"] in message
        assert "\n" not in message and "--allow-mixed" in message
        code, _, message = _cli("compare", plain, mixed, "--resamples", 20)  # either side
        assert code != 0 and f"system {mixed} mixes" in message
    code, out, message = _cli("compare", plain, f"{plain},{made[('--limit', 12)]['predictions']}", "--allow-mixed")
    assert code == 0, message


def test_one_request_one_name_in_evaluate_and_compare(run):
    """`--checkpoint best` of a run with no best.pt loads last: evaluate names it as the plain evaluation
    (`.first5`, the run's own checkpoint), and compare finds it under that name (it looked for `.best.first5`)."""
    data, trained = run
    r = trained.with_name("no-best")
    shutil.copytree(trained, r)
    (r / "checkpoints" / "best.pt").unlink()  # as when no validation ran
    code, asked = _evaluate(r, "--split", data, "--limit", 5, "--checkpoint", "best")
    assert code == 0, asked
    code, plain = _evaluate(r, "--split", data, "--limit", 5)
    assert code == 0 and plain["predictions"] == asked["predictions"] and asked["predictions"].endswith(".first5.tsv")
    args = ("compare", r, r, "--split", data, "--limit", 5, "--checkpoint", "best", "--no-evaluate", "-f", "json")
    code, out, message = _cli(*args, "--resamples", 20)
    assert code == 0, message
    assert json.loads(out)["systems"]["A"]["outputs"][0]["path"] == asked["predictions"]


def test_a_missing_checkpoint_lists_the_runs_and_says_how_to_average(run):
    data, r = run
    code, message = _evaluate(r, "--split", data, "--checkpoint", "foo")
    assert code != 0 and "has no such checkpoint" in message and "its checkpoints: best, last)" in message
    assert "structseq average" in message and "--last N" in message
    code, _, message = _cli("compare", r, r, "--split", data, "--checkpoint", "avg-last3", "--no-evaluate")
    assert code != 0 and "was never averaged so" in message and f"structseq average {r} --last 3" in message
    assert "no predictions" not in message
    code, _, message = _cli("compare", r, r, "--split", data, "--checkpoint", "avg-last3")  # evaluating first
    assert code != 0 and "was never averaged so" in message
