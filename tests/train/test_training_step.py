"""`Trainer.step()`, the one update `run()` takes, and the benchmark helpers built on it
(`structseq.testing.bench`): what benchmarks time is what training does (issue 46)."""

import pytest
import torch

from structseq.decode.search import beam_search, greedy, max_lengths
from structseq.testing.bench import NoEos, count_flops
from structseq.train.loop import StepResult, Trainer
from tests.fixtures.toy import toy_config, toy_tsv
from tests.models.test_models import VARIANTS, batch, make


def test_steps_reach_the_parameters_run_reaches(tmp_path):
    """Three step() calls and a run of max_steps 3 (same seed) end at the same parameters, bit for bit: the
    public step is the loop's update, not a copy of it."""
    data = toy_tsv(tmp_path)
    ran = Trainer(toy_config(data, max_steps=3, valid_every=0), tmp_path / "run", show_progress=False)
    ran.run()
    stepped = Trainer(toy_config(data, max_steps=3, valid_every=0), tmp_path / "step", show_progress=False)
    results = [stepped.step() for _ in range(3)]
    assert all(isinstance(r, StepResult) and r.target_tokens > 0 for r in results)
    assert stepped.progress.step == ran.progress.step == 3
    assert (stepped.progress.epoch, stepped.progress.batch_in_epoch) == (
        ran.progress.epoch,
        ran.progress.batch_in_epoch,
    )
    for (name, p), q in zip(ran.model.named_parameters(), stepped.model.parameters()):
        assert torch.equal(p, q), name
    assert float(results[0].grad_norm) > 0  # toy_config clips: the norm before clipping is reported


def test_count_flops_counts_the_next_update_without_taking_it(tmp_path):
    """count_flops leaves the parameters, gradients and data position as they were; the batch it counted is
    the one the next update trains on (accumulate 1: the same target tokens)."""
    cfg = toy_config(toy_tsv(tmp_path))
    cfg.optim.accumulate = 1
    t = Trainer(cfg, tmp_path / "run", show_progress=False)
    before = [p.detach().clone() for p in t.model.parameters()]
    flops, tokens, share = count_flops(t)
    assert flops > 0 and 0 < share <= 1
    assert (t.progress.step, t.progress.epoch, t.progress.batch_in_epoch) == (0, 0, 0)
    assert all(p.grad is None for p in t.model.parameters())
    assert all(torch.equal(p, q) for p, q in zip(t.model.parameters(), before))
    assert t.step().target_tokens == tokens


def test_training_batches_plan_replaces_the_shuffle(tmp_path):
    cfg = toy_config(toy_tsv(tmp_path))
    cfg.optim.accumulate = 1
    t = Trainer(cfg, tmp_path / "run", show_progress=False)
    t.batches.plan = [[4, 1], [7]]
    seen = [t.batches.next(t.progress, t.dist).index for _ in range(3)]
    assert [sorted(i) for i in seen] == [[1, 4], [7], [1, 4]]
    assert (t.progress.epoch, t.progress.batch_in_epoch) == (1, 1)


@torch.no_grad()
def test_no_eos_decodes_to_the_length_limit():
    """A model that would end every sentence at once (</s> favoured at every step) decodes exactly
    max_len tokens through NoEos, greedy and beam alike."""
    model = make(VARIANTS["lstm"])

    class EndsAtOnce:
        def encode(self, inputs):
            return model.encode(inputs)

        def init_state(self, enc):
            return model.init_state(enc)

        def step(self, prev, state):
            lp, state = model.step(prev, state)
            lp = lp.clone()
            lp[:, 2] = 0.0  # log 1: </s> wins wherever it may
            return lp, state

    src, _ = batch()
    max_len = max_lengths(src, 0.0, 4)
    assert all(len(t) == 0 for t in greedy(EndsAtOnce(), {"src": src}, max_len).tokens)
    assert [len(t) for t in greedy(NoEos(EndsAtOnce()), {"src": src}, max_len).tokens] == max_len.tolist()
    hyp = beam_search(NoEos(EndsAtOnce()), {"src": src}, 3, max_len, len_penalty=0.0)
    assert [len(t) for t in hyp.tokens] == max_len.tolist()


@pytest.mark.parametrize("eos", [2, 5])
def test_no_eos_masks_the_given_token_only(eos):
    class Uniform:
        def step(self, prev, state):
            return torch.zeros(2, 8), state

    lp, _ = NoEos(Uniform(), eos).step(None, None)
    assert (lp[:, eos] == -1e4).all() and (lp.sum(1) == -1e4).all()
