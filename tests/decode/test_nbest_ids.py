"""n-best entries carry their model ids, and `structseq score --nbest` scores those ids, so a score equals the
search's even where two id sequences detokenise to the same text (issue 44 item 6)."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from structseq.cli import app
from structseq.data.example import Example
from tests.fixtures.paths import FIXTURES

OLD_RUN = FIXTURES / "old_runs" / "lstm"
SOURCES = ["dax lug", "zup fep", "wif blicket dax", "lug kiki zup"]


def test_nbest_json_carries_ids_and_score_takes_them(tmp_path):
    r = CliRunner().invoke(app, ["predict", str(OLD_RUN), "--nbest", "3", "--format", "json"], input="\n".join(SOURCES))
    assert r.exit_code == 0, r.output
    objs = [json.loads(x) for x in r.stdout.splitlines()]
    assert all(isinstance(e["ids"], list) and e["ids"] is not None for o in objs for e in o["nbest"])
    for o in objs:  # the text is not what is scored: a changed output text leaves the scores as they were
        for e in o["nbest"]:
            e["output"] = "PURPLE"
    nbest = tmp_path / "nbest.json"
    nbest.write_text("".join(json.dumps(o) + "\n" for o in objs))
    r = CliRunner().invoke(app, ["score", str(OLD_RUN), "--nbest", str(nbest), "--format", "json"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    want = [(o["line"], k, e["score"]) for o in objs for k, e in enumerate(o["nbest"], 1)]
    assert [(x["line"], x["rank"]) for x in rows] == [(w[0], w[1]) for w in want]
    assert [x["score"] for x in rows] == pytest.approx([w[2] for w in want], abs=1e-5)
    assert all(x["target"] != "PURPLE" and x["tokens"][-1] == "</s>" for x in rows)


def test_score_takes_pairs_or_nbest_and_names_a_bad_nbest_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"line": 1, "input": "dax", "nbest": [{"ids": [5]}]}\n{"line": 2, "input": "dax"}\n')
    r = CliRunner().invoke(app, ["score", str(OLD_RUN), "--nbest", str(bad)])
    assert r.exit_code != 0 and f"{bad}:2" in str(r.exception)
    r = CliRunner().invoke(app, ["score", str(OLD_RUN)])
    assert r.exit_code != 0 and "--pairs or --nbest" in str(r.exception)


def test_ids_score_as_the_search_scored_them_where_text_does_not_give_them_back(tmp_path):
    """On a random BART the n-best lists hold special tokens (<s>, <unk>, <mask>) that detokenising drops: the
    text's score (what `score --pairs` computes) differs there, the ids' score never does."""
    pytest.importorskip("transformers")
    from structseq.config import config_from_dict
    from structseq.decode.batched import forced_scores, run, target_scores
    from structseq.models import build_model
    from structseq.tasks import get_task
    from structseq.testing.hf_tiny import tiny_bart

    folder = tiny_bart(tmp_path / "bart", seed=4, init_std=0.3)
    cfg = config_from_dict({"task": "hf-seq2seq", "model": {"arch": "hf-seq2seq", "pretrained": str(folder)}})
    task = get_task(cfg)
    examples = [Example.from_text(s, "RED") for s in SOURCES]
    vocabs = task.build_vocabs(examples)
    model = build_model(cfg.model, vocabs, task="hf-seq2seq").eval()
    with torch.no_grad():  # <s> and <mask> as likely as words, as a byte-level BPE's twin pieces are
        model.hf.get_output_embeddings().weight[[0, 4]] *= 3.0
    ids = task.ids
    specials = {"eos": ids.eos, "bos": ids.pad, "pad": ids.pad, "eos_at_limit": ids.eos_at_limit}
    lists = run(model, task, examples, cfg.decode, vocabs=vocabs, nbest=5, beam=5)
    flat = [(e, c) for e, cs in zip(examples, lists) for c in cs]
    by_ids = forced_scores(model, task, vocabs, [e for e, _ in flat], [c.ids for _, c in flat], 8, specials)
    assert [float(s.sum()) for s in by_ids] == pytest.approx([c.score for _, c in flat], abs=1e-4)
    as_text = [Example.from_text(e.source_text, " ".join(c.tokens) or "RED") for e, c in flat]
    text_scores = [float(s.sum()) for _, s in target_scores(model, task, vocabs, as_text, 8, pad=ids.pad)]
    lost = [i for i, (_, c) in enumerate(flat) if set(c.ids) & {0, 3, 4}]  # <s> <unk> <mask>: dropped as text
    assert lost and any(abs(text_scores[i] - flat[i][1].score) > 1e-3 for i in lost)
    assert torch.is_tensor(by_ids[0])


def test_score_nbest_refuses_an_id_that_is_not_one_of_the_models(tmp_path, monkeypatch, capsys):
    """An id that is not a whole number (3.7, 4.2 were scored as 3 and 4; true, "3") or outside the model's output
    ids (-1, 99999 and 10^30 were tracebacks) is one line naming FILE:LINE, exit 2. The limit is exact: the last
    output id (the run's target vocabulary, read from its checkpoint) is scored, the next one refused."""
    from tests.fixtures.cli_run import one_line_error, run_main

    size = len(torch.load(OLD_RUN / "checkpoints" / "best.pt", weights_only=True)["vocab"]["tgt"])
    nbest = tmp_path / "nbest.json"

    def entry(ids) -> str:
        return json.dumps({"line": 1, "input": "dax lug", "nbest": [{"ids": [5]}, {"ids": ids}]}) + "\n"

    for ids in ([3.7], [4.2, 5], [True], ["3"], [-1], [size], [99999], [10**30]):
        nbest.write_text(entry([5]) + entry(ids), encoding="utf-8")
        code, err = run_main(monkeypatch, capsys, "score", OLD_RUN, "--nbest", nbest)
        one_line_error(code, err, f"{nbest}:2: ")
    nbest.write_text(entry([size - 1, 0]), encoding="utf-8")
    code, err = run_main(monkeypatch, capsys, "score", OLD_RUN, "--nbest", nbest, "--format", "json")
    assert code == 0, err


def test_score_nbest_refuses_a_line_that_is_not_a_whole_number(tmp_path, monkeypatch, capsys):
    """An entry's `line` of 3.7 was read as line 3 (int()); like the ids, only a whole number >= 1 is a line:
    anything else is one line naming FILE:LINE, exit 2."""
    from tests.fixtures.cli_run import one_line_error, run_main

    nbest = tmp_path / "nbest.json"

    def entry(line) -> str:
        return json.dumps({"line": line, "input": "dax lug", "nbest": [{"ids": [5]}]}) + "\n"

    for line in (3.7, True, "3", 0, -2):
        nbest.write_text(entry(1) + entry(line), encoding="utf-8")
        code, err = run_main(monkeypatch, capsys, "score", OLD_RUN, "--nbest", nbest)
        one_line_error(code, err, f"{nbest}:2: ")
        assert "line" in err and repr(line) in err
    nbest.write_text(entry(1) + entry(2), encoding="utf-8")
    code, err = run_main(monkeypatch, capsys, "score", OLD_RUN, "--nbest", nbest, "--format", "json")
    assert code == 0, err
