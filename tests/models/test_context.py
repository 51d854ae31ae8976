"""Context-aware models (Wang et al. 2019): incremental == teacher-forced for every variant and head, the
equivalences with a plain Transformer, focused context attention as specified."""

import math

import pytest
import torch

from structseq.config import config_from_dict
from structseq.data.vocab import Vocab
from structseq.models import build_model
from structseq.models.context import SEP, join_sequential

VOCAB = Vocab.build([["a", "b", "c", "d", "e", "f", "g", "h", SEP]])
TVOCAB = Vocab.build([["a", "b", "x", "y", "z"]])
BASE = dict(d_model=32, n_heads=4, ffn_dim=64, encoder_layers=2, decoder_layers=4, dropout=0.0)
CTX = dict(BASE, arch="context-transformer", source_layers=[1, 2], context_layers=[3, 4])
VARIANTS = {
    "sequential": dict(CTX, decoder="sequential"),
    "concatenate": dict(CTX, decoder="concatenate"),
    "alternate": dict(CTX, decoder="alternate"),
    "interleave": dict(CTX, decoder="interleave", source_layers=[1, 4], context_layers=[2, 3]),
    "interleave-focused": dict(CTX, decoder="interleave", context_logit_scale=2.0, context_window=3.0),
    "alternate-prenorm-focused": dict(CTX, decoder="alternate", norm_first=True, context_window=2.0),
    "doc-nmt": dict(CTX, decoder="doc-nmt"),
    "doc-nmt-prenorm-focused": dict(CTX, decoder="doc-nmt", norm_first=True, context_logit_scale=2.0),
}
HEADS = {"softmax": {"type": "softmax"}, "copy": {"type": "copy"}, "lexical": {"type": "lexical", "init": "uniform"}}


def make(model_cfg, vocab=VOCAB, tvocab=TVOCAB):
    cfg = config_from_dict({"task": "context-seq2seq", "model": model_cfg})
    return build_model(cfg.model, {"src": vocab, "tgt": tvocab}).eval()


def batch(empty_context_row=True):
    torch.manual_seed(1)
    src = torch.tensor([[4, 5, 6, 2], [7, 8, 2, 0]])
    ctx = torch.tensor([[9, 10, 11, 4, 5, 2], [5, 6, 2, 0, 0, 0]])
    if empty_context_row:
        ctx[1] = 0  # the second example has no context
    tgt_in = torch.tensor([[1, 4, 5, 6], [1, 7, 0, 0]])
    return {"src": src, "ctx": ctx, "tgt_in": tgt_in}


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("name", VARIANTS)
def test_teacher_forced_equals_incremental(name, head):
    model = make({**VARIANTS[name], "head": HEADS[head]})
    b = batch()
    full = model(b)
    inc = model.incremental_log_probs(b)
    mask = b["tgt_in"].ne(0)
    assert torch.isfinite(full[mask]).all()
    assert torch.allclose(full[mask], inc[mask], atol=1e-5)


@pytest.mark.parametrize("head", HEADS)
def test_interleave_with_every_layer_on_the_source_is_the_plain_transformer(head):
    ctx_model = make(
        {**CTX, "decoder": "interleave", "source_layers": [1, 2, 3, 4], "context_layers": [], "head": HEADS[head]}
    )
    plain = build_model(
        config_from_dict({"model": {**BASE, "arch": "transformer", "head": HEADS[head]}}).model,
        {"src": VOCAB, "tgt": TVOCAB},
    ).eval()
    plain.load_state_dict(ctx_model.state_dict())  # the same parameter names and shapes
    assert ctx_model.num_parameters() == plain.num_parameters()
    b = batch()
    assert torch.allclose(ctx_model(b), plain(b), atol=1e-6)


def test_interleave_has_the_parameter_count_of_a_transformer():
    interleave = make(dict(CTX, decoder="interleave"))
    plain = build_model(
        config_from_dict({"model": {**BASE, "arch": "transformer"}}).model, {"src": VOCAB, "tgt": TVOCAB}
    )
    assert interleave.num_parameters() == plain.num_parameters()
    assert make(dict(CTX, decoder="alternate")).num_parameters() > plain.num_parameters()


@pytest.mark.parametrize("head", HEADS)
def test_concatenate_with_an_empty_context_is_the_plain_transformer(head):
    model = make({**CTX, "decoder": "concatenate", "head": HEADS[head]})
    plain = build_model(
        config_from_dict({"model": {**BASE, "arch": "transformer", "head": HEADS[head]}}).model,
        {"src": VOCAB, "tgt": TVOCAB},
    ).eval()
    plain.load_state_dict(model.state_dict())
    b = batch()
    empty = {**b, "ctx": torch.zeros(2, 3, dtype=torch.long)}
    none = {**b, "ctx": torch.zeros(2, 0, dtype=torch.long)}
    assert torch.allclose(model(empty), plain(b), atol=1e-6)
    assert torch.allclose(model(none), plain(b), atol=1e-6)


@pytest.mark.parametrize("head", HEADS)
def test_doc_nmt_without_its_encoder_context_attention_is_alternate(head):
    """doc-nmt = alternate + a context-attention block in every layer of the source pass: with those blocks'
    outputs zeroed (pre-norm, so a zero residual branch is the identity) the two compute the same function; with
    them, the source encoding depends on the context."""
    doc = make({**CTX, "decoder": "doc-nmt", "norm_first": True, "head": HEADS[head]})
    alt = make({**CTX, "decoder": "alternate", "norm_first": True, "head": HEADS[head]})
    extra = {k for k in doc.state_dict() if k.startswith("source_context.")}
    assert extra and set(doc.state_dict()) - extra == set(alt.state_dict())
    alt.load_state_dict({k: v for k, v in doc.state_dict().items() if k not in extra})
    b = batch(empty_context_row=False)
    assert not torch.allclose(doc(b), alt(b), atol=1e-4)
    with torch.no_grad():
        for block in doc.source_context:
            block.attn.out_proj.weight.zero_()
            block.attn.out_proj.bias.zero_()
    assert torch.allclose(doc(b), alt(b), atol=1e-6)
    d_ = CTX["d_model"]
    per_block = 4 * (d_ * d_ + d_) + 2 * d_  # q, k, v, out projections and the block's layer norm
    assert doc.num_parameters() == alt.num_parameters() + CTX["encoder_layers"] * per_block


def test_context_encoder_without_focus_is_the_source_encoder():
    model = make(dict(CTX, decoder="alternate"))
    ctx = batch(empty_context_row=False)["ctx"]
    pad = ctx.eq(0)
    assert torch.equal(model.encode_context(ctx, pad), model.encoder(ctx, pad))
    focused = make(dict(CTX, decoder="alternate", context_logit_scale=3.0))
    focused.load_state_dict(model.state_dict())
    assert not torch.allclose(focused.encode_context(ctx, pad), model.encoder(ctx, pad), atol=1e-4)


def test_window_penalty_and_temperature_as_specified():
    """Context self-attention logits = scale * q.k / sqrt(d) - (i - j)^2 / (2 (w/2)^2); source pass unfocused."""
    w, scale = 3.0, 2.0
    model = make(dict(CTX, decoder="interleave", context_logit_scale=scale, context_window=w))
    bias = model.context_bias(5, "cpu")
    i = torch.arange(5.0)
    assert torch.allclose(bias, -((i[:, None] - i[None]) ** 2) / (2 * (w / 2) ** 2))
    attn = model.encoder.layers[0].self_attn
    x = torch.randn(1, 5, 32)
    _, weights, (k, _) = attn(x, need_weights=True, attn_bias=bias, logit_scale=scale)
    q = attn._heads(attn.q_proj(x))
    manual = (scale * (q @ k.transpose(-1, -2)) / math.sqrt(8) + bias).softmax(-1)
    assert torch.allclose(weights, manual, atol=1e-6)
    _, plain_w, _ = attn(x, need_weights=True)
    assert torch.allclose(plain_w, (q @ k.transpose(-1, -2) / math.sqrt(8)).softmax(-1), atol=1e-6)


def test_sequential_input_is_source_sep_context_without_inner_padding():
    src = torch.tensor([[4, 5, 2], [6, 2, 0]])
    ctx = torch.tensor([[7, 2, 0], [8, 9, 2]])
    out = join_sequential(src, ctx, sep=99)
    assert out.tolist() == [[4, 5, 2, 99, 7, 2], [6, 2, 99, 8, 9, 2]]
    assert join_sequential(src, ctx[:, :0], sep=99).tolist() == [[4, 5, 2, 99], [6, 2, 99, 0]]
    assert join_sequential(src, ctx, sep=None).tolist() == [[4, 5, 2, 7, 2], [6, 2, 8, 9, 2]]


@pytest.mark.parametrize("name", ["sequential", "concatenate", "alternate", "interleave", "doc-nmt"])
def test_beam_search_runs_over_both_memories(name):
    from structseq.decode.search import beam_search, greedy

    model = make({**VARIANTS[name], "head": {"type": "copy"}})
    b = batch()
    inputs = {"src": b["src"], "ctx": b["ctx"]}
    max_len = torch.tensor([5, 5])
    g = greedy(model, inputs, max_len)
    k1 = beam_search(model, inputs, 1, max_len, len_penalty=0.0)
    assert g.tokens == k1.tokens
    hyp = beam_search(model, inputs, 3, max_len, nbest=True)
    assert all(len(n) >= 1 for n in hyp.nbest)


def test_bad_configs_are_errors():
    from structseq.errors import ConfigError

    with pytest.raises(ConfigError, match="neither"):
        make(dict(CTX, decoder="interleave", source_layers=[1, 2], context_layers=[3]))
    with pytest.raises(ConfigError, match="outside"):
        make(dict(CTX, decoder="interleave", source_layers=[1, 2, 9], context_layers=[3, 4]))
    with pytest.raises(ConfigError, match="sequential"):
        make(dict(CTX, decoder="sequential", context_window=4.0))


def test_attention_statistics_equal_a_reference_loop_under_uniform_attention():
    """With zero queries every encoder token attends uniformly to the s + 1 + c tokens of its row, so the paper's
    Table 9 shares have closed forms: S->C = c / T per source token, C->S = s / T per context token, and the
    window share counts the keys within window / 2 of each query, here by a plain loop."""
    model = make(dict(CTX, decoder="sequential"))
    for layer in model.encoder.layers:
        torch.nn.init.zeros_(layer.self_attn.q_proj.weight)
        torch.nn.init.zeros_(layer.self_attn.q_proj.bias)
    b = batch(empty_context_row=False)
    lengths = [(4, 6), (3, 3)]  # (source, context) tokens of the two rows, </s> included
    for window in (2, 5, 40):
        s_c = c_s = win = 0.0
        for s, c in lengths:
            t = s + 1 + c
            s_c, c_s = s_c + s * c / t, c_s + c * s / t
            win += sum(sum(abs(i - j) <= window / 2 for j in range(t)) / t for i in range(t))
        stats = model.attention_statistics(b, window=window)
        assert stats["source_attention_on_context"] == pytest.approx(s_c / 7)
        assert stats["context_attention_on_source"] == pytest.approx(c_s / 9)
        assert stats["attention_in_window"] == pytest.approx(win / 18)
        assert (stats["n_source_tokens"], stats["n_context_tokens"], stats["n_tokens"]) == (7, 9, 18)


def test_attention_statistics_average_the_layers_of_a_trained_shape_model():
    model = make(dict(CTX, decoder="sequential"))
    b = batch(empty_context_row=False)
    every, first, second = (model.attention_statistics(b, window=4, layer=k) for k in (None, 1, 2))
    for key in ("source_attention_on_context", "context_attention_on_source", "attention_in_window"):
        assert 0.0 < first[key] < 1.0 and first[key] != pytest.approx(second[key])
        assert every[key] == pytest.approx((first[key] + second[key]) / 2)
    with pytest.raises(ValueError, match="layer 3 outside 1..2"):
        model.attention_statistics(b, layer=3)
    with pytest.raises(ValueError, match="sequential variant"):
        make(VARIANTS["interleave"]).attention_statistics(b)


@pytest.mark.parametrize("name", ["sequential", "concatenate", "alternate", "interleave", "doc-nmt"])
def test_the_copy_head_points_into_the_source_and_the_context(name):
    """What the copy head receives: an attention distribution over the tokens of S and of C together (sequential:
    the joined S <sep> C), so a token that appears only in the context can be copied."""
    model = make(dict(VARIANTS[name], head={"type": "copy"}))
    b = batch(empty_context_row=False)
    seen = {}
    forward = model.head.forward

    def spy(x, attn, tokens):
        seen["attn"], seen["tokens"] = attn, tokens
        return forward(x, attn, tokens)

    model.head.forward = spy
    with torch.no_grad():
        model(b)
    attn, tokens = seen["attn"], seen["tokens"]
    assert attn.shape[-1] == tokens.shape[1]
    assert torch.allclose(attn.sum(-1), torch.ones(attn.shape[:-1]), atol=1e-5)
    only_in_context = tokens.eq(9)  # token 9 ("f") is in row 0's context, not its source
    assert only_in_context[0].any() and not b["src"][0].eq(9).any()
    assert float((attn[0] * only_in_context[0]).sum()) > 0
