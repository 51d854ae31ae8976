"""The supertagger decodes through the one loop (`structseq.decode.run`) with registered strategies over its
model's interface (`tree-greedy`, `tree-beam`, `tag-kbest`; issue 46 item 2), and its outputs are those of
the task's own loop before (`_reference`: that code, kept here as the plain reference)."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import numpy as np
import pytest
import torch
import yaml

from structseq import api
from structseq.config import config_from_dict
from structseq.data.ab_grammar import splits
from structseq.data.categories import from_nodes, print_category
from structseq.data.example import Example
from structseq.decode import run
from structseq.decode.batched import length_sorted_batches
from structseq.decode.strategies import Settings, choose, fitting
from structseq.decode.strategies.tagging import TagStrategy
from structseq.decode.tree import greedy_trees, kbest_trees
from structseq.errors import ConfigError
from structseq.registry import STRATEGIES, register_strategy
from tests.decode.test_strategies import OLD_RUN
from tests.tasks.test_supertag import _tiny

TREE_RUN = OLD_RUN.parent / "tree"


@torch.no_grad()
def _reference(task, model, examples, vocabs, k, batch_size):
    """The supertag task's k-best loop as it was (d15a89c..69534ea): (kbest, repaired) per sentence."""
    out = [None] * len(examples)
    for chunk in length_sorted_batches(examples, batch_size):
        batch = task.batch([Example(examples[i].source) for i in chunk], vocabs, chunk)
        lens = batch["word_mask"].sum(1).tolist()
        if not task.is_tree:  # the classifier: a per-word top-k
            scores, ids = model.kbest(batch, k)
            cats, s, i = vocabs["cat"].itos, scores.tolist(), ids.tolist()
            tagged = [
                ([[(cats[c], v) for c, v in zip(i[b][w], s[b][w])] for w in range(n)], [False] * n)
                for b, n in enumerate(lens)
            ]
        else:
            tagged = _reference_trees(model, batch, k, vocabs["sym"].itos, lens)
        for i, t in zip(chunk, tagged):
            out[i] = t
    return out


def _reference_trees(model, batch, k, itos, lens):
    h, mask = model.encoder(batch)
    W = mask.shape[1]
    if k == 1:
        r = {name: v.numpy() for name, v in greedy_trees(model, h, mask).items()}
        order = np.argsort(r["word"], kind="stable")
        per_word = {}
        for g in np.split(order, np.flatnonzero(np.diff(r["word"][order])) + 1):
            tree = from_nodes({int(p): itos[s] for p, s in zip(r["pos"][g], r["sym"][g])})
            per_word[int(r["word"][g[0]])] = (
                [(print_category(tree), float(r["score"][g].sum()))] if tree is not None else [],
                bool(r["repaired"][g].any()),
            )
        return [
            ([per_word[b * W + w][0] for w in range(n)], [per_word[b * W + w][1] for w in range(n)])
            for b, n in enumerate(lens)
        ]
    r = {name: v.numpy() for name, v in kbest_trees(model, h, mask, k).items()}
    out = []
    for b, n in enumerate(lens):
        words = []
        for w in range(n):
            cands = []
            for j in range(k):
                s = float(r["score"][b, w, j])
                tree = from_nodes({int(p): itos[x] for p, x in zip(r["pos"][b, w, j], r["sym"][b, w, j]) if p > 0})
                if math.isfinite(s) and tree is not None:
                    cands.append((print_category(tree), s))
            words.append(cands)
        out.append((words, [False] * n))
    return out


@pytest.mark.parametrize(("arch", "beams"), [("supertag-tree", (1, 3, 5)), ("supertag-classifier", (1, 3))])
def test_predict_through_the_loop_equals_the_task_loop_before(arch, beams):
    """k-best lists (categories and scores, exactly) and repaired flags as before, at several batch sizes."""
    task, vocabs, model, train = _tiny(arch)
    ex = train[:13]
    for k in beams:
        for bs in (8, 3):
            task.cfg.decode.batch_size = bs
            new = task.predict(model, ex, vocabs, beam=k)
            ref = _reference(task, model, ex, vocabs, k, bs)
            assert [(p.kbest, p.repaired) for p in new] == ref, (k, bs)
    assert any(len(kb) > 1 for p in new for kb in p.kbest)  # the k-best lists are not trivial


def test_naming_a_tree_strategy_gives_the_default():
    task, vocabs, model, train = _tiny()
    d = task.cfg.decode
    for name, beam in (("tree-greedy", 1), ("tree-beam", 4)):
        named = run(model, task, train[:6], replace(d, strategy=name), vocabs=vocabs, beam=beam)
        assert named == run(model, task, train[:6], d, vocabs=vocabs, beam=beam)
    # tree-beam at k = 1 is greedy search (the same trees and scores), without repaired flags
    one = run(model, task, train[:6], replace(d, strategy="tree-beam"), vocabs=vocabs, beam=1)
    greedy = run(model, task, train[:6], d, vocabs=vocabs, beam=1)
    for t, g in zip(one, greedy):
        assert [[c for c, _ in kb] for kb in t.kbest] == [[c for c, _ in kb] for kb in g.kbest]
        assert [s for kb in t.kbest for _, s in kb] == pytest.approx([s for kb in g.kbest for _, s in kb], abs=1e-4)


def test_each_model_offers_its_interface_and_the_defaults_fit_it():
    assert set(fitting("tree")) >= {"tree-greedy", "tree-beam"} and "beam" not in fitting("tree")
    assert fitting("tags") == ["tag-kbest"] and "tag-kbest" not in fitting("sequence")
    for arch, interface in (("supertag-tree", "tree"), ("supertag-classifier", "tags")):
        assert _tiny(arch)[2].search_interface == interface
    assert api.load_run(OLD_RUN).model.search_interface == "sequence"


@pytest.mark.parametrize(
    ("arch", "override", "message"),
    [
        (
            "supertag-tree",
            {"strategy": "beam"},
            r"'beam' searches sequence models, but model TreeSupertagger decodes as tree; strategies for it: tree-greedy, tree-beam",
        ),
        (
            "supertag-classifier",
            {"strategy": "tree-beam"},
            r"'tree-beam' searches tree models, but model SupertagClassifier decodes as tags; strategies for it: tag-kbest",
        ),
    ],
)
def test_a_strategy_that_does_not_fit_the_model_is_a_one_line_config_error(arch, override, message):
    task, vocabs, model, train = _tiny(arch)
    with pytest.raises(ConfigError, match=r"^'decode.strategy': " + message) as e:
        run(model, task, train[:2], replace(task.cfg.decode, **override), vocabs=vocabs)
    assert "\n" not in str(e.value)


def test_sampling_and_nbest_do_not_fit_a_tagger_and_a_tree_strategy_does_not_fit_a_sequence_model():
    from structseq.decode.sampling import Sampling

    task, vocabs, model, train = _tiny()
    with pytest.raises(ConfigError, match="'decode.strategy': 'sampling' searches sequence models"):
        run(model, task, train[:2], task.cfg.decode, vocabs=vocabs, sampling=Sampling())
    with pytest.raises(ConfigError, match="'--nbest': a tagger's k-best lists are per word"):
        run(model, task, train[:2], task.cfg.decode, vocabs=vocabs, nbest=2)
    tree = api.load_run(TREE_RUN)
    with pytest.raises(ConfigError, match="n-best lists and sampling need a sequence model .* decodes as tree"):
        tree.search(tree.parse_lines(["the dog sleeps"]))
    with pytest.raises(ConfigError, match="'decode.strategy': model M offers no search interface"):
        choose(None, Settings(), None, "M")


def test_a_strategy_that_does_not_fit_is_refused_where_a_run_loads_or_training_starts(tmp_path):
    """Before any batch: `--set decode.strategy=...` on a run, a training config (a saved run's is null with a
    warning: tests/train/test_old_runs.py)."""
    fits = "'decode.strategy': '{}' searches {} models, but model {} decodes as {}"
    with pytest.raises(ConfigError, match=fits.format("tree-beam", "tree", ".*", "sequence")):
        api.load_run(OLD_RUN).with_overrides(["decode.strategy=tree-beam"])
    with pytest.raises(ConfigError, match=fits.format("beam", "sequence", "TreeSupertagger", "tree")):
        api.load_run(TREE_RUN).with_overrides(["decode.strategy=beam"])
    assert api.load_run(TREE_RUN).with_overrides(["decode.strategy=tree-beam"]).config.decode.strategy == "tree-beam"
    data = splits(12, 2, seed=1)["train"]
    (tmp_path / "train.txt").write_text(
        "".join(" ".join(f"{w}|{c}" for w, c in zip(e.source, e.target)) + "\n" for e in data)
    )
    cfg = {
        "task": "supertag",
        "data": {"dataset": "files", "train": str(tmp_path / "train.txt"), "valid": str(tmp_path / "train.txt")},
        "model": {"arch": "supertag-classifier", "d_model": 8, "encoder": {"hidden": 8, "word_dim": 8, "layers": 1}},
        "optim": {"batch_size": 4, "max_tokens": None, "schedule": "constant"},
        "train": {"max_steps": 2, "valid_every": 1, "threads": 1},
        "decode": {"strategy": "tree-greedy"},
    }
    with pytest.raises(ConfigError, match=fits.format("tree-greedy", "tree", "SupertagClassifier", "tags")):
        api.train(config_from_dict(cfg), tmp_path / "run", show_progress=False)
    assert not (tmp_path / "run" / "metrics.jsonl").exists()  # refused before the run started
    (tmp_path / "cfg.yaml").write_text(yaml.safe_dump(cfg))  # a config file: the error names it
    with pytest.raises(ConfigError, match=f"^{re.escape(str(tmp_path / 'cfg.yaml'))}: 'decode.strategy': 'tree-"):
        api.train(tmp_path / "cfg.yaml", tmp_path / "run2", show_progress=False)


@pytest.fixture
def worst_first():
    """A plugin tree strategy (one class in one file): the k best trees, worst first."""

    @register_strategy("tree-worst-first")
    class WorstFirst(TagStrategy):
        interface = "tree"

        def search(self, model, inputs, max_len=None, ids=None):
            best = STRATEGIES.get("tree-beam")(self.settings).search(model, inputs)
            return [([hyps[::-1] for hyps in words], repaired) for words, repaired in best]

    yield WorstFirst
    STRATEGIES.remove("tree-worst-first")


def test_a_plugin_tree_strategy_named_in_the_config_decodes_the_task(worst_first):
    task, vocabs, model, train = _tiny()
    best = task.predict(model, train[:5], vocabs, beam=3)
    task.cfg.decode.strategy = "tree-worst-first"
    worst = task.predict(model, train[:5], vocabs, beam=3)
    assert [[kb[::-1] for kb in p.kbest] for p in best] == [p.kbest for p in worst]


@pytest.mark.parametrize("arch", ["supertag-tree", "supertag-classifier"])
def test_a_taggers_progress_is_labelled_tag_and_a_sequence_models_decode(arch, monkeypatch, capsys):
    """What `structseq predict` shows on stderr (a line per batch here; a bar on a terminal): "tag" for a
    supertagger, as before it decoded through `decode.run`, "decode" for a sequence model."""
    from structseq import progress

    monkeypatch.setattr(progress, "LINE_EVERY", 0.0)
    task, vocabs, model, train = _tiny(arch)
    task.predict(model, train[:10], vocabs, show_progress=True)
    assert capsys.readouterr().err.startswith("tag: 8/10 sentences")
    seq = api.load_run(OLD_RUN)
    seq.decode_examples(seq.parse_lines(["dax lug"]), show_progress=True)
    assert capsys.readouterr().err.startswith("decode: 1/1 sentences")
