"""An evaluation's settings line (`structseq evaluate`'s `settings:`, compare's paragraph) names the per-step
processors and the grammar that constrained it: they apply under every strategy, so two evaluations that differ
only there must not read alike."""

from __future__ import annotations

from structseq.evaluation import describe


def _settings(**decode):
    base = {"strategy": None, "beam": 1, "max_len_a": 2.0, "max_len_b": 10, "processors": {}, "grammar": None}
    return {"checkpoint": "best", "decode": {**base, **decode}}


def test_the_settings_line_names_the_grammar_and_the_processors():
    plain = describe(_settings(), "greedy")
    assert "grammar" not in plain and "processors" not in plain  # neither set: left out, as null is
    constrained = describe(_settings(grammar="cogs"), "greedy")
    assert "grammar cogs" in constrained and constrained != plain
    banned = describe(_settings(processors={"no_repeat_ngram": {"size": 2}}), "beam")
    assert "processors {'no_repeat_ngram': {'size': 2}}" in banned
