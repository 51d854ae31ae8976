"""Search: beam 1 equals an independent greedy loop; beam finds at least as probable outputs."""

import pytest
import torch

from structseq.decode.search import beam_search, greedy, max_lengths, sequence_log_prob
from tests.models.test_models import VARIANTS, batch, make


def argmax_loop(model, src, max_len):
    """Reference greedy decoding, written independently of `beam_search`."""
    out = []
    for b in range(src.shape[0]):
        s = src[b : b + 1][:, : int(src[b].ne(0).sum())]
        state = model.init_state(model.encode({"src": s}))
        prev, seq, score = torch.tensor([1]), [], 0.0
        for t in range(int(max_len[b]) + 1):
            lp, state = model.step(prev, state)
            tok = 2 if t == int(max_len[b]) else int(lp[0, 2:].argmax()) + 2  # no <pad>/<s>
            score += float(lp[0, tok])
            if tok == 2:
                break
            seq.append(tok)
            prev = torch.tensor([tok])
        out.append((seq, score))
    return out


@pytest.mark.parametrize("name", ["transformer-pre-relative", "lstm-copy"])
@torch.no_grad()
def test_beam_one_equals_greedy_reference(name):
    model = make(VARIANTS[name])
    src, _ = batch()
    max_len = max_lengths(src, 1.0, 3)
    hyp = beam_search(model, {"src": src}, 1, max_len, len_penalty=0.0)
    ref = argmax_loop(model, src, max_len)
    assert hyp.tokens == [r[0] for r in ref]
    assert hyp.scores == pytest.approx([r[1] for r in ref], abs=1e-4)
    g = greedy(model, {"src": src}, max_len)
    assert g.tokens == hyp.tokens


@pytest.mark.parametrize("name", ["transformer-post-sinusoidal", "lstm"])
@torch.no_grad()
def test_beam_at_least_as_probable_as_greedy_and_scores_are_true_log_probs(name):
    model = make(VARIANTS[name])
    torch.manual_seed(3)
    src = torch.randint(4, 12, (16, 7))
    src[:, -1] = 2
    max_len = max_lengths(src, 1.0, 2)
    g = greedy(model, {"src": src}, max_len)
    b = beam_search(model, {"src": src}, 5, max_len, len_penalty=0.0, nbest=True)
    for gs, bs in zip(g.scores, b.scores):
        assert bs >= gs - 1e-5
    # every returned score equals the teacher-forced log-probability of the returned sequence
    for i, (toks, score) in enumerate(zip(b.tokens, b.scores)):
        tgt_in = torch.tensor([[1] + toks])
        tgt_out = torch.tensor([toks + [2]])
        lp = model({"src": src[i : i + 1], "tgt_in": tgt_in})
        assert float(sequence_log_prob(lp, tgt_out)) == pytest.approx(score, abs=1e-4)
    # n-best lists are sorted, distinct, and respect the length limit
    for i, entries in enumerate(b.nbest):
        scores = [s for _, s in entries]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(t) for t, _ in entries}) == len(entries)
        assert all(len(t) <= int(max_len[i]) for t, _ in entries)


@torch.no_grad()
def test_length_penalty_reranks_by_normalised_score():
    model = make(VARIANTS["lstm"])
    src, _ = batch()
    max_len = max_lengths(src, 1.0, 3)
    b = beam_search(model, {"src": src}, 4, max_len, len_penalty=1.0, nbest=True)
    for entries in b.nbest:
        norm = [s / (len(t) + 1) for t, s in entries]
        assert norm == sorted(norm, reverse=True)


@torch.no_grad()
def test_search_survives_nan_log_probabilities():
    """A diverged model (NaN outputs after a few steps) still yields one hypothesis per sentence."""
    model = make(VARIANTS["transformer-post-sinusoidal"])

    class Diverged:
        encode, init_state = model.encode, model.init_state

        def step(self, prev, state):
            lp, state = model.step(prev, state)
            steps = state["self_kv"][0][0].shape[2]
            return (lp * float("nan") if steps > 2 else lp), state

    src, _ = batch()
    for beam in (1, 3):
        hyp = beam_search(Diverged(), {"src": src}, beam, max_lengths(src, 1.0, 3))
        assert len(hyp.tokens) == src.shape[0]


@pytest.mark.parametrize("beam,len_penalty", [(1, 0.0), (3, 0.0), (3, 1.0)])
@torch.no_grad()
def test_settled_sentences_leave_the_batch_without_changing_results(beam, len_penalty):
    """Rows of settled sentences are dropped (the batch shrinks step by step); every sentence's result equals
    searching it alone, where nothing is dropped around it."""
    model = make(VARIANTS["transformer-pre-relative"])
    src, _ = batch()
    max_len = torch.arange(1, src.shape[0] + 1)  # limits 1..B: sentences are forced to end one after another
    rows = []

    class Counting:
        encode, init_state = model.encode, model.init_state

        def step(self, prev, state):
            rows.append(prev.shape[0])
            return model.step(prev, state)

    hyp = beam_search(Counting(), {"src": src}, beam, max_len, len_penalty=len_penalty)
    assert rows[0] == src.shape[0] * beam and rows[-1] < rows[0]
    assert all(a >= b for a, b in zip(rows, rows[1:]))
    for b in range(src.shape[0]):
        s = src[b : b + 1][:, : int(src[b].ne(0).sum())]
        alone = beam_search(model, {"src": s}, beam, max_len[b : b + 1], len_penalty=len_penalty)
        assert hyp.tokens[b] == alone.tokens[0]
        assert hyp.scores[b] == pytest.approx(alone.scores[0], abs=1e-4)


def _every_row_reordered(model):
    """The same model, but beam search copies every state entry at every step (no `sentence_state`)."""

    class Plain:
        encode, init_state, step = model.encode, model.init_state, model.step

    return Plain()


@pytest.mark.parametrize("beam", [1, 4])
@pytest.mark.parametrize(
    "name", ["transformer-pre-relative", "transformer-post-relative-copy", "lstm-copy", "sep-o2-shared", "sep-o4-copy"]
)
def test_sentence_state_is_copied_only_when_sentences_leave(name, beam):
    """Entries equal across a sentence's hypotheses are left in place while no sentence leaves the batch: the
    results equal a search that reorders every entry at every step (limits 1..B make sentences leave one by one)."""
    if name.startswith("sep"):
        from tests.models.test_dangle import VARIANTS as DANGLE
        from tests.models.test_dangle import make as make_dangle

        model = make_dangle(DANGLE[name])
    else:
        model = make(VARIANTS[name]).eval()
    assert model.sentence_state
    src, _ = batch()
    for max_len in (torch.full((src.shape[0],), 7), torch.arange(1, src.shape[0] + 1)):
        got = beam_search(model, {"src": src}, beam, max_len, nbest=True)
        want = beam_search(_every_row_reordered(model), {"src": src}, beam, max_len, nbest=True)
        assert got.nbest == want.nbest


def test_context_models_keep_both_memories_in_place():
    from tests.models.test_context import VARIANTS as CTX_VARIANTS
    from tests.models.test_context import batch as ctx_batch
    from tests.models.test_context import make as make_ctx

    model = make_ctx({**CTX_VARIANTS["alternate"], "head": {"type": "copy"}})
    b = ctx_batch()
    inputs, max_len = {"src": b["src"], "ctx": b["ctx"]}, torch.tensor([6, 2])
    got = beam_search(model, inputs, 3, max_len, nbest=True)
    assert got.nbest == beam_search(_every_row_reordered(model), inputs, 3, max_len, nbest=True).nbest


def test_lazy_kv_cache_equals_eager_reordering():
    from structseq.nn.attention import KVCache
    from structseq.state import map_state

    g = torch.Generator().manual_seed(0)
    k, v = torch.randn(6, 2, 5, 3, generator=g), torch.randn(6, 2, 5, 3, generator=g)
    new_k, new_v = torch.randn(4, 2, 1, 3, generator=g), torch.randn(4, 2, 1, 3, generator=g)
    first, second = torch.tensor([5, 5, 0, 2, 1, 3]), torch.tensor([1, 0, 0, 4])  # two reorders, then a shrink
    state = {"self_kv": [KVCache(k, v)]}
    for rows in (first, second):
        state = map_state(state, lambda x: x.index_select(0, rows))
    cache = state["self_kv"][0]
    assert cache.k is k  # nothing copied yet
    got = cache.extend(new_k, new_v)
    eager = k.index_select(0, first).index_select(0, second), v.index_select(0, first).index_select(0, second)
    assert torch.equal(got.keys(), torch.cat([eager[0], new_k], 2))
    assert torch.equal(got.values(), torch.cat([eager[1], new_v], 2))


def test_kv_cache_appends_in_place_and_never_overwrites_a_branch():
    """Unchanged rows: the next step is written into spare capacity (same buffer); extending the same cache a
    second time (another continuation) copies instead of overwriting the first continuation's step."""
    from structseq.nn.attention import KVCache
    from structseq.state import map_state

    g = torch.Generator().manual_seed(0)
    step = lambda: torch.randn(3, 2, 1, 4, generator=g)  # noqa: E731
    ks = [step() for _ in range(4)]
    cache = KVCache(ks[0], ks[0].clone()).extend(ks[1], ks[1].clone())  # no room: grows
    assert cache.k.shape[2] > cache.size == 2
    same = map_state({"c": cache}, lambda x: x.index_select(0, torch.arange(3)))["c"]  # identity reorder
    assert same.rows is None
    a = same.extend(ks[2], ks[2].clone())
    assert a.k.data_ptr() == cache.k.data_ptr()  # written in place
    b = same.extend(ks[3], ks[3].clone())  # a second continuation of the same cache
    assert b.k.data_ptr() != a.k.data_ptr()
    assert torch.equal(a.keys(), torch.cat(ks[:3], 2)) and torch.equal(b.keys(), torch.cat(ks[:2] + ks[3:], 2))


def test_handed_over_caches_recycle_buffers_and_equal_eager_reordering():
    """Owned reorders (beam search's): the gather of step 3 writes into the buffer step 1's gather left behind,
    and every step's logical cache equals eager reordering of a plain tensor; a shrink reuses the larger buffer."""
    from structseq.nn.attention import KVCache
    from structseq.state import map_state

    g = torch.Generator().manual_seed(0)
    k0 = torch.randn(4, 2, 3, 5, generator=g)
    cache, eager, ptrs = KVCache(k0, k0 + 1), k0, []
    for i, rows in enumerate(
        [torch.tensor([1, 1, 0, 3]), torch.tensor([3, 2, 2, 0]), torch.tensor([0, 0, 1, 2]), torch.tensor([2, 1])]
    ):
        cache = map_state({"c": cache}, lambda x: x.index_select(0, rows), owned=True)["c"]
        new = torch.randn(rows.shape[0], 2, 1, 5, generator=g)
        cache = cache.extend(new, new + 1)
        eager = torch.cat([eager.index_select(0, rows), new], 2)
        assert torch.equal(cache.keys(), eager) and torch.equal(cache.values(), eager + 1)
        ptrs.append(cache.k.data_ptr())
    assert ptrs[2] == ptrs[0] and ptrs[3] == ptrs[1] and ptrs[0] != ptrs[1]


def test_beam_search_with_recycled_caches_equals_fresh_buffers(monkeypatch):
    """The same search with buffer recycling switched off (no state handed over) gives the same n-best lists."""
    import structseq.decode.search as search
    from structseq.state import map_state

    model = make(VARIANTS["transformer-pre-relative"]).eval()
    src, _ = batch()
    max_len = torch.arange(3, src.shape[0] + 3)
    got = beam_search(model, {"src": src}, 4, max_len, nbest=True)
    monkeypatch.setattr(search, "map_state", lambda state, fn, owned=False: map_state(state, fn))
    want = beam_search(model, {"src": src}, 4, max_len, nbest=True)
    assert got.nbest == want.nbest
