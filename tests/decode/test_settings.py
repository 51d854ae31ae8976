"""Decoding settings through the CLI and the API (issue 54 items 3, 4 and the contradicting settings; issue 52's
decoding probes and mutants; issue 55's settings line): a strategy's own keys (`decode.groups` of diverse-beam,
`decode.seed` of sampling) are validated, listed and refused under another strategy; every sampled output is
seeded by `decode.seed` and named by its seed and settings; a setting a strategy cannot honour is one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from structseq import api
from structseq.decode.sampling import Sampling, _draw, sample
from structseq.decode.strategies import Settings, choose, decode
from structseq.decode.strategies.diverse import Diverse
from structseq.errors import StructseqError
from tests.decode.test_identity import LIMITS, SRC, Toy
from tests.fixtures.cli_run import one_line_error, run_main
from tests.fixtures.paths import FIXTURES

OLD_RUN = FIXTURES / "old_runs" / "lstm"
LINES = "dax lug\nlug blicket wif\nlug kiki wif fep\n"


def _main(monkeypatch, capsys, *args, stdin=None) -> tuple[int, str, str]:
    """`structseq ARGS`: (exit status, stdout, stderr)."""
    import io
    import sys

    from structseq.cli import main

    monkeypatch.setattr(sys, "argv", ["structseq", *map(str, args)])
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    with pytest.raises(SystemExit) as done:
        main()
    out = capsys.readouterr()
    return done.value.code or 0, out.out, out.err


@pytest.fixture
def run_dir(tmp_path):
    return Path(shutil.copytree(OLD_RUN, tmp_path / "run"))


# ---------------------------------------------------------------------------------------------- diverse beam
@pytest.mark.parametrize("eos_at_limit", [True, False])
@pytest.mark.parametrize("early_stopping", [False, True, "never"])
@pytest.mark.parametrize("beam,nbest,len_penalty", [(1, 1, 1.0), (2, 2, 0.0), (5, 5, 1.0), (5, 3, 0.6), (4, 1, 2.0)])
def test_diverse_beam_with_one_group_is_beam_search(beam, nbest, len_penalty, early_stopping, eos_at_limit):
    ids = {"eos_at_limit": eos_at_limit}
    got = choose("diverse-beam", Settings(beam, nbest, len_penalty, early_stopping, options=Diverse(1, 0.5)))
    want = choose("beam", Settings(beam, nbest, len_penalty, early_stopping))
    g, w = (s.search(Toy(), {"src": SRC}, LIMITS, ids) for s in (got, want))
    assert (g.tokens, g.scores, g.nbest, g.ended) == (w.tokens, w.scores, w.nbest, w.ended)


def test_diverse_groups_choose_other_first_tokens_than_earlier_groups():
    """With a prohibitive diversity, group 2's first tokens avoid every token group 1 considered (its 2K/G
    candidates, as fairseq's DiverseBeamSearch counts), and each group keeps its own K/G hypotheses."""
    hyp = decode(Toy(), {"src": SRC}, LIMITS, beam=4, nbest=4, strategy="diverse-beam", len_penalty=0.0)
    plain = decode(Toy(), {"src": SRC}, LIMITS, beam=4, nbest=4, strategy="beam", len_penalty=0.0)
    assert hyp.nbest == plain.nbest  # decode() without options: one group
    s = choose("diverse-beam", Settings(4, 4, 0.0, "never", options=Diverse(2, 1e6)))
    lp = Toy().step(torch.ones(5, dtype=torch.long), Toy().init_state(Toy().encode({"src": SRC})))[0]
    lp[:, :2] = float("-inf")
    cand, origin, token = s.step(lp[:, None].expand(5, 4, -1).clone(), s.start(4, "cpu").expand(5, 4))
    first, second = token[:, :4], token[:, 4:]
    for a, b, c in zip(first.tolist(), second.tolist(), cand[:, 4:].tolist()):
        assert not set(a) & {t for t, score in zip(b, c) if score > -1e5}  # unpenalised picks are new tokens
    nbest = s.search(Toy(), {"src": SRC}, LIMITS, {}).nbest
    assert all(len(e) == 4 for e in nbest) and nbest != plain.nbest


def test_decode_groups_is_a_validated_key_of_diverse_beam_only(run_dir, monkeypatch, capsys):
    code, err = run_main(monkeypatch, capsys, "predict", run_dir, "--set", "decode.groups=3", stdin=LINES)
    one_line_error(code, err, "'decode.groups' 3", "diverse-beam")
    code, err = run_main(
        monkeypatch, capsys, "predict", run_dir, "--set", "decode.strategy=diverse-beam", "--set", "decode.groups=0"
    )
    one_line_error(code, err, "'decode.groups' must be >= 1")
    args = ["predict", run_dir, "--beam", "4", "--set", "decode.strategy=diverse-beam", "--set", "decode.groups=3"]
    code, err = run_main(monkeypatch, capsys, *args, stdin=LINES)
    one_line_error(code, err, "'decode.groups' 3", "multiple")
    args[3] = "6"
    code, out, err = _main(monkeypatch, capsys, *args, "--nbest", "6", "--format", "json", stdin=LINES)
    assert code == 0, err
    lists = [json.loads(x)["nbest"] for x in out.splitlines()]
    assert [len(e) for e in lists] == [6, 6, 6]
    code, listed, _ = _main(monkeypatch, capsys, "config", "decode")
    assert code == 0 and "decode.groups" in listed and "decode.seed" in listed and "decode.temperature" in listed


# ---------------------------------------------------------------------------------------------- one seeded route
def _evaluate(monkeypatch, capsys, run_dir, *args) -> dict:
    code, out, err = _main(monkeypatch, capsys, "evaluate", run_dir, "--json", "-q", *args)
    assert code == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_every_sampled_evaluation_is_seeded_and_named_by_its_seed_and_settings(run_dir, monkeypatch, capsys):
    """`--set decode.strategy=sampling` drew from torch's global generator (da0ad07: two runs, two results, the
    second replacing the first under one name); now decode.seed seeds it, and --sample is the same route."""
    first = _evaluate(monkeypatch, capsys, run_dir, "--set", "decode.strategy=sampling")
    torch.manual_seed(12345)  # the global generator no longer matters
    again = _evaluate(monkeypatch, capsys, run_dir, "--set", "decode.strategy=sampling")
    flag = _evaluate(monkeypatch, capsys, run_dir, "--sample", "--seed", "0")
    assert first["predictions"] == again["predictions"] == flag["predictions"]
    assert first["exact_match"] == again["exact_match"] == flag["exact_match"]
    assert Path(first["predictions"]).name == "test.sampling-seed0.tsv"
    names = {first["predictions"]}
    for args in (["--seed", "3"], ["--temperature", "0.5"], ["--top-k", "2"], ["--top-p", "0.5"]):
        m = _evaluate(monkeypatch, capsys, run_dir, "--sample", *args)
        assert m["predictions"] not in names, args
        names.add(m["predictions"])
        key, value = args[0].lstrip("-").replace("-", "_"), args[1]
        assert m["settings"]["decode"][key] == m["sampling"][key] == type(m["sampling"][key])(value)
        assert f"{key}={m['sampling'][key]}" in m["exact_match"]["signature"]
    assert "seed3" in Path(sorted(names)[-1]).name or any("seed3" in n for n in names)
    assert any("temperature0.5" in n for n in names) and any("top_k2" in n for n in names)
    assert any("top_p0.5" in n for n in names)
    rows = lambda p: Path(p).read_text().splitlines()  # noqa: E731
    seeded = _evaluate(monkeypatch, capsys, run_dir, "--sample", "--seed", "3")
    assert rows(seeded["predictions"]) == rows(next(n for n in names if "seed3" in n))


def test_api_sampling_is_the_same_route_as_the_decode_keys():
    run = api.load_run(OLD_RUN)
    examples = run.parse_lines(LINES.splitlines())
    via_api = run.sampled(Sampling(temperature=0.8, seed=5)).search(examples, nbest=3)
    via_keys = run.with_overrides(["decode.strategy=sampling", "decode.temperature=0.8", "decode.seed=5"])
    assert via_api == via_keys.search(examples, nbest=3)
    assert via_api != run.with_overrides(["decode.strategy=sampling", "decode.seed=6"]).search(examples, nbest=3)


@pytest.mark.parametrize("value", ["1e-300", "1e300", "0", "-1", "nan"])
def test_an_unusable_temperature_is_one_line(run_dir, monkeypatch, capsys, value):
    code, err = run_main(monkeypatch, capsys, "predict", run_dir, "--sample", "--temperature", value, stdin=LINES)
    one_line_error(code, err, "decode.temperature")


# ---------------------------------------------------------------------------------------------- contradictions
def test_a_setting_the_strategy_cannot_honour_is_refused_in_one_line(run_dir, monkeypatch, capsys):
    """da0ad07: --beam 4 with greedy decoded greedily, recorded beam 4 and named the file test.beam4; --nbest 3
    with greedy returned one-entry lists."""
    greedy = ["--set", "decode.strategy=greedy"]
    code, err = run_main(monkeypatch, capsys, "evaluate", run_dir, "--beam", "4", *greedy)
    one_line_error(code, err, "'beam' 4", "greedy")
    assert not (run_dir / "predictions").exists() or not list((run_dir / "predictions").glob("*beam4*"))
    code, err = run_main(monkeypatch, capsys, "predict", run_dir, "--nbest", "3", *greedy, stdin=LINES)
    one_line_error(code, err, "'nbest' 3", "greedy")
    code, err = run_main(monkeypatch, capsys, "predict", run_dir, "--sample", "--beam", "3", stdin=LINES)
    one_line_error(code, err, "'--beam' 3", "sampling")
    code, err = run_main(monkeypatch, capsys, "predict", run_dir, "--seed", "3", stdin=LINES)
    one_line_error(code, err, "--seed", "--sample")
    code, err = run_main(monkeypatch, capsys, "predict", run_dir, "--seed", "3", "--set", "decode.seed=4", stdin=LINES)
    one_line_error(code, err, "--seed 3", "decode.seed=4")


def test_a_beam_wider_than_the_vocabulary_is_refused_before_any_memory_is_taken(run_dir, monkeypatch, capsys):
    """issue 52: --beam 100000 on a small vocabulary allocated until the OOM killer ended it."""
    code, err = run_main(monkeypatch, capsys, "predict", run_dir, "--beam", "100000", stdin=LINES)
    one_line_error(code, err, "100000", "output tokens")


def test_the_settings_line_shows_only_what_applies(run_dir, monkeypatch, capsys):
    """issue 55: `strategy None` and a length penalty that greedy never reads were printed."""
    code, out, err = _main(monkeypatch, capsys, "evaluate", run_dir, "-q")
    line = next(x for x in out.splitlines() if x.startswith("settings:"))
    assert code == 0, err
    assert "None" not in line and "strategy greedy" in line and "len_penalty" not in line and "beam" not in line
    code, out, err = _main(monkeypatch, capsys, "evaluate", run_dir, "-q", "--beam", "3")
    line = next(x for x in out.splitlines() if x.startswith("settings:"))
    assert "strategy beam" in line and "beam 3" in line and "len_penalty" in line


# ---------------------------------------------------------------------------------------------- the draw, the limit
def test_temperature_is_applied_before_top_p():
    """probabilities (0.5, 0.3, 0.15, 0.05): untempered, the 0.7 nucleus is {0, 1}; at temperature 3 the
    distribution is p^(1/3) renormalised, (0.336, 0.283, 0.225, 0.156), whose 0.7 nucleus is {0, 1, 2}: drawn in
    proportion (0.398, 0.335, 0.267) by hand. Checked through `sample` on a one-step model."""
    p = torch.tensor([0.5, 0.3, 0.15, 0.05])
    tempered = p ** (1 / 3) / (p ** (1 / 3)).sum()
    want = tempered[:3] / tempered[:3].sum()
    assert torch.allclose(want, torch.tensor([0.398, 0.335, 0.267]), atol=1e-3)

    class OneStep:
        def encode(self, inputs):
            return {"x": inputs["src"]}

        def init_state(self, enc):
            return enc

        def step(self, prev, state):
            lp = torch.full((prev.shape[0], 7), -30.0)
            lp[:, 3:7] = p.log()
            return lp.log_softmax(-1), state

    g = torch.Generator().manual_seed(0)
    hyp = sample(OneStep(), {"src": torch.tensor([[5]])}, torch.tensor([1]), Sampling(3.0, 0, 0.7), n=3000, generator=g)
    drawn = torch.tensor([t[0] - 3 for t, _ in hyp.nbest[0]])
    freq = torch.bincount(drawn, minlength=4).float() / len(drawn)
    assert freq[3] == 0 and torch.allclose(freq[:3], want, atol=0.03)
    lp = torch.log(p)[None].repeat(3000, 1)
    assert set(_draw(lp, Sampling(3.0, 0, 0.7), g).tolist()) == {0, 1, 2}


def test_an_input_leaving_no_room_for_an_output_is_the_documented_error():
    class Bounded(Toy):
        def output_limit(self, inputs):
            return inputs["src"].ne(0).sum(1) - 2  # 2 source tokens: no room; 3: one output token

    src = torch.tensor([[3, 4, 2], [5, 2, 0]])
    with pytest.raises(StructseqError, match="leaves no room for an output"):
        decode(Bounded(), {"src": src}, torch.tensor([5, 5]))
    hyp = decode(Bounded(), {"src": src[:1]}, torch.tensor([5]))
    assert len(hyp.tokens[0]) <= 1


# ---------------------------------------------------------------------------------------------- processors
@pytest.mark.parametrize("strategy", ["greedy", "beam", "sampling", "diverse-beam"])
def test_configured_processors_apply_at_every_step_of_every_strategy(strategy):
    """decode.processors reach the one loop whatever the strategy: min_length keeps </s> away until 6 tokens
    (outputs without it are shorter), no_repeat_ngram of size 1 leaves no token twice in an output."""
    run = api.load_run(OLD_RUN).with_overrides(["decode.max_len_b=12", f"decode.strategy={strategy}"])
    examples = run.parse_lines(LINES.splitlines())
    plain = run.search(examples, beam=None if strategy in ("greedy", "sampling") else 2)
    assert any(len(c[0].tokens) < 6 for c in plain)
    longer = run.with_overrides(["decode.processors={min_length: {tokens: 6}}"])
    got = longer.search(examples, beam=None if strategy in ("greedy", "sampling") else 2)
    assert all(len(c[0].ids) >= 6 for c in got)
    once = run.with_overrides(["decode.processors={no_repeat_ngram: {size: 1}}"]).search(examples)
    assert all(len(set(c[0].ids)) == len(c[0].ids) for c in once)


@pytest.mark.parametrize(
    "decode,words",
    [
        ({"strategy": "greedy", "beam": 4}, "'beam' 4"),
        ({"strategy": "diverse-beam", "beam": 4, "groups": 3}, "multiple"),
    ],
)
def test_a_config_whose_strategy_refuses_its_settings_is_refused_before_training(
    tmp_path, monkeypatch, capsys, decode, words
):
    """Validation decodes greedily (beam 1), so the contradiction used to surface only at `evaluate`."""
    import yaml

    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"data": {"dataset": "colors"}, "model": {"arch": "lstm"}, "decode": decode}))
    code, err = run_main(monkeypatch, capsys, "train", cfg, "-o", tmp_path / "run", "-q")
    one_line_error(code, err, "c.yaml", words)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_taggers_settings_line_has_no_length_penalty():
    from structseq.evaluation import describe

    settings = {"checkpoint": "best", "decode": {"beam": 1, "len_penalty": 1.0, "max_len_a": 2.0, "strategy": None}}
    assert describe(settings, "tree-greedy") == "checkpoint best, strategy tree-greedy, beam 1"
