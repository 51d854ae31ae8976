"""Dangle / R-Dangle: batched training == incremental decoding == the authors' formulations, and the
structural facts of the papers (bidirectional fusion, K/V sources, sharing, interval edge cases)."""

import pytest
import torch

from structseq.config import config_from_dict
from structseq.data.vocab import Vocab
from structseq.decode.search import beam_search, max_lengths, sequence_log_prob
from structseq.errors import ConfigError
from structseq.models import build_model
from structseq.nn.layers import EncoderLayer
from structseq.testing.oracles.dangle_reference import batch_copy_log_probs, per_step_log_probs

VOCAB = Vocab.build([list("abcdefgh")])
TVOCAB = Vocab.build([list("abxyz")])
BASE = dict(
    d_model=32,
    n_heads=4,
    ffn_dim=64,
    decoder_layers=2,
    dropout=0.0,
    max_relative=3,
    fusion_layers=2,
    post_fusion_layers=1,
    encoder_layers=2,
)
RICH = dict(norm_first=True, pre_fusion_layers=1, encoder_layers=3)  # pre-norm, k0 > 0
VARIANTS = {
    "dangle": {"arch": "dangle"},
    "shr-o2": {"arch": "rdangle-shr", "interval": 2},
    "shr-o3-prenorm": {"arch": "rdangle-shr", "interval": 3, **RICH},
    "sep-o1": {"arch": "rdangle-sep", "interval": 1},
    "sep-o2-shared": {
        "arch": "rdangle-sep",
        "interval": 2,
        **RICH,
        "share_pre_fusion": True,
        "share_post_fusion": True,
    },
    "sep-o4-copy": {"arch": "rdangle-sep", "interval": 4, "head": {"type": "copy"}},
    "sep-inf-lexical": {"arch": "rdangle-sep", "interval": 0, "head": {"type": "lexical", "init": "uniform"}},
    "sep-o2-sinusoidal": {"arch": "rdangle-sep", "interval": 2, "positions": "sinusoidal"},
}


def make(overrides, seed=0):
    torch.manual_seed(seed)
    model_cfg = {**BASE, **overrides}
    if model_cfg["arch"] != "rdangle-sep":  # only R-Dangle_sep has a value encoder
        model_cfg.pop("encoder_layers")
    cfg = config_from_dict({"model": model_cfg})
    model = build_model(cfg.model, {"src": VOCAB, "tgt": TVOCAB})
    with torch.no_grad():  # relative tables start at zero: randomise them so the tests see them
        for name, p in model.named_parameters():
            if name.endswith("table"):
                p.normal_(0, 0.5)
    return model.eval()


def batch(T=13):
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, len(VOCAB), (4, 9), generator=g)
    src[:, -1] = VOCAB.eos
    src[1, 5], src[1, 6:] = VOCAB.eos, VOCAB.pad
    tgt = torch.randint(4, len(TVOCAB), (4, T), generator=g)  # longer than the relative clip distance
    tgt[:, 0] = TVOCAB.bos
    tgt[2, 9:] = TVOCAB.pad  # a shorter target
    return src, tgt


def close(a, b, tgt, atol=1e-5):
    """Equal at every real (non-padding) target position."""
    real = tgt.ne(TVOCAB.pad)
    return torch.allclose(a[real], b[real], atol=atol), (a - b)[real].abs().max().item()


@pytest.mark.parametrize("name", VARIANTS)
def test_teacher_forced_equals_incremental(name):
    model = make(VARIANTS[name])
    src, tgt = batch()
    full = model({"src": src, "tgt_in": tgt})
    assert full.shape == (4, 13, len(TVOCAB))
    ok, err = close(full, model.incremental_log_probs({"src": src, "tgt_in": tgt}), tgt)
    assert ok, err
    assert torch.allclose(full.exp().sum(-1), torch.ones(4, 13), atol=1e-5)


@pytest.mark.parametrize("name", ["dangle", "shr-o3-prenorm", "sep-o2-shared", "sep-o4-copy"])
@torch.no_grad()
def test_batched_training_equals_the_authors_formulations(name):
    model = make(VARIANTS[name])
    src, tgt = batch()
    full = model({"src": src, "tgt_in": tgt})
    assert close(full, per_step_log_probs(model, src, tgt), tgt)[0]
    assert close(full, batch_copy_log_probs(model, src, tgt), tgt)[0]


@torch.no_grad()
def test_extra_padding_columns_change_nothing():
    model = make(VARIANTS["sep-o4-copy"])
    src, tgt = batch()
    wide = torch.cat([tgt, torch.zeros(4, 6, dtype=tgt.dtype)], 1)
    out = model({"src": src, "tgt_in": wide})
    assert out.shape[1] == 19 and torch.isfinite(out).all()
    assert torch.allclose(out[:, :13], model({"src": src, "tgt_in": tgt}), atol=1e-6)


@pytest.mark.parametrize("name", VARIANTS)
def test_fixed_shape_rows_give_the_same_outputs_and_gradients(name):
    """`static_shapes` (every (point, sentence) row, sizes from the batch's shape alone, for captured steps)
    equals the live rows at every real position, also with padding columns past the longest target and with
    recomputed chunks; its gradients too."""
    model = make(VARIANTS[name])
    src, tgt = batch()
    wide = torch.cat([tgt, torch.zeros(4, 3, dtype=tgt.dtype)], 1)
    want = model({"src": src, "tgt_in": wide})
    grad = torch.autograd.grad(want[:, :13][tgt.ne(TVOCAB.pad)].sum(), list(model.parameters()), allow_unused=True)
    model.static_shapes = True
    for recompute in (False, True):
        model.recompute_chunks = recompute
        got = model({"src": src, "tgt_in": wide})
        assert close(got[:, :13], want[:, :13], tgt, 1e-5)[0]
        mine = torch.autograd.grad(got[:, :13][tgt.ne(TVOCAB.pad)].sum(), list(model.parameters()), allow_unused=True)
        for g, h in zip(grad, mine):
            assert (g is None) == (h is None) or (h is not None and h.abs().max() == 0)
            if g is not None and h is not None:
                torch.testing.assert_close(h, g, rtol=1e-4, atol=1e-5)


@torch.no_grad()
def test_chunking_points_does_not_change_outputs():
    model = make(VARIANTS["sep-o1"])
    src, tgt = batch()
    want = model({"src": src, "tgt_in": tgt})
    for chunk in (1, 2, 5):
        model.chunk_points = chunk
        assert close(model({"src": src, "tgt_in": tgt}), want, tgt, 1e-6)[0]


def test_gradients_match_the_per_step_formulation():
    model = make(VARIANTS["sep-o2-shared"])
    src, tgt = batch()
    real = tgt.ne(TVOCAB.pad)
    grads = []
    for fn in (lambda s, t: model({"src": s, "tgt_in": t}), lambda s, t: per_step_log_probs(model, s, t)):
        model.zero_grad()
        fn(src, tgt).gather(-1, tgt.clamp_min(4)[..., None])[real].sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for n in grads[0]:
        assert torch.allclose(grads[0][n], grads[1][n], atol=1e-4), n


def test_recomputing_chunks_gives_the_same_gradients_with_less_memory_kept():
    model = make(VARIANTS["sep-o2-shared"])
    model.chunk_points = 1
    src, tgt = batch()
    grads, saved = [], []
    for recompute in (False, True):
        model.recompute_chunks = recompute
        model.zero_grad()
        sizes = []
        with torch.autograd.graph.saved_tensors_hooks(lambda t: sizes.append(t.numel()) or t, lambda t: t):
            out = model({"src": src, "tgt_in": tgt})
        out.gather(-1, tgt.clamp_min(4)[..., None]).sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        saved.append(sum(sizes))
    for n in grads[0]:
        assert torch.allclose(grads[0][n], grads[1][n], atol=1e-5), n
    assert saved[1] < saved[0] / 2


@pytest.mark.parametrize("source_dropout", ["per_point", "per_batch"])
def test_fused_input_dropout_is_drawn_per_re_encoding_point(source_dropout):
    """Training with dropout (k0 = 1): the source and prefix parts of the fused input that the first fusion layer
    reads differ between the re-encoding points of one sentence (`per_point`, the default, as the reference's
    copy of the batch per point) or are the same at every point (`per_batch`); recomputed chunks draw the same
    masks again (same gradients); without dropout both compute the same outputs."""
    model = make({**VARIANTS["shr-o3-prenorm"], "dropout": 0.5, "source_dropout": source_dropout})
    model.train()
    model.chunk_points = 100
    seen = []
    hook = model.key_encoder.fusion[0].register_forward_pre_hook(lambda layer, args: seen.append(args[0].detach()))
    src, tgt = batch()
    model({"src": src[:1], "tgt_in": tgt[:1]})  # one sentence, 13 steps, interval 3: rows = its 5 points
    hook.remove()
    rows, S = seen[0], src.shape[1]
    assert rows.shape[0] == 5
    for part in (slice(0, S), S):  # the source; y_0, in every row's prefix
        same = [torch.equal(rows[0, part], rows[r, part]) for r in range(1, 5)]
        assert all(same) if source_dropout == "per_batch" else not any(same)
    grads = []
    for recompute in (False, True):
        model.recompute_chunks, model.chunk_points = recompute, 2
        model.zero_grad()
        torch.manual_seed(1)
        model({"src": src, "tgt_in": tgt}).gather(-1, tgt.clamp_min(4)[..., None]).sum().backward()
        grads.append([p.grad.clone() for p in model.parameters() if p.grad is not None])
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(*grads))
    outs = [make({**VARIANTS["shr-o3-prenorm"], "source_dropout": mode}).train() for mode in ("per_point", "per_batch")]
    with torch.no_grad():
        a, b = (m({"src": src, "tgt_in": tgt}) for m in outs)
    assert close(a, b, tgt)[0]


@pytest.mark.parametrize("name", ["dangle", "shr-o3-prenorm", "sep-o2-shared"])
def test_per_batch_dropout_is_one_draw_whatever_the_chunking(name):
    """Issue 55: `per_batch` (the default of dangle / rdangle-shr / rdangle-sep, as the reference code) drops the
    source and target embeddings out once per batch: under a fixed seed the fused inputs' prefixes and the outputs
    are the same with 1 point a chunk, the default chunking and every point in one chunk (the layers' own
    dropout, drawn per row in the reference too, is set to 0 here so that the outputs can be compared)."""
    from structseq.nn.layers import TokenEmbedding

    model = make({**VARIANTS[name], "dropout": 0.5}).train()
    assert model.per_point is False  # the default
    for m in model.modules():
        if not isinstance(m, TokenEmbedding) and isinstance(getattr(m, "dropout", None), float):
            m.dropout = 0.0
    src, tgt = batch()
    outs, prefixes = [], []
    for chunk in (1, 0, 1000):
        model.chunk_points, seen = chunk, []
        hook = model.key_encoder.fusion[0].register_forward_pre_hook(lambda _, args: seen.append(args[0].detach()))
        torch.manual_seed(3)
        outs.append(model({"src": src, "tgt_in": tgt}).detach())
        hook.remove()
        S = src.shape[1]  # each row's first prefix position (y_0 + type_tgt), by (point-major) row
        prefixes.append(torch.cat([x[:, S] for x in seen]))
    for out, prefix in zip(outs[1:], prefixes[1:]):
        assert close(out, outs[0], tgt)[0]
        assert torch.allclose(prefix, prefixes[0])
    assert not torch.allclose(prefixes[0][0], prefixes[0][1])  # dropout is on: sentences differ
    other = make({**VARIANTS[name], "dropout": 0.0}).train()
    with torch.no_grad():
        assert not close(other({"src": src, "tgt_in": tgt}), outs[0], tgt)[0]


def test_dangle_is_rdangle_shr_with_interval_one():
    dangle, shr = make({"arch": "dangle"}), make({"arch": "rdangle-shr", "interval": 1}, seed=5)
    assert dangle.state_dict().keys() == shr.state_dict().keys()
    shr.load_state_dict(dangle.state_dict())
    src, tgt = batch()
    inputs = {"src": src, "tgt_in": tgt}
    assert torch.equal(dangle(inputs), shr(inputs))
    assert type(dangle) is type(shr) and dangle.interval == 1 and not dangle.separate
    with pytest.raises(ConfigError, match="interval 1"):
        make({"arch": "dangle", "interval": 2})


@torch.no_grad()
def test_interval_beyond_the_target_is_one_encoding_at_the_first_step():
    model = make({"arch": "rdangle-sep", "interval": 50})
    model.interval = 50
    src, tgt = batch()
    long = model({"src": src, "tgt_in": tgt})
    model.interval = 0  # "infinite"
    assert torch.equal(long, model({"src": src, "tgt_in": tgt}))
    # by hand: H from [source ; <s> ; end], then an ordinary decoder pass over the whole target
    enc = model.encode({"src": src})
    seg, seg_pad = model.prefix_segment(tgt, torch.tensor([0]))
    assert seg.shape[1] == 2  # <s> and the end marker
    keys = model.key_encoder(enc["src_states"], enc["src_pad"], seg, seg_pad)
    x, _, _ = model.decoder(tgt, memories={"source": {"pad": enc["src_pad"]}}, cross_kv=model.cross_kv(keys, enc))
    assert close(long, model.head(x, None, src), tgt, 1e-6)[0]
    calls = []
    model.key_encoder.register_forward_hook(lambda *a: calls.append(1))
    model.interval = 50
    model.incremental_log_probs({"src": src, "tgt_in": tgt})
    assert len(calls) == 1


@torch.no_grad()
def test_fusion_is_bidirectional_over_source_prefix_and_end_marker():
    model = make(VARIANTS["shr-o2"])
    src, tgt = batch()
    enc = model.encode({"src": src})

    def keys(tokens, end=None):
        seg, pad = model.prefix_segment(tokens, torch.tensor([tokens.shape[1] - 1]))
        if end is not None:
            seg[:, -1] = end
        return model.key_encoder(enc["src_states"], enc["src_pad"], seg, pad)

    base = keys(tgt[:, :4])
    other = tgt[:, :4].clone()
    other[:, 3] = torch.where(other[:, 3] == 4, 5, 4)
    # the source positions (first in the sequence) see the latest prefix token: no causal mask
    assert (keys(other) - base).abs().amax(dim=(1, 2)).min() > 1e-4
    # ... and the end marker
    assert (keys(tgt[:, :4], end=torch.randn(32)) - base).abs().amax(dim=(1, 2)).min() > 1e-4
    # padding after the end marker is invisible
    seg, pad = model.prefix_segment(tgt[:, :8], torch.tensor([3]))
    assert seg.shape[1] == 5 and pad.sum() == 0
    padded_seg, padded = model.prefix_segment(tgt[:, :8], torch.tensor([3] * 4 + [6] * 4), torch.arange(4).repeat(2))
    h = model.key_encoder(enc["src_states"].repeat(2, 1, 1), enc["src_pad"].repeat(2, 1), padded_seg, padded)
    assert torch.allclose(h[:4], base, atol=1e-6)


@torch.no_grad()
def test_sep_projects_values_from_the_value_encoding_and_keys_from_the_adaptive_one():
    src, tgt = batch()
    for name, separate in (("sep-o2-shared", True), ("shr-o2", False)):
        model = make(VARIANTS[name])
        enc = model.encode({"src": src})
        state = model.init_state(enc)
        _, state = model.step(tgt[:, 0], state)
        seg, _ = model.prefix_segment(tgt[:, :1], torch.tensor([0]))
        h = model.key_encoder(enc["src_states"], enc["src_pad"], seg, None)
        for layer, cross in zip(model.decoder.layers, state["cross_kv"]):
            (k, v), attn = cross["source"], layer.cross_attn["source"]
            assert torch.allclose(k, attn.project_keys(h), atol=1e-6)
            from_h = attn.project_values(h)
            assert torch.allclose(v, from_h, atol=1e-6) != separate
            if separate:
                emb = model.src_embed(src)
                values = model.value_encoder(emb, model.key_encoder.pre_fuse(emb, enc["src_pad"]), enc["src_pad"])
                assert torch.allclose(v, attn.project_values(values), atol=1e-6)


def test_paper_sep_sharing_gives_twelve_distinct_encoder_layers():
    model = make(
        {
            "arch": "rdangle-sep",
            "encoder_layers": 10,
            "fusion_layers": 2,
            "post_fusion_layers": 8,
            "share_post_fusion": True,
        }
    )
    layers = {id(m) for m in model.modules() if isinstance(m, EncoderLayer)}
    assert len(layers) == 12
    assert all(a is b for a, b in zip(model.value_encoder.layers[2:], model.key_encoder.post))
    unshared = make({"arch": "rdangle-sep", "encoder_layers": 10, "fusion_layers": 2, "post_fusion_layers": 8})
    assert len({id(m) for m in unshared.modules() if isinstance(m, EncoderLayer)}) == 20
    with pytest.raises(ConfigError, match="fewer than the value-encoder layers"):
        make({"arch": "rdangle-sep", "encoder_layers": 4, "post_fusion_layers": 8, "share_post_fusion": True})
    with pytest.raises(ConfigError, match="unknown key 'model.share_post_fusion'"):  # only rdangle-sep has the key
        make({"arch": "rdangle-shr", "share_post_fusion": True})


@torch.no_grad()
def test_source_only_work_runs_once_per_batch():
    model = make(VARIANTS["sep-o2-shared"])
    src, tgt = batch()
    calls = {"value": 0, "pre": 0, "key": 0}
    model.value_encoder.register_forward_hook(lambda *a: calls.__setitem__("value", calls["value"] + 1))
    model.key_encoder.pre[0].register_forward_hook(lambda *a: calls.__setitem__("pre", calls["pre"] + 1))
    model.key_encoder.register_forward_hook(lambda *a: calls.__setitem__("key", calls["key"] + 1))
    model.chunk_points = 2
    model({"src": src, "tgt_in": tgt})  # 13 steps, interval 2: 7 points in 4 chunks
    assert calls == {"value": 1, "pre": 1, "key": 4}
    calls.update(value=0, pre=0, key=0)
    beam_search(model, {"src": src}, 3, max_lengths(src, 1.0, 2))
    assert calls["value"] == 1 and calls["pre"] == 1 and calls["key"] >= 2


@pytest.mark.parametrize("name", ["sep-o2-shared", "shr-o3-prenorm"])
@torch.no_grad()
def test_beam_search_reorders_every_cache(name):
    """Scores of returned hypotheses equal their teacher-forced log-probabilities: every cache (prefix, keys,
    decoder states, value projections) followed its beam."""
    model = make(VARIANTS[name])
    torch.manual_seed(3)
    src = torch.randint(4, 12, (6, 7))
    src[:, -1] = VOCAB.eos
    hyp = beam_search(model, {"src": src}, 4, max_lengths(src, 1.0, 3), len_penalty=0.0, nbest=True)
    for i, entries in enumerate(hyp.nbest):
        for toks, score in entries:
            lp = model({"src": src[i : i + 1], "tgt_in": torch.tensor([[TVOCAB.bos] + toks])})
            assert float(sequence_log_prob(lp, torch.tensor([toks + [TVOCAB.eos]]))) == pytest.approx(score, abs=1e-4)


@pytest.mark.parametrize("arch", ["dangle", "rdangle-shr", "rdangle-sep"])
@pytest.mark.learned
def test_each_variant_translates_unseen_combinations(arch, tmp_path, learned_seed, learned):
    """Word-by-word translation of 2-4 word sequences over 8 words: trained on 1,200 sequences, tested on
    200 others (novel combinations of known words), within 300 seeded updates. Test exact match over train
    seeds 1-5 (`STRUCTSEQ_LEARNED_SEEDS=1,2,3,4,5 pytest -m learned`, one thread, AMD EPYC, torch 2.13, 2026-12-07 after
    the issue 55 dropout changes (one target embedding, one source dropout draw a batch): dangle 0.985-1.0,
    rdangle-shr 0.93-0.98, rdangle-sep 0.86-0.93; on 2026-11-27, Intel Xeon: 0.94-1.0, 0.935-0.99, 0.85-0.94); each
    threshold sits at least 0.13 (26 sentences) below its worst seed."""
    import itertools
    import random

    from structseq import api
    from structseq.train.loop import Trainer

    seqs = [s for n in (2, 3, 4) for s in itertools.product("abcdefgh", repeat=n)]
    random.Random(0).shuffle(seqs)
    for name, part in (("train", seqs[:1200]), ("test", seqs[-200:])):
        (tmp_path / f"{name}.tsv").write_text("".join(f"{' '.join(s)}\t{' '.join(s).upper()}\n" for s in part))
    model = {
        "arch": arch,
        "d_model": 64,
        "n_heads": 4,
        "ffn_dim": 128,
        "decoder_layers": 1,
        "fusion_layers": 1,
        "post_fusion_layers": 1 if arch == "rdangle-sep" else 0,
        "dropout": 0.0,
        "interval": 1 if arch == "dangle" else 2,
    }
    if arch == "rdangle-sep":
        model.update(encoder_layers=1, share_post_fusion=True)
    test = str(tmp_path / "test.tsv")
    cfg = config_from_dict(
        {
            "data": {"dataset": "files", "train": str(tmp_path / "train.tsv"), "valid": test, "test": [test]},
            "model": model,
            "optim": {
                "lr": 5e-3,
                "schedule": "inverse_sqrt",
                "warmup": 30,
                "max_tokens": None,
                "batch_size": 32,
                "clip_norm": 1.0,
            },
            "train": {"max_steps": 300, "valid_every": 10_000, "seed": learned_seed, "threads": 1},
            "decode": {"max_len_a": 1.0, "max_len_b": 2},
        }
    )
    Trainer(cfg, tmp_path / "run", show_progress=False).run()
    report = api.load_run(tmp_path / "run", "last").evaluate(test, write_predictions=False)
    em = learned(f"{arch}_exact_match", report["exact_match"]["score"])
    assert em >= {"dangle": 0.85, "rdangle-shr": 0.8, "rdangle-sep": 0.7}[arch], em
