"""`decode.grammar` through the public surface: a trained run searched with the grammar (greedy, beam with n-best
lists, sampling) returns only sentences of the grammar; the CLI takes the key and refuses a wrong one in one
line; a task's output space tells word outputs (a grammar applies) from subword ones."""

from __future__ import annotations

import pytest

from structseq import api
from structseq.config import config_from_dict
from structseq.decode.processors.grammar import grammar_constraint
from structseq.decode.sampling import Sampling
from tests.fixtures.cli_run import one_line_error, run_main

PAIRS = [
    ("jump", "I_JUMP"),
    ("walk twice", "I_WALK I_WALK"),
    ("turn left", "I_TURN_LEFT"),
    ("run and look", "I_RUN I_LOOK"),
    ("look thrice", "I_LOOK I_LOOK I_LOOK"),
    ("jump left", "I_TURN_LEFT I_JUMP"),
]


def _toy_run(tmp_path_factory, pairs):
    root = tmp_path_factory.mktemp("grammar")
    data = root / "toy.tsv"
    data.write_text("".join(f"{s}\t{t}\n" for s, t in pairs))
    cfg = config_from_dict(
        {
            "data": {"dataset": "files", "train": str(data), "valid": str(data), "test": [str(data)]},
            "model": {"arch": "lstm", "embed_dim": 16, "hidden_dim": 16, "layers": 1, "dropout": 0.0},
            "optim": {"lr": 5e-3, "max_tokens": 200},
            "train": {"max_steps": 3, "valid_every": 3, "seed": 1},
            "decode": {"batch_size": 4, "max_len_a": 0.0, "max_len_b": 8},
        }
    )
    api.train(cfg, root / "run", show_progress=False)
    return root / "run"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return _toy_run(tmp_path_factory, PAIRS)


def _sentences(run, lists) -> bool:
    checker = grammar_constraint("scan", run.task.output_space(run.vocabs))
    return all(checker.accepts(c.tokens) for entries in lists for c in entries)


def test_every_strategy_returns_only_sentences(run_dir):
    run = api.load_run(run_dir, device="cpu")
    examples = run.load_split(None)[2]
    constrained = run.with_overrides(["decode.grammar=scan"])
    assert run.task.output_space(run.vocabs).detokenize is None  # word outputs: the grammar applies
    for kw in ({"beam": 1}, {"beam": 3, "nbest": 3}, {"sampling": Sampling(seed=2), "nbest": 4}):
        searcher = constrained.sampled(kw.pop("sampling")) if "sampling" in kw else constrained
        assert _sentences(run, searcher.search(examples, **kw)), kw


def test_cli_takes_the_grammar_and_refuses_an_unknown_one(run_dir, monkeypatch, capsys, tmp_path):
    code, err = run_main(monkeypatch, capsys, "evaluate", run_dir, "--set", "decode.grammar=scan", "--beam", "2")
    assert code == 0, err
    code, err = run_main(monkeypatch, capsys, "evaluate", run_dir, "--set", "decode.grammar=sql")
    one_line_error(code, err, "decode.grammar", "sql", "scan")


def test_a_grammar_none_of_whose_words_the_model_outputs_is_one_line(tmp_path_factory, monkeypatch, capsys):
    """Review of the grammar constraint: a model whose outputs hold no word the grammar can start with scored
    every first token -inf (greedy emitted a word outside the grammar, beam and sampling nothing); now one line
    naming the grammar, exit 2, for every strategy."""
    lowercase = _toy_run(tmp_path_factory, [(s, t.lower()) for s, t in PAIRS])  # i_jump: no SCAN action
    for strategy in (["--beam", "1"], ["--beam", "2"], ["--set", "decode.strategy=sampling"]):
        code, err = run_main(monkeypatch, capsys, "evaluate", lowercase, "--set", "decode.grammar=scan", *strategy)
        one_line_error(code, err, "decode.grammar", "'scan'", "ACTION")


COGS_PAIRS = [  # no proper names: the shortest sentence of these words is "noun ( x _ N )", 6 words
    ("The cat smiled .", "* cat ( x _ 1 ) ; smile . agent ( x _ 2 , x _ 1 )"),
    ("A dog ran .", "dog ( x _ 1 ) AND run . agent ( x _ 2 , x _ 1 )"),
    (
        "The boy saw a cat .",
        "* boy ( x _ 1 ) ; see . agent ( x _ 2 , x _ 1 ) AND see . theme ( x _ 2 , x _ 4 ) AND cat ( x _ 4 )",
    ),
    ("A cat was seen .", "cat ( x _ 1 ) AND see . theme ( x _ 3 , x _ 1 )"),
    ("The dog slept .", "* dog ( x _ 1 ) ; sleep . agent ( x _ 2 , x _ 1 )"),
    ("A boy smiled .", "boy ( x _ 1 ) AND smile . agent ( x _ 2 , x _ 1 )"),
]


@pytest.fixture(scope="module")
def cogs_run(tmp_path_factory):
    return _toy_run(tmp_path_factory, COGS_PAIRS)


def test_every_output_is_a_sentence_within_the_length_limit(cogs_run):
    """Issue 54 item 2: the constraint is length-aware, so an output cut at the length limit (8 words here) is
    still a sentence of the grammar; a prefix-only constraint let the untrained model's outputs run into the
    limit unfinished (greedy and beam). Every strategy, n-best lists and samples included."""
    run = api.load_run(cogs_run, device="cpu")
    examples = run.load_split(None)[2]
    checker = grammar_constraint("cogs", run.task.output_space(run.vocabs))
    constrained = run.with_overrides(["decode.grammar=cogs"])
    for kw in ({"beam": 1}, {"beam": 4, "nbest": 4}, {"sampling": Sampling(seed=3), "nbest": 6}):
        searcher = constrained.sampled(kw.pop("sampling")) if "sampling" in kw else constrained
        lists = searcher.search(examples, **kw)
        bad = [c.tokens for entries in lists for c in entries if not checker.accepts(c.tokens)]
        assert not bad, (kw, bad[:2])
        assert all(len(c.tokens) <= 8 for entries in lists for c in entries)


def test_a_length_limit_below_the_shortest_sentence_is_one_line(cogs_run, monkeypatch, capsys):
    code, err = run_main(
        monkeypatch, capsys, "evaluate", cogs_run, "--set", "decode.grammar=cogs", "--set", "decode.max_len_b=5"
    )
    one_line_error(code, err, "decode.max_len_b", "5 word(s)", "'cogs'", "6")
    code, err = run_main(
        monkeypatch, capsys, "evaluate", cogs_run, "--set", "decode.grammar=cogs", "--set", "decode.max_len_b=6"
    )
    assert code == 0, err
