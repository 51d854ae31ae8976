"""One decoding loop (`structseq.decode.run`) for every task and the CLI, with strategies as registered objects
named in `decode.strategy`: a new strategy is one class in one file (issue 46 item 2)."""

from __future__ import annotations

import re

import pytest

from structseq import api
from structseq.decode.search import greedy
from structseq.decode.strategies import Strategy
from structseq.errors import ConfigError
from structseq.registry import STRATEGIES, register_strategy
from tests.fixtures.paths import FIXTURES
from tests.fixtures.paths import ROOT as REPO

SRC = REPO / "src" / "structseq"
OLD_RUN = FIXTURES / "old_runs" / "lstm"
SOURCES = ["dax lug", "lug blicket wif", "lug kiki wif fep"]  # outputs that read differently backwards


@pytest.fixture
def reversed_greedy():
    """A plugin strategy (what a plugin file holds): greedy outputs, reversed, so its use is visible."""

    @register_strategy("reversed-greedy")
    class ReversedGreedy(Strategy):
        def search(self, model, inputs, max_len, ids):
            hyp = greedy(model, inputs, max_len, **ids)
            hyp.tokens = [t[::-1] for t in hyp.tokens]
            return hyp

    yield ReversedGreedy
    STRATEGIES.remove("reversed-greedy")


def test_a_registered_strategy_named_in_the_config_decodes_every_path(reversed_greedy):
    run = api.load_run(OLD_RUN)
    plain = run.translate(SOURCES)
    assert any(p.split() != p.split()[::-1] for p in plain)
    custom = run.with_overrides(["decode.strategy=reversed-greedy"])
    assert custom.translate(SOURCES) == [" ".join(p.split()[::-1]) for p in plain]  # the task's predict
    lists = custom.search(run.parse_lines(SOURCES))  # Run.search: the CLI's --nbest path
    assert [" ".join(c[0].tokens) for c in lists] == [" ".join(p.split()[::-1]) for p in plain]


def test_an_unknown_strategy_is_a_config_error_listing_the_registered_ones():
    with pytest.raises(ConfigError, match="decode.strategy.*greedy, beam, sampling"):
        api.load_run(OLD_RUN).with_overrides(["decode.strategy=viterbi"])


def test_the_default_strategies_give_what_the_settings_gave():
    """No strategy named: greedy at beam 1, beam search above (the numbers of every run so far)."""
    run = api.load_run(OLD_RUN)
    for beam in (1, 3):
        named = run.with_overrides([f"decode.strategy={'greedy' if beam == 1 else 'beam'}"])
        assert named.translate(SOURCES, beam=beam) == run.translate(SOURCES, beam=beam)


def test_no_task_or_cli_module_runs_a_search_of_its_own():
    """Search functions (sequence and tree) are called only inside `structseq.decode`: tasks, the API and the CLI
    go through `run`."""
    call = re.compile(r"(?<![.\w])(?<!def )(beam_search|greedy|sample|decode|greedy_trees|kbest_trees)\(")
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("decode/"):
            continue
        text = path.read_text(encoding="utf-8")
        found += [f"{rel}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in call.finditer(text)]
    assert not found, "\n".join(found)


def test_a_plugin_task_with_the_documented_two_argument_decode_inputs_decodes_through_the_loop():
    """`decode_inputs(examples, vocabs)`, as a plugin task written to docs/extending.md implements it: the loop
    calls `decode_batch`, whose default passes no index, so it decodes as the task it extends."""
    from structseq.decode import run as decode_run
    from structseq.tasks.seq2seq import Seq2SeqTask

    class TwoArguments(Seq2SeqTask):
        def decode_inputs(self, examples, vocabs):
            return super().decode_inputs(examples, vocabs)

    loaded = api.load_run(OLD_RUN)
    examples = loaded.parse_lines(SOURCES)
    plugin = TwoArguments(loaded.config)
    args = (examples, loaded.config.decode)
    got = decode_run(loaded.model, plugin, *args, vocabs=loaded.vocabs)
    assert got == decode_run(loaded.model, loaded.task, *args, vocabs=loaded.vocabs)
    assert len(got) == len(SOURCES) and all(c[0].tokens for c in got)
