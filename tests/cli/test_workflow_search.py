"""Ensembles, n-best lists, sampling, scoring given outputs and the decoding controls of evaluate / predict,
checked by their values on tiny runs trained here (the generated Colors dataset, a few updates each)."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from structseq import api
from structseq.cli import app
from structseq.config import config_from_dict
from structseq.data.registry import load_dataset
from structseq.decode.ensemble import Ensemble
from structseq.decode.sampling import Sampling
from structseq.decode.search import normalized
from structseq.errors import ConfigError
from tests.fixtures.tiny import tiny_transformer

TINY = {
    "transformer": tiny_transformer(),
    "lstm": {"arch": "lstm", "embed_dim": 16, "hidden_dim": 24, "layers": 1, "dropout": 0.0},
}


def tiny_run(out, arch="transformer", seed=1, data=None):
    data = data or {"dataset": "colors", "valid": "test"}  # the whole training split: one vocabulary
    cfg = config_from_dict(
        {
            "data": data,
            "model": TINY[arch],
            "optim": {"lr": 5e-3, "max_tokens": 200},
            "train": {"max_steps": 8, "valid_every": 8, "seed": seed},
            "decode": {"batch_size": 4, "max_len_a": 1.0, "max_len_b": 4},
        }
    )
    api.train(cfg, out, show_progress=False)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two Colors runs of different architectures (same vocabularies) and one with other vocabularies."""
    root = tmp_path_factory.mktemp("runs")
    toy = root / "toy.tsv"
    toy.write_text("a b\tB A\nc\tC\na c\tC A\n")
    return {
        "a": tiny_run(root / "seed1"),
        "b": tiny_run(root / "seed2", "lstm", seed=2),
        "other": tiny_run(
            root / "toy", data={"dataset": "files", "train": str(toy), "valid": str(toy), "test": [str(toy)]}
        ),
        "root": root,
    }


@pytest.fixture(scope="module")
def examples():
    return load_dataset("colors", "test") + load_dataset("colors", "train")


#: Tolerance of a token's log-probability computed in two batchings (one batch of all vs batches of 3): other
#: batch shapes sum the same float32 products in another order, so equal numbers differ by rounding, a few ulps of
#: the logits' magnitude (measured: 2 eps per token, 8 eps on a summed score; eps = 2**-23 ~ 1.2e-7). 64 eps a
#: token (~7.6e-6), n times that for a sum of n tokens: far below any wrong token's difference (> 1e-2).
F32_TOKEN = 64 * torch.finfo(torch.float32).eps


def texts(examples):
    return [e.source_text for e in examples], [e.target_text for e in examples]


def teacher_forced(run, sources, outputs):
    """Each output's summed log-probability under `run`, from `token_log_probs` (</s> included)."""
    ids = [[run.tgt_vocab.stoi[t] for t in o.split()] + [2] for o in outputs]
    rows = run.token_log_probs(sources, outputs)
    return [float(r.gather(1, torch.tensor(i)[:, None]).sum()) for r, i in zip(rows, ids)]


# ---------------------------------------------------------------------------------------------- ensembles
def test_an_ensemble_of_one_run_equals_the_run(runs, examples):
    run = api.load_run(runs["a"])
    assert api.load_ensemble([runs["a"]]).members == ()  # one run: the run itself
    for members in ([run.model], [run.model, run.model]):  # one member; two copies: log(mean(p, p)) = log p
        ens = replace(run, model=Ensemble(members))
        for kw in ({}, {"beam": 3}, {"nbest": 3}):
            mine, theirs = run.search(examples, **kw), ens.search(examples, **kw)
            assert [[c.tokens for c in cs] for cs in mine] == [[c.tokens for c in cs] for cs in theirs]
            for cs, ds in zip(mine, theirs):
                assert [c.score for c in cs] == pytest.approx([d.score for d in ds], abs=1e-5)
        assert ens.decode_examples(examples, beam=2) == run.decode_examples(examples, beam=2)
    same = replace(run, model=Ensemble([run.model]))
    assert same.search(examples, nbest=2) == run.search(examples, nbest=2)  # one member: bit for bit


def test_an_ensemble_of_two_scores_each_step_by_the_log_of_the_mean_probability(runs, examples):
    a, b = api.load_run(runs["a"]), api.load_run(runs["b"])
    ens = api.load_ensemble([runs["a"], runs["b"]])
    assert ens.members == (str(runs["a"]), str(runs["b"]))
    sources, _ = texts(examples)
    for kw in ({}, {"nbest": 3}):  # greedy, and every entry of beam-3 n-best lists
        lists = ens.search(examples, **kw)
        outputs = [" ".join(c.tokens) for cs in lists for c in cs]
        srcs = [s for s, cs in zip(sources, lists) for _ in cs]
        ids = [[a.tgt_vocab.stoi[t] for t in o.split()] + [2] for o in outputs]
        ra, rb = a.token_log_probs(srcs, outputs), b.token_log_probs(srcs, outputs)
        re = ens.token_log_probs(srcs, outputs)
        for i, (x, y, z) in enumerate(zip(ra, rb, re)):
            mean = torch.logsumexp(torch.stack([x, y]), 0) - math.log(2)  # log((p_a + p_b) / 2), every token row
            assert torch.allclose(z, mean, atol=1e-5)
            step = mean.gather(1, torch.tensor(ids[i])[:, None])[:, 0]
            searched = [c for cs in lists for c in cs][i]
            assert searched.score == pytest.approx(float(step.sum()), abs=1e-4)  # the search's own steps
            assert searched.score != pytest.approx(
                float((x + y).gather(1, torch.tensor(ids[i])[:, None]).sum()) / 2, abs=1e-6
            )  # not the mean of log-probabilities


def test_mismatched_vocabularies_are_an_error_naming_both_runs(runs):
    with pytest.raises(ConfigError) as e:
        api.load_ensemble([runs["a"], runs["other"]])
    assert str(runs["a"]) in str(e.value) and str(runs["other"]) in str(e.value) and "vocabular" in str(e.value)
    with pytest.raises(ConfigError, match="named twice"):
        api.load_ensemble([runs["a"], runs["a"]])
    r = CliRunner().invoke(app, ["evaluate", str(runs["a"]), str(runs["other"]), "--json"])
    assert r.exit_code != 0 and str(runs["other"]) in str(r.exception)


def test_evaluate_takes_an_ensemble_by_glob_and_says_so(runs):
    r = CliRunner().invoke(app, ["evaluate", str(runs["root"] / "seed*"), "--json", "-q"])
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout)
    assert m["ensemble"] == {"members": [str(runs["a"]), str(runs["b"])], "average": "log-mean-prob"}
    assert m["exact_match"]["signature"].endswith("|ensemble:2|average:log-mean-prob")
    assert ".ensemble-" in m["predictions"]
    expected = api.load_ensemble([runs["a"], runs["b"]]).evaluate(write_predictions=False)
    assert m["exact_match"]["score"] == expected["exact_match"]["score"]


# ---------------------------------------------------------------------------------------------- n-best, sampling
def test_nbest_lists_are_sorted_and_their_scores_are_teacher_forced(runs, examples):
    run = api.load_run(runs["a"]).with_overrides(["decode.len_penalty=1.0"])
    lists = run.search(examples, nbest=4)
    sources, _ = texts(examples)
    for src, cs in zip(sources, lists):
        assert 1 < len(cs) <= 4 and len({tuple(c.tokens) for c in cs}) == len(cs)
        assert [c.normalized for c in cs] == sorted((c.normalized for c in cs), reverse=True)  # beam's ranking
        raw = teacher_forced(run, [src] * len(cs), [" ".join(c.tokens) for c in cs])
        assert [c.score for c in cs] == pytest.approx(raw, abs=1e-4)  # raw sums
        assert [c.normalized for c in cs] == pytest.approx([s / (len(c.tokens) + 1) for s, c in zip(raw, cs)], abs=1e-5)
    best = run.decode_examples(examples, beam=4)
    assert [cs[0].tokens for cs in lists] == best  # the first entry is beam search's answer


def test_sampling_is_seeded_and_reaches_greedy_in_the_limit(runs, examples):
    run = api.load_run(runs["a"])
    greedy = run.search(examples)
    draw = lambda **kw: run.sampled(Sampling(**kw)).search(examples, nbest=3)
    first, again, other = draw(seed=7), draw(seed=7), draw(seed=8)
    assert first == again and first != other
    sources, _ = texts(examples)
    for src, cs in zip(sources, first):  # a sample's score is its log-probability under the model
        assert [c.score for c in cs] == pytest.approx(
            teacher_forced(run, [src] * 3, [" ".join(c.tokens) for c in cs]), abs=1e-4
        )
        assert [c.normalized for c in cs] == sorted((c.normalized for c in cs), reverse=True)
    for kw in ({"temperature": 1e-4}, {"top_k": 1}, {"top_p": 1e-6}):
        got = run.sampled(Sampling(seed=3, **kw)).search(examples)
        assert [c[0].tokens for c in got] == [g[0].tokens for g in greedy], kw
        assert [c[0].score for c in got] == pytest.approx([g[0].score for g in greedy], abs=1e-5)
    for bad in ({"temperature": 0}, {"top_k": -1}, {"top_p": 0}, {"top_p": 1.5}):
        with pytest.raises(ConfigError):
            Sampling(**bad)


def test_top_k_and_top_p_keep_only_their_tokens():
    from structseq.decode.sampling import _draw

    lp = torch.log_softmax(torch.tensor([[3.0, 2.0, 1.0, 0.0, -1.0]]), -1).repeat(2000, 1)
    g = torch.Generator().manual_seed(0)
    assert set(_draw(lp, Sampling(top_k=2), g).tolist()) == {0, 1}
    p = lp[0].exp()
    assert float(p[:2].sum()) < 0.9 < float(p[:3].sum())
    assert set(_draw(lp, Sampling(top_p=0.9), g).tolist()) == {0, 1, 2}  # the smallest set reaching 0.9
    counts = torch.bincount(_draw(lp, Sampling(), g), minlength=5).float() / 2000
    assert torch.allclose(counts, p, atol=0.03)


def test_predict_writes_nbest_tsv_and_json_and_samples(runs, examples):
    stdin = "".join(e.source_text + "\n" for e in examples[:5])
    run = api.load_run(runs["a"])
    expected = run.search(examples[:5], nbest=3)
    r = CliRunner().invoke(app, ["predict", str(runs["a"]), "--nbest", "3"], input=stdin)
    assert r.exit_code == 0, r.output
    rows = [x.split("\t") for x in r.stdout.splitlines()]
    assert rows[0] == ["line", "rank", "score", "normalized", "output"]
    assert [(int(x[0]), int(x[1]), x[4]) for x in rows[1:]] == [
        (i, k, " ".join(c.tokens)) for i, cs in enumerate(expected, 1) for k, c in enumerate(cs, 1)
    ]
    assert [float(x[2]) for x in rows[1:]] == pytest.approx([c.score for cs in expected for c in cs], abs=1e-5)
    r = CliRunner().invoke(
        app,
        ["predict", str(runs["a"]), "--nbest", "2", "--format", "json", "--sample", "--seed", "4", "--top-k", "3"],
        input=stdin,
    )
    assert r.exit_code == 0, r.output
    objs = [json.loads(x) for x in r.stdout.splitlines()]
    sampled = run.sampled(Sampling(top_k=3, seed=4)).search(examples[:5], nbest=2)
    assert [[o["output"] for o in obj["nbest"]] for obj in objs] == [[" ".join(c.tokens) for c in cs] for cs in sampled]
    r = CliRunner().invoke(app, ["predict", str(runs["a"]), "--top-k", "3"], input=stdin)
    assert r.exit_code != 0 and "--sample" in str(r.exception)


# ---------------------------------------------------------------------------------------------- scoring
def test_score_equals_token_log_probs(runs, examples, tmp_path):
    run = api.load_run(runs["a"])
    sources, targets = texts(examples)
    targets[0] = targets[0] + " PURPLE"  # a word the run never saw: scored as <unk>
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in zip(sources, targets)))
    rows = run.token_log_probs(sources, targets)
    scored = run.score(run.load_split(str(pairs))[2], batch_size=3)
    for r, row, t in zip(scored, rows, targets):
        ids = [run.tgt_vocab.stoi.get(w, 3) for w in t.split()] + [2]
        tok = row.gather(1, torch.tensor(ids)[:, None])[:, 0]
        assert r["token_scores"] == pytest.approx(tok.tolist(), rel=0, abs=F32_TOKEN)
        assert r["score"] == pytest.approx(float(tok.sum()), rel=0, abs=F32_TOKEN * len(ids))
        assert r["tokens"] == [run.tgt_vocab.itos[i] for i in ids] and r["normalized"] == pytest.approx(
            normalized(r["score"], len(ids) - 1, run.config.decode.len_penalty)
        )
    assert scored[0]["tokens"][-2:] == ["<unk>", "</s>"]
    r = CliRunner().invoke(app, ["score", str(runs["a"]), "--pairs", str(pairs), "--format", "json"])
    assert r.exit_code == 0, r.output
    assert [json.loads(x)["score"] for x in r.stdout.splitlines()] == pytest.approx([s["score"] for s in scored])
    r = CliRunner().invoke(app, ["score", str(runs["a"]), "--pairs", str(pairs), "--limit", "2"])
    tsv = [x.split("\t") for x in r.stdout.splitlines()]
    assert tsv[0][:4] == ["source", "target", "score", "normalized"] and len(tsv) == 3
    assert [float(x) for x in tsv[1][5].split()] == pytest.approx(scored[0]["token_scores"], rel=0, abs=F32_TOKEN)


def test_the_contrastive_scorer_reads_the_same_scores(runs, examples):
    from structseq.decode.contrastive import target_log_probs

    run = api.load_run(runs["a"])
    longest = 1 + max(len(e.target_text.split()) for e in examples)  # </s> included
    assert target_log_probs(run, examples, batch_size=5) == pytest.approx(
        [r["score"] for r in run.score(examples)], rel=0, abs=F32_TOKEN * longest
    )


# ---------------------------------------------------------------------------------------------- decoding controls
def test_limit_batch_size_and_set_change_what_they_should(runs, monkeypatch):
    run = api.load_run(runs["a"])
    full = run.evaluate(write_predictions=False)
    m = run.evaluate(limit=3)
    assert m["n"] == 3 and m["limit"] == 3 and m["predictions"].endswith("test.first3.tsv")
    assert m["exact_match"]["signature"].endswith("|limit:3")
    with pytest.raises(ConfigError, match="--limit"):
        run.evaluate(limit=0)
    beam2 = run.with_overrides(["decode.beam=2"])
    assert beam2.config.decode.beam == 2 and run.config.decode.beam == 1  # the loaded run is left as it was
    assert beam2.evaluate(write_predictions=False)["beam"] == 2
    ex = run.load_split()[2]
    assert beam2.decode_examples(ex) == run.decode_examples(ex, beam=2)
    calls, expected = [], run.decode_examples(ex)
    small = run.with_overrides(["decode.batch_size=3"])  # the same model, shared
    monkeypatch.setattr(
        small.model, "encode", lambda inputs, f=small.model.encode: calls.append(len(inputs["src"])) or f(inputs)
    )
    assert small.decode_examples(ex) == expected and calls == [3, 3, 3, 1]  # 10 examples, 3 at a time
    short = run.with_overrides(["decode.max_len_a=0", "decode.max_len_b=1"])
    assert all(len(h) <= 1 for h in short.decode_examples(ex)) and full["n"] == 10
    for bad, key in (
        ("decode.beam=0", "decode.beam"),
        ("decode.batch_size=-1", "decode.batch_size"),
        ("decode.nosuch=1", "nosuch"),
        ("train.max_steps=5", "train.max_steps"),
    ):
        with pytest.raises(ConfigError, match=key):
            run.with_overrides([bad])


def test_cli_decoding_controls(runs):
    threads = torch.get_num_threads()
    try:
        r = CliRunner().invoke(
            app,
            [
                "evaluate",
                str(runs["a"]),
                "--json",
                "-q",
                "--limit",
                "4",
                "--batch-size",
                "2",
                "--set",
                "decode.beam=2",
                "--max-len-a",
                "0",
                "--max-len-b",
                "2",
                "--threads",
                "1",
            ],
        )
        assert r.exit_code == 0, r.output
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)
    m = json.loads(r.stdout)
    assert m["n"] == 4 and m["beam"] == 2
    rows = [x.split("\t") for x in Path(m["predictions"]).read_text().splitlines()[1:]]
    assert len(rows) == 4 and all(len(x[2].split()) <= 2 for x in rows)
    r = CliRunner().invoke(app, ["evaluate", str(runs["a"]), "--set", "decode.beam=0"])
    assert r.exit_code != 0 and "decode.beam" in str(r.exception)


def test_progress_prints_a_line_a_minute_off_a_terminal_and_only_on_rank_0(monkeypatch, capsys):
    from structseq import progress

    monkeypatch.setattr(progress, "LINE_EVERY", 0.0)
    assert list(progress.progress(range(3), "decode", True)) == [0, 1, 2]
    err = capsys.readouterr().err.splitlines()
    assert [x.split(",")[0] for x in err] == ["decode: 1/3 (33%)", "decode: 2/3 (66%)", "decode: 3/3 (100%)"]
    monkeypatch.setattr(progress, "LINE_EVERY", 60.0)
    list(progress.progress(range(3), "decode", True))
    assert capsys.readouterr().err == ""  # a short job: no line
    monkeypatch.setattr(progress, "LINE_EVERY", 0.0)
    monkeypatch.setenv("RANK", "1")
    assert list(progress.progress(range(3), "decode", True)) == [0, 1, 2]
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------------------------------------- a pretrained tokenizer
def test_a_pretrained_backbone_searches_samples_and_scores_with_its_own_ids(tmp_path, examples):
    """hf-seq2seq decodes with its tokenizer's ids (BART: <s> 0, <pad> 1, </s> 2), not structseq's: n-best
    lists, samples and `score` use them too."""
    pytest.importorskip("transformers")
    from structseq.testing.hf_tiny import tiny_bart

    base = tiny_bart(tmp_path / "bart", seed=1, init_std=0.3)
    cfg = config_from_dict(
        {
            "task": "hf-seq2seq",
            "data": {"dataset": "colors", "valid": "train"},
            "model": {"arch": "hf-seq2seq", "pretrained": str(base)},
            "optim": {"lr": 3e-3, "schedule": "constant", "max_tokens": None, "batch_size": 7},
            "train": {"max_steps": 2, "valid_every": 2, "seed": 1},
            "decode": {"max_len_a": 1.0, "max_len_b": 3, "batch_size": 4},
        }
    )
    api.train(cfg, tmp_path / "run", show_progress=False)
    run = api.load_run(tmp_path / "run")
    greedy = run.decode_examples(examples)
    assert [cs[0].tokens for cs in run.search(examples)] == greedy
    lists = run.search(examples, nbest=3)
    assert [cs[0].tokens for cs in lists] == run.decode_examples(examples, beam=3)
    cold = run.sampled(Sampling(temperature=1e-4, seed=2)).search(examples)
    assert [cs[0].tokens for cs in cold] == greedy
    sources, targets = texts(examples)
    scored = run.score(examples)
    for r, row in zip(scored, run.token_log_probs(sources, targets)):
        ids = run.task.tokenizer.convert_tokens_to_ids(r["tokens"])
        assert r["tokens"][-1] == "</s>"
        assert r["token_scores"] == row.gather(1, torch.tensor(ids)[:, None])[:, 0].tolist()
    eos = run.task.ids.eos
    for e, cs in zip(examples, lists):  # n-best scores are teacher-forced scores of the model's own output ids
        enc = run.task.encode(e, run.vocabs)
        batch = run.task.collate([{"src": enc["src"], "tgt": [*c.ids, eos]} for c in cs], range(len(cs)))
        with torch.no_grad():
            lp = run.model(batch)
        forced = [
            float(lp[k, : len(c.ids) + 1].gather(1, torch.tensor([*c.ids, eos])[:, None]).sum())
            for k, c in enumerate(cs)
        ]
        assert [c.score for c in cs] == pytest.approx(forced, abs=1e-4)
