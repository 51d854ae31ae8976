"""The search's speed-ups (`structseq.decode.speedups`) change no output: with each switched off, greedy, beam
(n-best lists, stopping rules, length penalties, sentences leaving the batch) and sampling give the same tokens
and the same scores, bit for bit; stable slots keep a hypothesis in its parent's row (checked against a plain
loop) and the caches then copy only the rows that move."""

import json

import pytest
import torch

from structseq.decode import speedups
from structseq.decode.sampling import Sampling, sample
from structseq.decode.search import _stable_slots, beam_search, greedy
from structseq.nn.attention import KVCache
from structseq.state import map_state
from tests.models.test_models import VARIANTS, batch, make


def stable_slots_loop(parent: list[int]) -> list[int]:
    """The rows of one sentence's hypotheses (rank order) given their parents' rows, one hypothesis at a time."""
    slot, kept = [None] * len(parent), set()
    for r, p in enumerate(parent):
        if p not in kept:
            slot[r] = p
            kept.add(p)
    free = iter(sorted(set(range(len(parent))) - kept))
    return [s if s is not None else next(free) for s in slot]


def test_stable_slots_equal_a_plain_loop():
    g = torch.Generator().manual_seed(0)
    for K in (1, 2, 5, 8):
        parent = torch.randint(0, K, (200, K), generator=g)
        parent[:3] = torch.arange(K)  # nobody moves
        parent[3] = 0  # every child of the best
        got = _stable_slots(parent)
        assert got.tolist() == [stable_slots_loop(p) for p in parent.tolist()]
        assert torch.equal(got.sort(1).values, torch.arange(K).expand(200, K))  # a permutation of the rows


def _hyp(h):
    return (h.tokens, h.scores, h.nbest, h.ended)


def _search(model, src, max_len, beam, **kw):
    if beam == 1:
        return _hyp(greedy(model, {"src": src}, max_len))
    return _hyp(beam_search(model, {"src": src}, beam, max_len, **kw))


@pytest.mark.parametrize("name", ["transformer-pre-relative", "transformer-post-relative-copy", "lstm-copy"])
@pytest.mark.parametrize(
    "beam,kw",
    [
        (1, {}),
        (4, {"nbest": True}),
        (5, {"len_penalty": 0.0}),
        (5, {"nbest": True, "early_stopping": "never"}),
        (3, {"early_stopping": True, "eos_at_limit": False}),
    ],
)
def test_search_equals_the_search_with_every_speedup_off(name, beam, kw):
    torch.manual_seed(1)
    model = make(VARIANTS[name])
    src, _ = batch()
    for max_len in (torch.full((src.shape[0],), 9), torch.arange(1, src.shape[0] + 1)):  # sentences leave 1 by 1
        fast = _search(model, src, max_len, beam, **kw)
        with speedups.off():
            plain = _search(model, src, max_len, beam, **kw)
        assert fast == plain
        for flag in ("identity_reorder", "stable_slots"):
            with speedups.switched(**{flag: False}):
                assert _search(model, src, max_len, beam, **kw) == fast


def test_sampling_equals_sampling_with_every_speedup_off():
    model = make(VARIANTS["transformer-pre-relative"])
    src, _ = batch()
    max_len = torch.arange(2, src.shape[0] + 2)
    draw = lambda: _hyp(
        sample(model, {"src": src}, max_len, Sampling(top_k=4), n=3, generator=torch.Generator().manual_seed(5))
    )  # noqa: E731
    fast = draw()
    with speedups.off():
        assert draw() == fast


def test_the_saved_da0ad07_outputs_with_every_speedup_off():
    """The bit-identity fixture (tests/decode/test_identity.py) holds on the plain loop too."""
    from tests.decode.test_identity import FIXTURE, outputs

    with speedups.off():
        assert json.loads(json.dumps(outputs())) == json.loads(FIXTURE.read_text())


def test_stable_slots_copy_only_moved_rows_in_place(monkeypatch):
    """A beam search with stable slots reorders its caches within their buffers at some steps (where at most half
    the rows move); switched off, never."""
    calls = []
    plain = KVCache._moved_in_place

    def spy(self, t):
        calls.append(plain(self, t))
        return calls[-1]

    monkeypatch.setattr(KVCache, "_moved_in_place", spy)
    model = make(VARIANTS["transformer-post-sinusoidal"])
    src, _ = batch()
    beam_search(model, {"src": src}, 5, torch.full((src.shape[0],), 12))
    assert any(calls)
    calls.clear()
    with speedups.off():
        beam_search(model, {"src": src}, 5, torch.full((src.shape[0],), 12))
    assert not any(calls)


def test_handed_over_cache_reordered_in_place_equals_eager_reordering():
    """Rows that mostly stay: only the moved rows are copied, within the same buffer, and the logical cache equals
    eager reordering; a reorder that moves most rows, or a shrink, gathers into another buffer."""
    g = torch.Generator().manual_seed(0)
    k0 = torch.randn(6, 2, 3, 4, generator=g)
    cache, eager = KVCache(k0, k0 + 1), k0
    new = torch.randn(6, 2, 1, 4, generator=g)
    cache, eager = cache.extend(new, new + 1), torch.cat([eager, new], 2)  # now with spare room
    for rows, same_buffer in [
        ([0, 0, 2, 3, 3, 5], True),  # two rows move
        ([0, 1, 2, 3, 4, 5], True),  # none
        ([1, 0, 3, 2, 5, 4], False),  # every row moves
        ([4, 4, 1], False),  # a shrink
    ]:
        rows = torch.tensor(rows)
        before = cache.k.data_ptr()
        cache = map_state({"c": cache}, lambda x: x.index_select(0, rows), owned=True)["c"]
        new = torch.randn(rows.shape[0], 2, 1, 4, generator=g)
        cache = cache.extend(new, new + 1)
        eager = torch.cat([eager.index_select(0, rows), new], 2)
        assert torch.equal(cache.keys(), eager) and torch.equal(cache.values(), eager + 1)
        assert (cache.k.data_ptr() == before) == same_buffer


def test_decode_speedups_false_runs_the_plain_loop_with_the_same_outputs(tmp_path, monkeypatch):
    """`decode.speedups: false` (a config key, `--set decode.speedups=false`) runs every search of the call with
    every speed-up off, and gives the same n-best lists; the key is listed by `structseq config decode`, and is
    not an evaluation setting (the same predictions file either way)."""
    import yaml
    from typer.testing import CliRunner

    from structseq.api import load_run
    from structseq.cli import app
    from structseq.decode import search as search_module
    from structseq.evaluation import NOT_SETTINGS
    from tests.fixtures.toy import toy_config, toy_tsv

    data = toy_tsv(tmp_path, n=20)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(toy_config(data, max_steps=2).to_dict()))
    r = CliRunner().invoke(app, ["train", str(cfg), "-o", str(tmp_path / "run")])
    assert r.exit_code == 0, r.output
    seen = []
    monkeypatch.setattr(search_module, "current_speedups", lambda: seen.append(speedups.current()) or seen[-1])
    run = load_run(tmp_path / "run")
    examples = run.parse_lines(["a b c", "c b a b"])
    fast = run.search(examples, nbest=3, beam=3)
    assert seen and all(s == speedups.Speedups() for s in seen)
    seen.clear()
    plain = run.with_overrides(["decode.speedups=false"]).search(examples, nbest=3, beam=3)
    assert seen and all(not s.stable_slots and not s.identity_reorder for s in seen)
    assert speedups.current() == speedups.Speedups()  # restored after the call
    assert [[(c.tokens, c.score) for c in k] for k in fast] == [[(c.tokens, c.score) for c in k] for k in plain]
    assert "speedups" in NOT_SETTINGS
    listed = CliRunner().invoke(app, ["config", "decode"])
    assert "speedups" in listed.output
