"""Tests that notice the realistic bugs of scripts/mutants.yaml that the rest of the suite let through (issue 31,
section 6), and the mechanics of scripts/mutants.py itself (the mutation run is `make mutants`, not `make test`).
Each test names the mutant it kills."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from contextlib import nullcontext

import pytest
import torch

from structseq.config import apply_overrides, config_from_dict
from tests.fixtures.paths import ROOT


def _context_cfg(tmp_path, **over):
    from tests.tasks.test_context import _cfg

    return _cfg(tmp_path, **over)


# ------------------------------------------------------------------ context-aware models
def test_context_sentences_keeps_the_last_n(tmp_path):
    """Mutant context-sentences-first-n."""
    from structseq.data.example import Example
    from structseq.data.limits import BRK
    from structseq.tasks import get_task

    task = get_task(_context_cfg(tmp_path, task={"context_sentences": 2}))
    e = Example.from_text("walk", "WALK", context=f"a means one . {BRK} b means two . {BRK} c means three .")
    assert " ".join(task.prepare(e).context) == f"b means two . {BRK} c means three ."
    one = get_task(_context_cfg(tmp_path, task={"context_sentences": 1}))
    assert " ".join(one.prepare(e).context) == "c means three ."


def _built(tmp_path, **over):
    """A trainer's task, data and (untrained) model for a context config, without training."""
    from structseq.train.loop import Trainer

    return Trainer(_context_cfg(tmp_path, **over), tmp_path / "run", show_progress=False)


def test_focus_sharpens_the_context_pass_and_leaves_the_source_pass_alone(tmp_path):
    """Mutant focus-on-source-pass: the logit scale and window focus the context's self-attention only."""
    t = _built(tmp_path, model={"context_logit_scale": 4.0, "context_window": 3.0})
    model = t.model.eval()
    inputs = t.task.decode_inputs(t.data.train[:4], t.data.vocabs)
    src, ctx = inputs["src"], inputs["ctx"]
    with torch.no_grad():
        memories = model.encode(inputs)
        plain_source = model.encoder(src, src.eq(model.pad))
        plain_context = model.encoder(ctx, ctx.eq(model.pad))
    assert torch.allclose(memories["source"]["out"], plain_source, atol=1e-6)
    context = memories["context"]
    keep = ~context["pad"]
    assert not torch.allclose(context["out"][keep], plain_context[keep], atol=1e-3)  # focused


def test_contrastive_scores_only_the_current_target(tmp_path):
    """Mutant contrastive-scores-context: a candidate's score is the log-probability of its target tokens and
    </s> given source and context, here summed step by step by incremental decoding (an independent path)."""
    from structseq.api import Run
    from structseq.data.vocab import Vocab
    from structseq.decode.contrastive import target_log_probs

    t = _built(tmp_path)
    model = t.model.eval()
    run = Run(tmp_path / "run", t.cfg, model, t.data.vocabs, "last", t.task)
    examples = [e for e in t.data.train if e.context][:3]
    scores = target_log_probs(run, examples, batch_size=2)
    for e, score in zip(examples, scores):
        with torch.no_grad():
            state = model.init_state(model.encode(t.task.decode_inputs([e], run.vocabs)))
            prev, total = torch.tensor([Vocab.bos]), 0.0
            for w in run.vocabs["tgt"].encode(e.target) + [Vocab.eos]:
                log_probs, state = model.step(prev, state)
                total += float(log_probs[0, w])
                prev = torch.tensor([w])
        assert score == pytest.approx(total, abs=1e-3)


# ------------------------------------------------------------------ search
class _Chain:
    """A toy autoregressive model over <pad> <s> </s> <unk> a: after <s>, </s> has probability 0.4 and `a` 0.6;
    after `a`, each 0.5. Its best sequence by score is [] (</s> at once, log 0.4); by score per token (length
    penalty 1, </s> counted) it is [a] ((log 0.6 + log 0.5) / 2 > log 0.4)."""

    sentence_state = frozenset()

    def encode(self, inputs):
        return {"n": inputs["src"].new_zeros(inputs["src"].shape[0])}

    def init_state(self, enc):
        return enc

    def step(self, prev, state):
        import math

        from structseq.data.vocab import Vocab

        lp = torch.full((prev.shape[0], 5), -1e4)
        first = prev.eq(Vocab.bos)
        lp[:, Vocab.eos] = torch.where(first, math.log(0.4), math.log(0.5))
        lp[:, 4] = torch.where(first, math.log(0.6), math.log(0.5))
        return lp, state


def test_length_penalty_ranks_hypotheses_of_different_lengths():
    """Mutant beam-length-penalty-ignored: the suite's length-penalty test ranks hypotheses that all end at the
    length limit (an untrained model), where any penalty gives the same order."""
    import math

    from structseq.decode.search import beam_search

    inputs, max_len = {"src": torch.ones(1, 3, dtype=torch.long)}, torch.tensor([6])
    plain = beam_search(_Chain(), inputs, 3, max_len, len_penalty=0.0)
    assert plain.tokens == [[]] and plain.scores[0] == pytest.approx(math.log(0.4))
    per_token = beam_search(_Chain(), inputs, 3, max_len, len_penalty=1.0, nbest=True)
    assert per_token.tokens == [[4]] and per_token.scores[0] == pytest.approx(math.log(0.6) + math.log(0.5))
    ranked = [s / (len(t) + 1) for t, s in per_token.nbest[0]]
    assert ranked == sorted(ranked, reverse=True) and len({len(t) for t, _ in per_token.nbest[0]}) > 1


# ------------------------------------------------------------------ supertag metrics
def test_frequency_bins_at_their_boundaries():
    """Mutant supertag-bins-off-by-one: counts 100, 99, 10, 9, 1, 0 (Kogkalidis & Moortgat's bins)."""
    from structseq.metrics.supertag import bin_of

    assert [bin_of(n) for n in (100, 99, 10, 9, 1, 0)] == ["frequent", "uncommon", "uncommon", "rare", "rare", "unseen"]


# ------------------------------------------------------------------ training
class _TwinRanks:
    """A stand-in for a world of 2 whose ranks hold identical shards: every all-reduce doubles (sums) its value,
    and the model is not wrapped (DDP's average of two identical gradients is that gradient)."""

    world_size, rank, is_main = 2, 0, True

    def shard(self, index):
        return index

    def sum_int(self, n):
        return 2 * n

    def sum_float(self, x):
        return 2 * x

    def any(self, flag):
        return bool(flag)

    def no_sync(self, model):
        return nullcontext()


def test_data_parallel_gradients_are_normalised_by_the_global_token_count(tmp_path):
    """Mutant ddp-local-token-normalisation: two ranks holding the same batch give the gradient and the logged
    loss of one process on it (no clipping, which would hide a factor 2)."""
    from structseq.train.loop import Trainer
    from tests.fixtures.toy import toy_config, toy_tsv

    cfg = toy_config(toy_tsv(tmp_path))
    cfg = config_from_dict(apply_overrides(cfg.to_dict(), ["optim.clip_norm=0", "optim.accumulate=1"]))
    one = Trainer(cfg, tmp_path / "one", show_progress=False)
    loss_one, n_one, _ = one.step()
    two = Trainer(cfg, tmp_path / "two", show_progress=False)
    two.dist = _TwinRanks()
    loss_two, n_two, _ = two.step()
    assert n_two == 2 * n_one
    assert float(loss_two) == pytest.approx(float(loss_one), rel=1e-6)  # the loss may stay on the device
    for (name, p), q in zip(one.model.named_parameters(), two.model.parameters()):
        if p.grad is not None:
            assert torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-7), name


def test_rng_state_round_trip_restores_python_numpy_and_torch():
    """Mutants resume-no-python-rng, resume-no-numpy-rng."""
    import random

    import numpy as np

    from structseq.run.rng import rng_state, set_rng_state

    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    state = rng_state()
    first = (random.random(), float(np.random.rand()), float(torch.rand(())))
    random.seed(2), np.random.seed(2), torch.manual_seed(2)
    set_rng_state(state)
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == first


def test_a_checkpoint_whose_checksum_was_removed_is_refused(tmp_path):
    """Mutant checkpoint-without-checksum-accepted: format 2 always carries its checksum."""
    from structseq.errors import StructseqError
    from structseq.run.checkpoint import load_checkpoint, save_checkpoint

    path = tmp_path / "c.pt"
    save_checkpoint({"model": {"w": torch.ones(2)}}, path)
    raw = torch.load(path, weights_only=True)
    del raw["checksum"]
    raw["model"]["w"] = torch.zeros(2)  # changed, and the evidence removed
    torch.save(raw, path)
    with pytest.raises(StructseqError, match="checksum"):
        load_checkpoint(path)


def test_the_run_lock_is_released_when_preparing_the_directory_fails(tmp_path):
    """Mutant lock-kept-after-failed-prepare: a run refused for a foreign file leaves the directory unlocked."""
    from structseq.run.directory import RunDirError, RunLock
    from structseq.train.loop import Trainer
    from tests.fixtures.toy import toy_config, toy_tsv

    run = tmp_path / "run"
    run.mkdir()
    trainer = Trainer(toy_config(toy_tsv(tmp_path)), run, show_progress=False)  # the folder is free when it opens
    # a foreign file appears before the run starts: refused by prepare_new, under the lock
    (run / "config.yaml").write_text("my: own\n")
    with pytest.raises(RunDirError, match="which no run created") as refused:
        trainer.run()
    assert refused.value is not None  # the failure (and its frames) still alive, as in a caller handling it
    RunLock(run).acquire().release()  # free


# ------------------------------------------------------------------ the mutation script itself
def _mutants_module():
    spec = importlib.util.spec_from_file_location("scripts_mutants", ROOT / "scripts" / "mutants.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_mutation_script_kills_reports_and_never_touches_the_repository(tmp_path):
    """On a toy repository: one mutant its test kills, one it misses, one whose code moved; the working tree is
    left as it was, the score and each status land in the JSON."""
    mutants = _mutants_module()
    repo = tmp_path / "repo"
    (repo / "src" / "toy").mkdir(parents=True)
    (repo / "tests").mkdir()
    source = "def add(a, b):\n    return a + b\n\n\ndef unused(x):\n    return x\n"
    (repo / "src" / "toy" / "__init__.py").write_text(source)
    (repo / "tests" / "test_toy.py").write_text("from toy import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    table = tmp_path / "mutants.yaml"
    table.write_text("""
- {id: minus, file: src/toy/__init__.py, edits: [['return a \\+ b', 'return a - b']], tests: [tests/test_toy.py]}
- {id: dead-code, file: src/toy/__init__.py, edits: [['return x', 'return -x']], tests: [tests/test_toy.py]}
- {id: moved, file: src/toy/__init__.py, edits: [['def mul', 'def div']], tests: [tests/test_toy.py]}
- {id: later, file: src/toy/__init__.py, edits: [['a \\+ b', 'b + a']], tests: [tests/test_toy.py], pending: soon}
""")
    out = tmp_path / "m.json"
    assert mutants.main(["--root", str(repo), "--table", str(table), "--out", str(out), "--timeout", "120"]) == 0
    report = json.loads(out.read_text())
    assert {m["id"]: m["status"] for m in report["mutants"]} == {
        "minus": "killed",
        "dead-code": "survived",
        "moved": "stale",
        "later": "pending",
    }
    assert report["score"] == 0.5 and report["killed"] == 1 and report["survived"] == 1
    assert (repo / "src" / "toy" / "__init__.py").read_text() == source
    assert mutants.mutate(source, [["nothing here", "x"]]) is None


def test_the_mutant_table_is_well_formed_and_its_mutants_apply():
    """Every mutant of scripts/mutants.yaml names existing tests, and its patterns match today's code (a stale
    mutant would silently drop out of the score)."""
    mutants = _mutants_module()
    table = mutants.load_table(mutants.TABLE)
    assert len({m["id"] for m in table}) == len(table) >= 20
    for m in table:
        text = (ROOT / m["file"]).read_text(encoding="utf-8")
        assert mutants.mutate(text, m["edits"]) not in (None, text), m["id"]
        for test in m["tests"]:
            assert (ROOT / test.split("::")[0]).is_file() or m.get("pending"), (m["id"], test)
