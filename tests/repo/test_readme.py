"""The README a user can hold (issue 46): at most 300 lines, its lists of tasks, model families, datasets and
metrics generated from the registries (`structseq report tables --check` in tests/repo/test_scripts.py keeps them
current), and every paper page linked from it."""

import re

from tests.fixtures.paths import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_at_most_300_lines():
    assert len(README.splitlines()) <= 300


def test_the_readme_lists_come_from_the_registries():
    """Every built-in entry (a plugin another test registered in this process is not one: report.lists.builtin)."""
    from structseq.data.dataset import DATASETS
    from structseq.registry import ARCHS, METRICS, TASKS
    from structseq.report.lists import builtin

    for what, names in (
        ("tasks", builtin(TASKS)),
        ("archs", builtin(ARCHS, lambda a: a.build)),
        ("datasets", builtin(DATASETS, lambda d: d.loader)),
        ("metrics", builtin(METRICS, lambda m: m.compute)),
    ):
        block = re.search(rf"<!-- generated: structseq report lists {what} -->\n(.*?)<!-- /generated -->", README, re.S)
        assert block, f"no generated {what} list in README.md"
        listed = set(re.findall(r"^\| `([^`]+)` \|", block.group(1), re.M))
        assert listed == set(names), what


def test_the_readme_lists_every_other_extension_point():
    from structseq.registry import HEADS, LEARNERS, OPTIMIZERS, SCHEDULES, STRATEGIES
    from structseq.report.lists import builtin

    block = re.search(r"<!-- generated: structseq report lists extensions -->\n(.*?)<!-- /generated -->", README, re.S)
    assert block, "no generated extensions list in README.md"
    for registry in (HEADS, LEARNERS, STRATEGIES, OPTIMIZERS, SCHEDULES):
        names = builtin(registry, lambda h: h.build) if registry is HEADS else builtin(registry)
        row = re.search(rf"^\| {registry.kind} \| `{re.escape(registry.key)}` \| (.*) \|$", block.group(1), re.M)
        assert row and set(re.findall(r"`([^`]+)`", row.group(1))) == set(names), registry.kind


def test_every_paper_page_is_linked_from_the_readme():
    pages = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs" / "papers").glob("*.md"))
    assert len(pages) >= 4
    assert [p for p in pages if f"]({p})" not in README] == []
