"""Grammar constraints (`decode.grammar`, structseq.decode.processors.grammar): the shipped grammars accept every
gold output of their benchmarks, a step's allowed tokens equal lark's own text parser's verdict on each
continuation (the independent reference), searches under the constraint emit only sentences of the grammar,
and a wrong setting is one line naming the key."""

from __future__ import annotations

import gzip
import random

import pytest
import torch
from lark import Lark
from lark.exceptions import UnexpectedInput

from structseq.config import config_from_dict
from structseq.decode.processors import OutputSpace, build_processors
from structseq.decode.processors.grammar import GrammarConstraint, grammar_constraint
from structseq.errors import ConfigError
from structseq.registry import GRAMMARS, Grammar
from tests.fixtures.paths import ROOT as REPO

DATA = REPO / ".." / "shared" / "data"
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]


def _cogs(split: str) -> list[list[str]]:
    path = DATA / "cogs" / f"{split}.tsv"
    if not path.is_file():
        pytest.skip(f"no COGS data at {path}")
    return [line.rstrip("\n").split("\t")[1].split() for line in path.open(encoding="utf-8")]


def _scan() -> list[list[str]]:
    path = DATA / "scan" / "tasks.txt.gz"
    if not path.is_file():
        pytest.skip(f"no SCAN data at {path}")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.split(" OUT: ", 1)[1].split() for line in f]


def _space(outputs: list[list[str]]) -> OutputSpace:
    return OutputSpace(SPECIALS + sorted({w for o in outputs for w in o}))


@pytest.mark.parametrize("split", ["train", "dev", "test", "gen"])
def test_cogs_grammar_accepts_every_gold_output(split):
    outputs = _cogs(split)
    g = grammar_constraint("cogs", _space(outputs[:50]))
    rejected = [" ".join(o) for o in outputs if not g.accepts(o)]
    assert rejected == [], f"{len(rejected)} of {len(outputs)} rejected, e.g. {rejected[:3]}"
    lark = Lark(GRAMMARS.get("cogs").text, parser="lalr")  # lark's own lexer and parser, on a sample
    for o in outputs[::200]:
        lark.parse(" ".join(o))


def test_scan_grammar_accepts_every_gold_output():
    outputs = _scan()
    g = grammar_constraint("scan", _space(outputs[:50]))
    assert all(g.accepts(o) for o in outputs)
    assert not g.accepts([]) and not g.accepts(["I_JUMP", "jump"])


def _reference(text_parser: Lark, words: list[str]) -> tuple[bool, bool]:
    """(viable prefix, whole sentence) by lark's interactive parser over the text, with its own lexer."""
    ip = text_parser.parse_interactive(" ".join(words))
    try:
        ip.exhaust_lexer()
    except UnexpectedInput:
        return False, False
    try:
        ip.feed_eof()
    except UnexpectedInput:
        return True, False
    return True, True


@pytest.mark.parametrize("name", ["cogs", "scan"])
def test_allowed_tokens_equal_lark_text_parser(name):
    """For prefixes of gold outputs and of corrupted ones, token w is allowed iff lark's own parser reads prefix
    + w as a viable prefix, and </s> iff it reads the prefix as a sentence."""
    outputs = _cogs("dev") if name == "cogs" else _scan()
    rng = random.Random(0)
    sample = rng.sample(outputs, 12)
    space = _space(sample)
    g = grammar_constraint(name, space)
    text_parser = Lark(GRAMMARS.get(name).text, parser="lalr")
    words = list(space.tokens)
    checked = 0
    for out in sample:
        corrupt = list(out)
        corrupt[rng.randrange(len(corrupt))] = rng.choice(words[4:])
        for seq in (out, corrupt):
            for t in range(0, len(seq) + 1, 3):
                prefix = seq[:t]
                viable, _ = _reference(text_parser, prefix)
                if not viable:
                    continue
                mask = g.allowed([space.id_of(w, "test") for w in prefix])
                expect = [_reference(text_parser, prefix + [w])[0] for w in words[4:]]
                assert mask[4:].tolist() == expect, (prefix, [w for w, e in zip(words[4:], expect) if e])
                assert bool(mask[2]) == _reference(text_parser, prefix)[1]
                assert not mask[[0, 1, 3]].any()
                checked += 1
    assert checked > 20


def _greedy_with(processors, V: int, steps: int, rows: int, seed: int) -> list[list[int]]:
    """A plain greedy loop over random scores, with the processors: what any search hands them."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.full((rows, 1), 1)
    done = [None] * rows
    for t in range(steps):
        scores = torch.randn(rows, V, generator=g).log_softmax(-1)
        scores = processors(ids, scores)
        nxt = scores.argmax(-1)
        for r in range(rows):
            if done[r] is None and (int(nxt[r]) == 2 or not scores[r].isfinite().any()):
                done[r] = ids[r, 1:].tolist()
        ids = torch.cat([ids, nxt[:, None]], 1)
    return [d if d is not None else ids[r, 1:].tolist() for r, d in enumerate(done)]


def test_constrained_search_emits_only_sentences():
    outputs = _cogs("dev")[:200]
    space = _space(outputs)
    cfg = config_from_dict({"decode": {"grammar": "cogs"}}).decode
    processors = build_processors(cfg, space)
    outs = _greedy_with(processors, len(space.tokens), 60, 16, seed=0)
    checker = grammar_constraint("cogs", space)
    ended = [o for o in outs if len(o) < 59]
    assert ended and all(checker.accepts([space.tokens[i] for i in o]) for o in ended)
    unconstrained = _greedy_with(build_processors(config_from_dict({}).decode, space), len(space.tokens), 60, 16, 0)
    assert not all(checker.accepts([space.tokens[i] for i in o]) for o in unconstrained)


def test_grammar_errors_are_one_line():
    with pytest.raises(ConfigError, match=r"'decode.grammar': invalid value 'sql'; choices: .*cogs.*scan"):
        config_from_dict({"decode": {"grammar": "sql"}})
    cfg = config_from_dict({"decode": {"grammar": "scan"}}).decode
    pieces = OutputSpace(SPECIALS + ["I_", "JUMP"], detokenize=lambda ids: ["I_JUMP"])
    with pytest.raises(ConfigError, match=r"'decode.grammar': grammar 'scan' constrains output words, but this model"):
        build_processors(cfg, pieces)


def _record(path, ratio_free=2.0, ratio_grammar=2.5):
    import json

    row = {
        "dataset": "cogs",
        "split": "gen",
        "beam": 5,
        "n": 4,
        "free": {"ill_formed_share": 0.25, "exact_match": 0.5, "cpu_seconds": ratio_free, "per_category": {"a": 0.5}},
        "grammar": {
            "ill_formed_share": 0.0,
            "exact_match": 0.75,
            "cpu_seconds": ratio_grammar,
            "per_category": {"a": 1.0},
        },
        "time_ratio": ratio_grammar / ratio_free,
    }
    rec = {
        "grammar": "cogs",
        "arch": "lstm",
        "command": "python benchmarks/bench_grammar.py R",
        "load_average": [3.0, 2, 1],
    }
    path.write_text(json.dumps(rec | {"rows": [row]}))
    return path


def test_report_grammar_renders_records(tmp_path, capsys):
    from structseq.report.kinds import parse, run

    path = _record(tmp_path / "g.json")
    table = run(parse(["grammar", str(path)]), ["grammar", str(path)])
    assert "| lstm on cogs (cogs) | gen | 5 | 4 | 25.0% | 0.0% | 50.0% | 75.0% | 2.0 | 2.5 | 1.25 | 3.0 |" in table
    cats = run(parse(["grammar", str(path), "--categories", "gen"]), [])
    assert "| a | 50.0% | 100.0% |" in cats


def test_step_cache_follows_reordered_and_dropped_rows():
    """A search reorders rows between steps (beams) and drops finished ones: each step's masks still equal the
    masks of the rows' prefixes parsed from the start."""
    outputs = _cogs("dev")[:30]
    space = _space(outputs)
    g = grammar_constraint("cogs", space)
    rows = [[space.id_of(w, "test") for w in o] for o in outputs]
    rng = random.Random(1)
    alive = list(range(len(rows)))
    for t in range(12):
        alive = [i for i in alive if len(rows[i]) > t]
        order = [rng.choice(alive) for _ in range(len(alive) + 3)]  # duplicates too: beams sharing a prefix
        ids = torch.tensor([[1] + rows[i][:t] for i in order])
        out = g(ids, torch.zeros(len(order), len(space.tokens)))
        for r, i in enumerate(order):
            assert torch.equal(out[r].isfinite(), g.allowed(rows[i][:t])), (t, i)


# ------------------------------------------------------------------ length-aware constraint (issue 54 item 2)

TOY = Grammar("toy", 'start: expr\nexpr: "x" | "-" expr | "(" expr "+" expr ")"\n%ignore " "\n')
TOY_WORDS = ["(", ")", "+", "-", "x", "y"]  # "y": no terminal of the grammar


def _toy_sentences(longest: int) -> set[tuple[str, ...]]:
    """Every sentence of TOY up to `longest` words, built from its rules as a fixpoint (the reference)."""
    out: set[tuple[str, ...]] = {("x",)}
    while True:
        new = {("-", *a) for a in out} | {("(", *a, "+", *b, ")") for a in out for b in out}
        new = {s for s in new if len(s) <= longest} - out
        if not new:
            return out
        out |= new


def test_allowed_under_a_budget_equals_the_sentences_that_fit():
    """Word w may follow a prefix with budget r (words left, w included) iff some sentence of the grammar of at
    most len(prefix) + r words starts with prefix + w; </s> iff the prefix is one. Checked on every viable prefix
    of up to 4 words and budgets 0-5 against the enumerated sentences."""
    space = OutputSpace(SPECIALS + TOY_WORDS)
    g = GrammarConstraint(TOY, space)
    sentences = _toy_sentences(9)
    prefixes = {s[:k] for s in sentences for k in range(5)}
    checked = 0
    for prefix in sorted(prefixes):
        ids = [space.id_of(w, "test") for w in prefix]
        fewest = min(len(s) for s in sentences if s[: len(prefix)] == prefix) - len(prefix)
        assert g.shortest(ids) == fewest, prefix
        for r in range(6):
            mask = g.allowed(ids, remaining=r)
            for i, w in enumerate(TOY_WORDS):
                fits = any(len(s) <= len(prefix) + r and s[: len(prefix) + 1] == (*prefix, w) for s in sentences)
                assert bool(mask[4 + i]) == fits, (prefix, r, w)
            assert bool(mask[2]) == (prefix in sentences)
            assert not mask[[0, 1, 3]].any()
            checked += 1
    assert checked > 100
    assert g.allowed([space.id_of("(", "t")]).tolist() == g.allowed([space.id_of("(", "t")], remaining=99).tolist()


def test_greedy_loop_under_a_budget_ends_every_row_in_a_sentence():
    """The toy grammar under a plain greedy loop over random scores, budget a limit of 7: every row is a sentence
    (a prefix-only constraint leaves rows cut at the limit; the same loop without budgets shows it)."""
    space = OutputSpace(SPECIALS + TOY_WORDS)
    g = GrammarConstraint(TOY, space)
    V, limit, rows = len(space.tokens), 7, 64
    for budget in (True, False):
        gen = torch.Generator().manual_seed(0)
        ids, out = torch.full((rows, 1), 1), [None] * rows
        for t in range(limit + 1):
            scores = torch.randn(rows, V, generator=gen).log_softmax(-1)
            scores = g(ids, scores, remaining=torch.full((rows,), limit - t)) if budget else g(ids, scores)
            if t == limit:  # the search forces </s> here
                scores = torch.where(torch.arange(V) == 2, 0.0, float("-inf")).expand(rows, V)
            nxt = scores.argmax(-1)
            for r in range(rows):
                if out[r] is None and int(nxt[r]) == 2:
                    out[r] = [space.tokens[i] for i in ids[r, 1:].tolist()]
            ids = torch.cat([ids, nxt[:, None]], 1)
        formed = [g.accepts(o) for o in out]
        assert all(formed) if budget else not all(formed)


def test_a_budget_below_the_shortest_sentence_is_one_line():
    space = OutputSpace(SPECIALS + ["(", ")", "+", "-", "x"])
    g = GrammarConstraint(Grammar("pair", 'start: "(" "x" ")"\n%ignore " "\n'), space)
    assert g.shortest() == 3
    with pytest.raises(ConfigError, match=r"^'decode.max_len_b': .* allows an output of 2 word\(s\), .*'pair'.* 3;"):
        g(torch.full((2, 1), 1), torch.zeros(2, len(space.tokens)), remaining=torch.tensor([4, 2]))
