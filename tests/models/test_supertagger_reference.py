"""The batched tree supertagger against plain-loop references (structseq/testing/oracles/supertag_reference.py) on
TLGbank-style categories with unary modalities (`dia`, `box`: pseudo-binary with a blank right child): node
feedback, state feedback, teacher-forced node log-probabilities, greedy and 1-best tree decoding; and
validation accuracy that compares category strings, not vocabulary ids. Tiny random models, fixed seeds."""

from __future__ import annotations

import torch

from structseq.config import config_from_dict
from structseq.data.categories import BLANK, is_unary, nodes, parse_category
from structseq.data.example import Example
from structseq.decode.tree import greedy_trees, kbest_trees
from structseq.models import build_model
from structseq.models.supertagger import NodeFeedback, StateFeedback
from structseq.tasks import get_task
from structseq.tasks.supertag import Tagged
from structseq.testing.oracles import supertag_reference as ref

torch.set_num_threads(1)

# sentences of TLGbank light (word|formula), each with a unary modality dia(1,box(1,X))
TLG = [
    "Affaire|n à|dr(0,dl(0,n,n),dr(0,dl(0,np,s_inf),dia(1,box(1,np)))) suivre|dr(0,dl(0,np,s_inf),np) !|dl(0,n,txt)",
    "Que|dr(0,s_whq,dr(0,s,dia(1,box(1,np)))) s'|cl_r est|dr(0,dr(0,dl(0,cl_r,s),dl(0,cl_r,dl(0,np,s_ppart))),np) "
    "-il|np passé|dr(0,dl(0,cl_r,dl(0,np,s_ppart)),np) ?|dl(0,s,txt)",
    "Ils|np lui|dr(0,dl(0,np,s),dr(0,dl(0,np,s),dia(1,box(1,pp_a)))) ont|dr(0,dl(0,np,s),dl(0,np,s_ppart)) "
    "arraché|dr(0,dr(0,dl(0,np,s_ppart),pp_a),np) les|dr(0,np,n) ongles|n .|dl(0,s,txt)",
    "Alors|dr(0,s,s) ,|let à|dr(0,pp_a,np) qui|dr(0,dl(0,dr(0,pp,np),s_whq),dr(0,s,dia(1,box(1,pp)))) "
    "profite|dr(0,dr(0,s,pp_a),np) le|dr(0,np,n) crime|n ?|dl(0,s,txt)",
    "Notre|dr(0,np,n) groupe|n les|dr(0,dl(0,np,s),dr(0,dl(0,np,s),dia(1,box(1,np)))) "
    "approuvera|dr(0,dl(0,np,s),np) donc|dl(1,s,s) .|dl(0,s,txt)",
    "Qu'|dr(0,s_whq,dr(0,s,dia(1,box(1,np)))) est|dr(0,dr(0,s,np),np) -ce|np que|dr(0,dl(0,s,s),np) Angiox|np "
    "?|dl(0,s,txt)",
]
EXAMPLES = [Example(*map(tuple, zip(*(t.split("|") for t in line.split())))) for line in TLG]


def _tiny(seed=0, **model):
    m = {
        "arch": "supertag-tree",
        "d_model": 16,
        "dropout": 0.0,
        "node_dim": 8,
        "node_heads": 2,
        "state_heads": 2,
        "max_distance": 2,
        "edge_dropout": 0.0,
        "encoder": {"hidden": 8, "word_dim": 8, "char_dim": 4, "char_filters": 4, "layers": 1, "word_dropout": 0.0},
    }
    m.update(model)
    cfg = config_from_dict({"task": "supertag", "model": m, "decode": {"batch_size": 8}})
    task = get_task(cfg)
    vocabs = task.build_vocabs(EXAMPLES)
    torch.manual_seed(seed)
    return task, vocabs, build_model(cfg.model, vocabs, EXAMPLES).eval()


def test_the_data_has_unary_modalities_and_blanks():
    task, vocabs, _ = _tiny()
    syms = vocabs["sym"].itos
    assert BLANK in syms and sum(is_unary(s) for s in syms) == 2  # <>1 and []1


@torch.no_grad()
def test_node_feedback_equals_a_plain_loop():
    torch.manual_seed(1)
    nf = NodeFeedback(12, 6, 3, 0.0).eval()
    h = torch.randn(7, 12)
    node_word = [0, 0, 2, 3, 3, 3, 6, 2]  # words 1, 4, 5 have no node: only their self-loop
    emb = torch.randn(len(node_word), 6)
    got = nf(h, torch.tensor(node_word), emb)
    assert torch.allclose(got, ref.node_feedback(nf, h, node_word, emb), atol=1e-5)


@torch.no_grad()
def test_node_feedback_in_bf16_where_exp_runs_in_float32(monkeypatch):
    """CUDA's bf16 autocast runs `exp` in float32 (found on an H200: index_add_ of float into bf16 failed).
    Emulated on the CPU: bf16 weights and inputs, `Tensor.exp` returning float32; the plain loop in float32."""
    torch.manual_seed(1)
    nf = NodeFeedback(12, 6, 3, 0.0).eval()
    h, emb, node_word = torch.randn(7, 12), torch.randn(8, 6), [0, 0, 2, 3, 3, 3, 6, 2]
    want = ref.node_feedback(nf, h, node_word, emb)
    exp = torch.Tensor.exp
    monkeypatch.setattr(torch.Tensor, "exp", lambda self: exp(self.float()))
    got = nf.to(torch.bfloat16)(h.bfloat16(), torch.tensor(node_word), emb.bfloat16())
    assert torch.allclose(got.float(), want, atol=0.1), (got.float() - want).abs().max()


@torch.no_grad()
def test_state_feedback_equals_a_plain_loop():
    torch.manual_seed(2)
    sf = StateFeedback(12, 3, 2, 0.0).eval()
    h = torch.randn(3, 7, 12)
    mask = torch.tensor([[1] * 7, [1] * 4 + [0] * 3, [1] * 2 + [0] * 5]).bool()
    got = sf(h, mask)
    want = ref.state_feedback(sf, h, mask)
    assert torch.allclose(got[mask], want[mask], atol=1e-5)


def _gold_trees(task, vocabs, examples, W):
    stoi = vocabs["sym"].stoi
    return {
        (b, w): {k: stoi[s] for k, s in nodes(parse_category(c))}
        for b, e in enumerate(examples)
        for w, c in enumerate(e.target)
    }


@torch.no_grad()
def test_teacher_forced_log_probs_equal_the_reference():
    task, vocabs, model = _tiny()
    batch = task.batch(EXAMPLES[:4], vocabs)
    lp = model(batch)
    h, mask = model.encoder(batch)
    W = mask.shape[1]
    want = ref.teacher_forced(model, h, mask, _gold_trees(task, vocabs, EXAMPLES[:4], W))
    assert len(want) == lp.shape[0]
    for row, (w, k) in enumerate(zip(batch["node_word"].tolist(), batch["node_pos"].tolist())):
        assert torch.allclose(lp[row], want[w // W, w % W, k], atol=1e-4), (w, k)


def _decoded(out, W):
    trees = {}
    for w, p, s, sc in zip(out["word"].tolist(), out["pos"].tolist(), out["sym"].tolist(), out["score"].tolist()):
        trees.setdefault((w // W, w % W), {})[p] = (s, sc)
    return trees


@torch.no_grad()
def test_greedy_and_one_best_trees_equal_the_reference_with_unary_modalities():
    task, vocabs, model = _tiny(seed=3)
    syms = vocabs["sym"].itos
    unary = [i for i, s in enumerate(syms) if is_unary(s)]
    model.symbols.weight[unary] *= 4  # the random model picks modalities often, so their blank slots are tested
    batch = task.batch(EXAMPLES, vocabs)
    h, mask = model.encoder(batch)
    W = mask.shape[1]
    got = _decoded(greedy_trees(model, h, mask, max_depth=3), W)
    want = ref.greedy(model, h, mask, syms, max_depth=3)
    assert got.keys() == want.keys()
    n_unary = 0
    for key, tree in want.items():
        assert {k: s for k, (s, _) in got[key].items()} == {k: s for k, (s, _) in tree.items()}, key
        for k, (s, score) in tree.items():
            assert abs(got[key][k][1] - score) < 1e-4
            if is_unary(syms[s]) and 2 * k + 1 in tree:
                n_unary += 1
                assert syms[tree[2 * k + 1][0]] == BLANK and syms[tree[2 * k][0]] != BLANK
    assert n_unary >= 3
    best = kbest_trees(model, h, mask, 1, max_depth=3)
    for (b, w), tree in want.items():
        one = {int(p): int(s) for p, s in zip(best["pos"][b, w, 0], best["sym"][b, w, 0]) if p > 0}
        assert one == {k: s for k, (s, _) in tree.items()}
        assert abs(float(best["score"][b, w, 0]) - sum(sc for _, sc in tree.values())) < 1e-3


def test_validation_accuracy_compares_categories_not_ids():
    """Two different categories unseen in training share the <unk> id: predicting one for the other is wrong."""
    task, vocabs, model = _tiny()
    unseen_a, unseen_b = "dr(0,np,pp_de)", "dl(0,pp_de,np)"
    assert unseen_a not in vocabs["cat"].stoi and unseen_b not in vocabs["cat"].stoi
    gold = [Example(("de", "Paris"), (unseen_a, unseen_a))]
    accuracy = {}
    for hyp in (unseen_a, unseen_b):
        task.predict = lambda model, examples, vocabs, beam=None, hyp=hyp: [
            Tagged(e.source, [[(hyp, 0.0)] for _ in e.source]) for e in examples
        ]
        accuracy[hyp] = task.validate(model, gold, vocabs)["valid_accuracy"]
    assert accuracy[unseen_b] == 0.0 and accuracy[unseen_a] in (1.0, 100.0)  # a fraction or a percent


def test_validation_accuracy_is_the_registered_accuracy_as_a_percent():
    """`valid_accuracy` (a percent, as logged runs hold it) is 100 x the registered `accuracy` on the same outputs;
    validation counts it itself because the registered metric's inputs need the training split's counts."""
    from collections import Counter

    from structseq.metrics.report import compute_metric

    task, vocabs, model = _tiny()
    gold = [Example(("a", "b", "c"), ("np", "s", "np")), Example(("d",), ("pp",))]
    best = [["np", "np", "np"], ["pp"]]
    preds = [Tagged(e.source, [[(c, 0.0)] for c in b], [False] * len(b)) for e, b in zip(gold, best)]
    task.predict = lambda model, examples, vocabs, beam=None: preds
    task._train_counts = Counter()  # no training split to read: the word accuracy does not use the counts
    inputs = task.metric_inputs(gold, preds, dataset="files", split="valid")
    registered = compute_metric("accuracy", inputs)
    assert task.validate(model, gold, vocabs)["valid_accuracy"] == 100.0 * registered["score"] == 75.0
