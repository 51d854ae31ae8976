"""Supertagging (issue 10): categories, readers, the TLGbank light split, the tree tagger's correctness
properties, k-best search, metrics, and a synthetic AB grammar learned with an unseen category."""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter

import pytest
import torch

from structseq.config import config_from_dict
from structseq.data.ab_grammar import UNSEEN, splits
from structseq.data.categories import (
    BLANK,
    canonical,
    depth,
    from_nodes,
    nodes,
    parse_category,
    print_category,
    well_formed,
)
from structseq.data.tlgbank import read_auto, read_supertag_file, read_tagged
from structseq.decode.tree import greedy_trees, kbest_trees
from structseq.metrics.supertag import multitag, supertag_scores
from structseq.models import build_model
from structseq.paths import data_root
from structseq.tasks import get_task

torch.set_num_threads(1)
TLG = data_root() / "tlgbank_light" / "maxentdata.txt"
needs_tlg = pytest.mark.skipif(not TLG.exists(), reason="shared data tlgbank_light not present")


# ---------------------------------------------------------------- categories


@needs_tlg
def test_every_corpus_formula_round_trips():
    cats = {c for e in read_tagged(TLG) for c in e.target}
    assert len(cats) == 545
    for c in cats:
        t = parse_category(c)
        assert print_category(t) == c and well_formed(t)
        assert from_nodes(dict(nodes(t))) == t


@pytest.mark.parametrize(
    "cat",
    [
        "(S[dcl]\\NP)/NP",
        "((S[b]\\NP)/PP)/NP",
        "(S\\NP)\\(S\\NP)",
        "N",
        "conj",
        ",",
        "(NP\\NP)/(S[dcl]/NP)",
        "S[adj]\\NP",
        "((S\\NP)/(S\\NP))/NP[nb]",
    ],
)
def test_ccg_categories_with_features_round_trip(cat):
    t = parse_category(cat)
    assert print_category(t) == cat
    assert from_nodes(dict(nodes(t))) == t


def test_ccg_bare_slashes_are_left_associative():
    assert canonical("S[dcl]\\NP/NP") == "(S[dcl]\\NP)/NP"
    assert parse_category("(S[dcl]\\NP)/NP") == ("/", ("\\", "S[dcl]", "NP"), "NP")


def test_unary_modalities_are_reversible_pseudo_binary():
    cat = "dr(0,dl(0,np,s),dia(1,box(1,pp_a)))"
    t = parse_category(cat)
    assert t == ("/0", ("\\0", "np", "s"), ("<>1", ("[]1", "pp_a", BLANK), BLANK))
    assert print_category(t) == cat and depth(t) == 3
    ns = dict(nodes(t))
    assert ns[1] == "/0" and ns[3] == "<>1" and ns[7] == BLANK and ns[6] == "[]1" and ns[13] == BLANK
    assert from_nodes(ns) == t
    assert not well_formed(("<>1", "np", "np")) and not well_formed(("/0", BLANK, "np"))
    assert parse_category("dl(0,np,s)") == ("\\0", "np", "s")  # formula order kept: B\A = dl(m,B,A)


@pytest.mark.parametrize(
    "bad", ["(S/NP", "S/", "dr(0,np)", "dia(1,np,s)", "foo(0,np,s)", "(" * 3000 + "a" + ")" * 3000]
)
def test_bad_categories_are_errors(bad, tmp_path):
    from structseq.data.categories import CategoryError
    from structseq.errors import DataError

    with pytest.raises(CategoryError):
        parse_category(bad)
    path = tmp_path / "bad.txt"
    path.write_text(f"a|NP b|{bad}\n")
    with pytest.raises(DataError, match="bad.txt:1"):
        read_tagged(path)


# ---------------------------------------------------------------- data


@needs_tlg
def test_tlgbank_light_split_is_pinned():
    from structseq.data.registry import load_dataset

    expect = {
        "train": (1274, 28632, "a0685a64ab200325"),
        "dev": (171, 3449, "398569735c1e1150"),
        "test": (154, 3401, "430f8764c920867d"),
    }
    for split, (n, words, digest) in expect.items():
        ex = load_dataset("tlgbank-light", split)
        text = "\n".join(" ".join(f"{w}|{c}" for w, c in zip(e.source, e.target)) for e in ex)
        assert (len(ex), sum(len(e.source) for e in ex), hashlib.sha256(text.encode()).hexdigest()[:16]) == (
            n,
            words,
            digest,
        )


def test_readers_plain_grail_and_auto(tmp_path):
    from structseq.data.readers import read_file

    plain = tmp_path / "a.stagged"
    plain.write_text("Pierre|N/N Vinken|N ,|, will|(S[dcl]\\NP)/(S[b]\\NP)\nHe|NP|NP ran|VBD|S[dcl]\\NP\n")
    ex = read_file(plain)
    assert ex[0].target == ("N/N", "N", ",", "(S[dcl]\\NP)/(S[b]\\NP)") and ex[1].meta["pos"] == "NP VBD"
    grail = tmp_path / "g.txt"
    grail.write_text("# start annodis\nLe|DET|dr(0,np,n)|O chat|NC|n dort|V|dl(0,np,s)|O\n# a comment\n")
    (g,) = read_supertag_file(grail)
    assert g.source == ("Le", "chat", "dort") and g.target[2] == "dl(0,np,s)" and g.meta["section"] == "annodis"
    auto = tmp_path / "wsj.auto"
    auto.write_text(
        "ID=wsj_0001.1 PARSER=GOLD NUMPARSE=1\n(<T S[dcl] 0 2> (<L NP NNP NNP Pierre NP_1>) "
        "(<T S[dcl]\\NP 0 2> (<L (S[dcl]\\NP)/NP VBZ VBZ likes (S[dcl]\\NP_2)/NP_3>) "
        "(<L NP NNS NNS cats NP>) ) )\n"
    )
    (a,) = read_auto(auto)
    assert a.source == ("Pierre", "likes", "cats") and a.target == ("NP", "(S[dcl]\\NP)/NP", "NP")
    assert read_file(auto) == [a]


# ---------------------------------------------------------------- the model


def _tiny(arch="supertag-tree", train=None, init_seed=0, **model):
    train = train or splits(60, 10, seed=3)["train"]
    m = {
        "arch": arch,
        "d_model": 32,
        "dropout": 0.0,
        "encoder": {"hidden": 16, "word_dim": 16, "char_dim": 8, "char_filters": 8, "layers": 1, "word_dropout": 0.0},
    }
    if arch == "supertag-tree":
        m.update({"node_dim": 16, "node_heads": 2, "state_heads": 2, "edge_dropout": 0.0})
    m.update(model)
    cfg = config_from_dict({"task": "supertag", "model": m, "decode": {"batch_size": 8}})
    task = get_task(cfg)
    vocabs = task.build_vocabs(train)
    torch.manual_seed(init_seed)
    model = build_model(cfg.model, vocabs, train).eval()
    return task, vocabs, model, train


def test_path_embeddings_are_products_of_orthogonal_matrices():
    _, _, model, _ = _tiny()
    paths = model.paths
    w = paths.matrices().detach()
    eye = torch.eye(w.shape[1])
    assert torch.allclose(w[0] @ w[0].T, eye, atol=1e-5) and torch.allclose(w[1] @ w[1].T, eye, atol=1e-5)
    table = paths.table(5).detach()
    for k in (1, 2, 3, 6, 13, 45):
        bits = bin(k)[3:]  # the path from the root: first branch first
        expect = paths.rho0.clone()
        for b in reversed(bits):
            expect = w[int(b)] @ expect
        assert torch.allclose(table[k], expect, atol=1e-4)
        assert torch.allclose(table[k].norm(), paths.rho0.norm(), atol=1e-3)  # norms preserved
    assert (torch.cdist(table[1:], table[1:]) + torch.eye(63) * 1e3).min() > 1e-2  # positions differ


def _states(model, task, vocabs, examples):
    b = task.batch(examples, vocabs)
    with torch.no_grad():
        return model.encoder(b)


def _trees(out, W):
    trees = {}
    for w, p, s in zip(out["word"].tolist(), out["pos"].tolist(), out["sym"].tolist()):
        trees.setdefault(w // W, {}).setdefault(w % W, {})[p] = s
    return trees


def test_depth_batched_decoding_equals_each_sentence_and_word_alone():
    task, vocabs, model, train = _tiny()
    ex = train[:6]
    h, mask = _states(model, task, vocabs, ex)
    W = h.shape[1]
    batched = _trees(greedy_trees(model, h, mask), W)
    for b in range(len(ex)):  # each sentence alone (state feedback couples its words)
        n = int(mask[b].sum())
        alone = _trees(greedy_trees(model, h[b : b + 1, :n], mask[b : b + 1, :n]), n)
        assert alone[0] == batched[b]
    _, _, nosf, _ = _tiny(state_feedback=False)
    h, mask = _states(nosf, task, vocabs, ex)
    batched = _trees(greedy_trees(nosf, h, mask), W)
    for b in range(2):
        for w in range(int(mask[b].sum())):  # without state feedback: each word alone
            alone = _trees(greedy_trees(nosf, h[b : b + 1, w : w + 1], mask[b : b + 1, w : w + 1]), 1)
            assert alone[0][0] == batched[b][w]


def test_without_feedback_the_model_is_a_per_node_classifier():
    task, vocabs, model, train = _tiny(state_feedback=False, node_feedback=False)
    batch = task.batch(train[:4], vocabs)
    with torch.no_grad():
        lp = model(batch)
        h0, mask = model.encoder(batch)
        table = model.paths.table(8)
        h0 = h0.reshape(-1, h0.shape[-1])
        for i in range(0, lp.shape[0], 7):
            w, k = int(batch["node_word"][i]), int(batch["node_pos"][i])
            h = h0[w : w + 1][None]
            for _ in range(k.bit_length()):  # one step per depth, 0 .. depth(k)
                h = model.step(h, torch.ones(1, 1, dtype=torch.bool), None)
            alone = model.node_logits(h, torch.tensor([0]), table[k][None]).log_softmax(-1)[0]
            assert torch.allclose(alone, lp[i], atol=1e-5)
        # other words' gold symbols do not matter
        batch2 = task.batch(train[:4], vocabs)
        batch2["node_sym"] = batch2["node_sym"].flip(0)
        assert torch.allclose(model(batch2), lp, atol=1e-6)


def test_teacher_forced_loss_is_the_sum_of_per_depth_losses():
    task, vocabs, model, train = _tiny()
    batch = task.batch(train[:5], vocabs)
    with torch.no_grad():
        full = model(batch)
        counts = batch["depth_counts"].tolist()
        start = 0
        per_depth = []
        for t, n in enumerate(counts):  # a forward that stops at depth t: its last rows are depth t's
            lp = model(batch, max_depth=t)
            assert lp.shape[0] == start + n
            per_depth.append(-lp[start:].gather(1, batch["node_sym"][start : start + n, None]).sum())
            start += n
        _, nll, _ = task.loss(model, batch, 0.0)
    assert torch.allclose(nll, torch.stack(per_depth).sum(), rtol=1e-5)
    assert torch.allclose(nll, -full.gather(1, batch["node_sym"][:, None]).sum(), rtol=1e-5)


def test_beam_one_equals_greedy_and_kbest_trees_are_well_formed_and_sorted():
    task, vocabs, model, train = _tiny()
    ex = train[:8]
    greedy = task.predict(model, ex, vocabs, beam=1)
    h, mask = _states(model, task, vocabs, ex)
    b1 = kbest_trees(model, h, mask, 1)
    g = greedy_trees(model, h, mask)
    W = h.shape[1]
    gt = _trees(g, W)
    for b in range(len(ex)):
        for w in range(int(mask[b].sum())):
            nodes_b = {int(p): int(s) for p, s in zip(b1["pos"][b, w, 0], b1["sym"][b, w, 0]) if p > 0}
            assert nodes_b == gt[b][w]
            assert abs(float(b1["score"][b, w, 0]) - greedy[b].kbest[w][0][1]) < 1e-4  # same tree, same score
    k5 = task.predict(model, ex, vocabs, beam=5)
    for p, gp in zip(k5, greedy):
        for kb, best in zip(p.kbest, gp.best):
            scores = [s for _, s in kb]
            assert scores == sorted(scores, reverse=True) and len(set(c for c, _ in kb)) == len(kb)
            assert all(well_formed(parse_category(c)) for c, _ in kb)
            assert len(kb) >= 1


def test_classifier_predicts_only_training_categories():
    task, vocabs, model, train = _tiny("supertag-classifier")
    pred = task.predict(model, train[:4], vocabs, beam=3)
    seen = {canonical(c) for e in train for c in e.target}
    assert all(c in seen for p in pred for kb in p.kbest for c, _ in kb)
    assert all(len(kb) == 3 for p in pred for kb in p.kbest)


# ---------------------------------------------------------------- metrics and output formats


def test_scores_bins_oracle_and_multitag():
    counts = Counter({"n": 150, "np": 20, "s": 3})
    gold = [["n", "np", "s", "x"]]
    kbest = [[[("n", -0.1)], [("s", -0.5), ("np", -0.9)], [("s", -0.01)], [("np", -2.0), ("x", -3.0)]]]
    r = supertag_scores(gold, kbest, counts, betas=(1.0, 0.1), beam=2, repaired=[[False, True, False, False]])
    assert r["accuracy"]["score"] == 0.5 and r["sentence_accuracy"]["score"] == 0.0 and r["accuracy"]["n"] == 4
    assert r["accuracy_frequent"] == {"score": 1.0, "correct": 1, "n": 1, "signature": r["signature"]}
    assert r["accuracy_uncommon"]["correct"] == 0 and r["accuracy_rare"]["correct"] == 1
    assert r["accuracy_unseen"]["n"] == 1 and r["oracle_accuracy"]["score"] == 1.0
    assert r["ill_formed_repaired"] == 1 and r["signature"].startswith("supertag|")
    curve = {c["beta"]: c for c in r["multitag"]}
    assert curve[1.0]["tags_per_word"] == 1.0 and curve[1.0]["accuracy"] == 0.5
    assert curve[0.1]["accuracy"] == 1.0 and curve[0.1]["tags_per_word"] == 1.5  # within e^-1 > 0.1 kept
    assert multitag([("a", math.log(0.5)), ("b", math.log(0.04))], 0.1) == [("a", math.log(0.5))]


def test_multitag_output_format():
    task, vocabs, model, train = _tiny()
    task.options.beta = 0.01
    (p,) = task.predict(model, train[:1], vocabs, beam=3)
    line = task.format_prediction(p)
    for tok, w in zip(line.split(" "), train[0].source):
        parts = tok.split("|")
        assert parts[0] == w and len(parts) % 2 == 1
        probs = [float(x) for x in parts[2::2]]
        assert probs == sorted(probs, reverse=True) and all(0 < x <= 1 for x in probs)
    assert task.parse_input(line).source == train[0].source  # a tagged line is read back as its words


# ---------------------------------------------------------------- learning


@pytest.mark.learned
def test_learns_a_synthetic_ab_grammar_with_an_unseen_category(learned_seed, learned):
    """130 updates (batches of 32 of 600 sentences) on a synthetic AB grammar whose test split holds a category
    no training word has. Over init and batch-order seeds 1-5 (`STRUCTSEQ_LEARNED_SEEDS=1,2,3,4,5 pytest -m
    learned`, one CPU) word accuracy was 0.928-1.0 (asserted: > 0.85), and the unseen category was built right
    for 1.0, 1.0, 0.0, 0.81 and 0.08 of its 64 words: at this budget whether the tree decoder builds it is seed
    luck, so only its count in the data is asserted here (the demo's slow test checks the claim at the shipped
    budget)."""
    data = splits(600, 100, seed=0)
    assert not any(UNSEEN in e.target for e in data["train"])
    task, vocabs, model, train = _tiny(
        train=data["train"],
        init_seed=learned_seed - 1,  # seed 1: torch seed 0, as before
        d_model=64,
        node_dim=32,
        state_heads=4,
        node_heads=4,
        encoder={"hidden": 32, "word_dim": 32, "char_dim": 0, "layers": 1, "word_dropout": 0.0},
    )
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    enc = [task.encode(e, vocabs) for e in train]
    for step in range(130):
        idx = random.Random(step + 1000 * (learned_seed - 1)).sample(range(len(enc)), 32)
        loss, _, n = task.loss(model, task.collate([enc[i] for i in idx], idx), 0.0)
        opt.zero_grad()
        (loss / n).backward()
        opt.step()
    pred = task.predict(model, data["test"], vocabs, beam=1)
    r = supertag_scores(
        [list(e.target) for e in data["test"]], [p.kbest for p in pred], Counter(c for e in train for c in e.target)
    )
    unseen = canonical(UNSEEN)
    n_unseen = sum(c == unseen for e in data["test"] for c in e.target)
    right = sum(h == g == unseen for e, p in zip(data["test"], pred) for g, h in zip(e.target, p.best))
    learned("accuracy", r["accuracy"]["score"]), learned("unseen_right_fraction", right / n_unseen)
    assert r["accuracy"]["score"] > 0.85 and n_unseen > 20


def test_cli_api_train_evaluate_predict(tmp_path):
    from structseq.api import load_run, train

    data = splits(40, 10, seed=1)
    for name in ("train", "test"):
        (tmp_path / f"{name}.txt").write_text(
            "".join(" ".join(f"{w}|{c}" for w, c in zip(e.source, e.target)) + "\n" for e in data[name])
        )
    for arch in ("supertag-tree", "supertag-classifier"):
        cfg = {
            "task": "supertag",
            "data": {
                "dataset": "files",
                "train": str(tmp_path / "train.txt"),
                "valid": str(tmp_path / "test.txt"),
                "test": [str(tmp_path / "test.txt")],
            },
            "model": {"arch": arch, "d_model": 32, "encoder": {"hidden": 16, "word_dim": 16, "layers": 1}},
            "optim": {"batch_size": 8, "max_tokens": None, "lr": 1e-3, "schedule": "constant"},
            "train": {"max_steps": 6, "valid_every": 3, "valid_metric": "accuracy", "threads": 1},
        }
        out = tmp_path / arch
        train(config_from_dict(cfg), out, show_progress=False)
        run = load_run(out)
        m = run.evaluate(beam=2)
        assert {"accuracy", "accuracy_rare", "sentence_accuracy", "signature", "oracle_accuracy", "multitag"} <= set(m)
        assert m["accuracy"]["n"] == sum(len(e.source) for e in data["test"])
        lines = run.predict(["the dog sleeps", "the cat|NP/N runs|NP\\S"], beam=2)
        assert [len(x.split()) for x in lines] == [3, 3] and all("|" in x for x in lines)


def test_local_pretrained_encoder_with_subword_pooling(tmp_path):
    transformers = pytest.importorskip("transformers")
    words = sorted({w for e in splits(30, 5)["train"] for w in e.source})
    vocab = (
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        + sorted({w[:2] for w in words})
        + sorted({"##" + w[2:] for w in words if len(w) > 2})
    )
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tok = transformers.BertTokenizerFast(str(tmp_path / "vocab.txt"), do_lower_case=False)
    tok.save_pretrained(tmp_path / "enc")
    torch.manual_seed(0)
    bert = transformers.BertModel(
        transformers.BertConfig(
            vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32
        )
    )
    bert.save_pretrained(tmp_path / "enc")
    task, vocabs, model, train = _tiny(encoder={"pretrained": str(tmp_path / "enc"), "lr_scale": 0.25})
    batch = task.batch(train[:3], vocabs)
    assert batch["pieces"].shape[1] > batch["word_mask"].shape[1]  # words split into pieces
    groups = model.param_groups()
    assert [g["lr_scale"] for g in groups] == [1.0, 0.25]
    assert {id(p) for p in groups[1]["params"]} == {id(p) for p in model.encoder.model.parameters()}
    lp = model(batch)
    assert lp.shape[0] == batch["node_sym"].shape[0] and torch.isfinite(lp).all()
    pred = task.predict(model, train[:3], vocabs, beam=2)
    assert [len(p.kbest) for p in pred] == [len(e.source) for e in train[:3]]
