"""`structseq predict --format` for supertag runs (cc, multi, json, conll) and `--batch-size` / `--device`, on a
tiny tree supertagger trained a few updates on the generated `ab-grammar` dataset: every format parses back to
the default output's best categories, probabilities are in (0, 1] and sorted, POS tags pass through, and an
unsupported format or option is one line `error: ...`."""

from __future__ import annotations

import json
import math

import pytest
import torch
from typer.testing import CliRunner

from structseq import api
from structseq.cli import app
from structseq.config import config_from_dict
from structseq.errors import run_cli
from structseq.tasks.supertag_formats import CC_POS_PLACEHOLDER, CONLL_EMPTY, input_pos

torch.set_num_threads(1)
BEAM = "3"
LINES = ["the dog sleeps", "the|DT big|JJ cat|NN sees|VBZ the|DT bird|NN", "the man says that the dog runs"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A tree supertagger on ab-grammar, 8 updates (a few seconds)."""
    out = tmp_path_factory.mktemp("formats") / "tree"
    cfg = config_from_dict(
        {
            "task": "supertag",
            "data": {"dataset": "ab-grammar", "valid": "dev", "test": ["test"]},
            "model": {
                "arch": "supertag-tree",
                "d_model": 32,
                "node_dim": 16,
                "node_heads": 2,
                "state_heads": 2,
                "dropout": 0.0,
                "encoder": {"hidden": 16, "word_dim": 16, "char_dim": 0, "layers": 1},
            },
            "optim": {"batch_size": 16, "max_tokens": None, "lr": 3e-3, "schedule": "constant"},
            "train": {
                "max_steps": 8,
                "valid_every": 8,
                "valid_metric": "accuracy",
                "threads": 1,
                "eval_checkpoint": "last",
            },
        }
    )
    api.train(cfg, out, show_progress=False)
    return out


def predict(run_dir, fmt: str, *extra: str, lines=LINES) -> str:
    result = CliRunner().invoke(
        app,
        ["predict", str(run_dir), "--format", fmt, "--beam", BEAM, "--device", "cpu", *extra],
        input="\n".join(lines) + "\n",
    )
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


@pytest.fixture(scope="module")
def best(run_dir) -> list[list[str]]:
    """The default output's (`word|cat`) best categories."""
    out = predict(run_dir, "text").splitlines()
    assert len(out) == len(LINES)
    return [[tok.split("|", 1)[1] for tok in line.split(" ")] for line in out]


def words(line: str) -> list[str]:
    return [t.split("|")[0] for t in line.split()]


def check_probs(probs: list[float]) -> None:
    assert probs and all(0 < p <= 1 for p in probs), probs
    assert probs == sorted(probs, reverse=True), probs


def test_cc_format_passes_pos_through(run_dir, best):
    out = predict(run_dir, "cc").splitlines()
    for line, got, cats in zip(LINES, out, best):
        toks = [t.split("|") for t in got.split(" ")]
        assert all(len(t) == 3 for t in toks)
        assert [t[0] for t in toks] == words(line) and [t[2] for t in toks] == cats
        assert [t[1] for t in toks] == (input_pos(line) or [CC_POS_PLACEHOLDER] * len(toks))
    assert [t.split("|")[1] for t in out[1].split()] == ["DT", "JJ", "NN", "VBZ", "DT", "NN"]


def test_multi_format_has_sorted_probabilities(run_dir, best):
    out = predict(run_dir, "multi").splitlines()
    for line, got, cats in zip(LINES, out, best):
        toks = [t.split("|") for t in got.split(" ")]
        assert [t[0] for t in toks] == words(line) and [t[1] for t in toks] == cats
        for t in toks:
            assert len(t) % 2 == 1 and 1 <= (len(t) - 1) // 2 <= int(BEAM)  # beta 0: all of the k-best
            check_probs([float(p) for p in t[2::2]])


def test_json_format_holds_the_kbest_lists(run_dir, best):
    records = [json.loads(x) for x in predict(run_dir, "json").splitlines()]
    assert [r["line"] for r in records] == [1, 2, 3]
    for line, r, cats in zip(LINES, records, best):
        assert r["words"] == words(line) and r["tags"] == cats and r["pos"] == input_pos(line)
        assert len(r["kbest"]) == len(r["words"])
        for k, cat in zip(r["kbest"], cats):
            assert k[0]["category"] == cat and 1 <= len(k) <= int(BEAM)
            check_probs([c["prob"] for c in k])
            assert all(math.isclose(c["prob"], math.exp(c["log_prob"])) and c["log_prob"] <= 0 for c in k)
    assert records[1]["pos"] == ["DT", "JJ", "NN", "VBZ", "DT", "NN"] and records[0]["pos"] is None


def test_conll_format_is_columns_with_a_blank_line_between_sentences(run_dir, best):
    out = predict(run_dir, "conll")
    blocks = out.rstrip("\n").split("\n\n")
    assert len(blocks) == len(LINES) and out.endswith("\n\n")
    records = [json.loads(x) for x in predict(run_dir, "json").splitlines()]
    for line, block, cats, r in zip(LINES, blocks, best, records):
        rows = [row.split("\t") for row in block.split("\n")]
        assert all(len(row) == 5 for row in rows)
        assert [int(row[0]) for row in rows] == list(range(1, len(rows) + 1))
        assert [row[1] for row in rows] == words(line) and [row[3] for row in rows] == cats
        assert [row[2] for row in rows] == (input_pos(line) or [CONLL_EMPTY] * len(rows))
        probs = [float(row[4]) for row in rows]
        assert all(0 < p <= 1 for p in probs)
        assert probs == pytest.approx([k[0]["prob"] for k in r["kbest"]], rel=1e-3)


def same_records(a: list[dict], b: list[dict], tol: float) -> None:
    """The same tags and k-best categories; log-probabilities equal up to `tol` (padding changes float sums)."""
    assert [r["tags"] for r in a] == [r["tags"] for r in b]
    for ra, rb in zip(a, b):
        assert [[c["category"] for c in k] for k in ra["kbest"]] == [[c["category"] for c in k] for k in rb["kbest"]]
        got = [c["log_prob"] for k in ra["kbest"] for c in k]
        assert got == pytest.approx([c["log_prob"] for k in rb["kbest"] for c in k], abs=tol)


def test_batch_size_and_device_leave_the_output_unchanged(run_dir):
    expect = [json.loads(x) for x in predict(run_dir, "json").splitlines()]
    same_records([json.loads(x) for x in predict(run_dir, "json", "--batch-size", "1").splitlines()], expect, 1e-5)
    assert api.load_run(run_dir, device="cpu").predict(LINES, beam=int(BEAM)) == predict(run_dir, "text").splitlines()
    if torch.cuda.is_available():
        same_records([json.loads(x) for x in predict(run_dir, "json", "--device", "cuda").splitlines()], expect, 1e-3)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--format", "xml"], "'--format' must be one of text, json, cc, multi, conll, got 'xml'"),
        (["--format", "conll", "--nbest", "2"], "'--nbest' and '--sample' are for autoregressive models"),
        (["--device", "tpu"], "'--device': invalid value 'tpu'; choices: auto, cpu, cuda, cuda:N"),
    ],
)
def test_bad_options_are_one_line_errors(run_dir, capsys, args, message):
    status = run_cli(app, ["predict", str(run_dir), *args], standalone_mode=False)
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("error: ") and message in err and err.count("\n") == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message when no CUDA device is present")
def test_device_cuda_without_cuda_is_an_error(run_dir, capsys):
    assert run_cli(app, ["predict", str(run_dir), "--device", "cuda"], standalone_mode=False) == 2
    assert "no CUDA device is available" in capsys.readouterr().err


def test_a_format_the_task_does_not_write_is_an_error():
    from structseq.cli.tagged_output import check_format
    from structseq.errors import ConfigError
    from structseq.tasks import get_task

    seq2seq = get_task(config_from_dict({"data": {"dataset": "colors"}, "model": {"arch": "transformer"}}))
    assert check_format("json", seq2seq) is False
    with pytest.raises(ConfigError, match="'--format conll' is not written by a seq2seq run; its formats: text, json"):
        check_format("conll", seq2seq)


def test_input_pos():
    assert input_pos("a b") is None
    assert input_pos("a|DT b|NN|NP") == ["DT", "NN"]
    assert input_pos("a|DT b") == ["DT", None]
    assert input_pos("| a|X") == [None, "X"]  # a lone | is a word (as parse_input reads it)
