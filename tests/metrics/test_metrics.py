"""Sequence metrics, BLEU variants and the combined report."""

import json
import warnings

import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st

from structseq.metrics import (
    Score,
    bleu,
    cognition_bleu,
    compute_all,
    exact_match,
    nltk_corpus_bleu,
    per_category,
    pool_references,
    pooled_bleu,
    token_accuracy,
)

nltk_bleu = pytest.importorskip("nltk.translate.bleu_score")


def reference_nltk(refs_per_hyp, hyps):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # NLTK warns on every zero n-gram count
        return nltk_bleu.corpus_bleu(refs_per_hyp, hyps)


def close(a, b):
    return abs(a - b) <= 1e-12 * max(1.0, abs(b))


# -- sequence metrics ------------------------------------------------------------------------


def test_exact_match_compares_tokens_and_signs():
    s = exact_match(["a b", "a  b ", "a c", ("a", "b")], ["a b", "a b", "a b", "a b"])
    assert s.score == 0.75 and s.n == 4 and s.details["correct"] == 3
    assert s.signature == "exact_match|tok:space"
    assert str(s) == "exact_match|tok:space = 0.7500" and float(s) == 0.75


def test_parallel_checks():
    with pytest.raises(ValueError, match="2 hypotheses but 1"):
        exact_match(["a", "b"], ["a"])
    with pytest.raises(ValueError, match="no hypotheses"):
        token_accuracy([], [])


@pytest.mark.parametrize(
    "hyp, ref, expected",
    [
        ("a b c", "a b c", 1.0),
        ("a b d", "a b c", 2 / 3),
        ("a b", "a b c", 2 / 3),  # a missing token is an error
        ("a b c d", "a b c", 3 / 4),  # so is an extra one
        ("x a b c", "a b c", 0.0),  # no re-alignment after an insertion
        ("", "a b", 0.0),
        ("", "", 1.0),
    ],
)
def test_token_accuracy_definition(hyp, ref, expected):
    assert token_accuracy([hyp], [ref]).score == pytest.approx(expected)


def test_token_accuracy_is_micro_averaged():
    s = token_accuracy(["a b c d", "x"], ["a b c d", "y z"])
    assert s.score == pytest.approx(4 / 6) and s.details == {"correct": 4, "positions": 6}
    assert s.signature.startswith("token_accuracy|tok:space")


def test_per_category_sorted_and_separate():
    hyps = ["a", "b", "c", "d", "e"]
    refs = ["a", "x", "c", "d", "y"]
    cats = ["pp", "obj", "pp", "obj", "obj"]
    out = per_category(exact_match, hyps, refs, cats)
    assert list(out) == ["obj", "pp"]
    assert out == {"obj": pytest.approx(1 / 3), "pp": 1.0}
    assert per_category(lambda h, r: len(h), hyps, refs, cats) == {"obj": 3.0, "pp": 2.0}
    with pytest.raises(ValueError, match="categories"):
        per_category(exact_match, hyps, refs, cats[:-1])


# -- sacrebleu BLEU --------------------------------------------------------------------------

HYPS = ["the cat sat on the mat .", "a dog barked loudly", "hello there world"]
REFS = ["the cat sat on a mat .", "the dog barked loudly", "hello world"]


@pytest.mark.parametrize("tok", ["13a", "none", "zh", "char"])
def test_bleu_is_sacrebleu(tok):
    s = bleu(HYPS, REFS, tokenize=tok)
    expected = sacrebleu.corpus_bleu(HYPS, [REFS], tokenize=tok)
    assert s.score == expected.score
    version = sacrebleu.__version__
    assert s.signature == f"bleu|nrefs:1|case:mixed|eff:no|tok:{tok}|smooth:exp|version:{version}"
    assert s.details["sys_len"] == expected.sys_len and s.details["precisions"] == expected.precisions


def test_bleu_variable_number_of_references_and_kwargs():
    refs = [[REFS[0], "the cat is on the mat ."], REFS[1], [REFS[2]]]
    s = bleu(HYPS, refs, lowercase=True)
    streams = [REFS, ["the cat is on the mat .", None, None]]
    assert s.score == sacrebleu.corpus_bleu(HYPS, streams, lowercase=True).score
    assert "nrefs:var" in s.signature and "case:lc" in s.signature
    with pytest.raises(ValueError, match="no reference"):
        bleu(["a"], [[]])


def test_cognition_bleu_ignores_segmentation():
    hyps = ["狗 把 他 自己 的 车 给 了 他 。", "每天 这 只 狗 都 会 玩"]
    refs = ["狗把他自己的车给了他。", "每天，这只狗都会在公园里玩耍。"]
    s = cognition_bleu(hyps, refs)
    resegmented = cognition_bleu([h.replace(" ", "") for h in hyps], [" ".join(r) for r in refs])
    assert s.score == resegmented.score
    chars = lambda x: " ".join(x.replace(" ", ""))  # noqa: E731
    assert s.score == sacrebleu.corpus_bleu([chars(h) for h in hyps], [[chars(r) for r in refs]]).score
    assert s.signature.startswith("cognition_bleu|pre:nospace+char|nrefs:1|case:mixed|eff:no|tok:13a")


# -- NLTK corpus BLEU ------------------------------------------------------------------------


def test_nltk_bleu_docstring_example():
    hyp1 = "It is a guide to action which ensures that the military always obeys the commands of the party"
    ref1a = "It is a guide to action that ensures that the military will forever heed Party commands"
    ref1b = (
        "It is the guiding principle which guarantees the military forces always being under the command of the Party"
    )
    ref1c = "It is the practical guide for the army always to heed the directions of the party"
    hyp2 = "he read the book because he was interested in world history"
    ref2a = "he was interested in world history because he read the book"
    s = nltk_corpus_bleu([hyp1, hyp2], [[ref1a, ref1b, ref1c], [ref2a]])
    assert 0.5920 <= s.score < 0.5921  # NLTK's doctest: 0.5920...
    refs = [[r.split() for r in (ref1a, ref1b, ref1c)], [ref2a.split()]]
    assert close(s.score, reference_nltk(refs, [hyp1.split(), hyp2.split()]))
    assert s.signature == ("nltk_bleu|impl:corpus_bleu|ngram:4|weights:uniform|smooth:none|bp:closest|tok:whitespace")


def test_nltk_bleu_zero_and_partial_matches():
    assert nltk_corpus_bleu(["a b c"], [["x y z"]]).score == 0.0
    assert reference_nltk([[["x", "y", "z"]]], [["a", "b", "c"]]) == 0
    # unigram matches but no 4-gram match: NLTK's method0 gives a tiny positive value, not 0
    hyps, refs = ["a b c d"], [["a b x d"]]
    mine = nltk_corpus_bleu(hyps, refs).score
    assert 0 < mine < 1e-50 and close(mine, reference_nltk([[r.split() for r in refs[0]]], [hyps[0].split()]))
    assert nltk_corpus_bleu([""], [["a"]]).score == 0.0


def test_nltk_bleu_space_tokenisation_keeps_empty_tokens():
    hyp, ref = "他 ,   走 了 吗", "他 ,   走 了 吧"
    mine = nltk_corpus_bleu([hyp], [[ref]], tokenize="space").score
    assert close(mine, reference_nltk([[ref.split(" ")]], [hyp.split(" ")]))
    assert mine != nltk_corpus_bleu([hyp], [[ref]]).score
    with pytest.raises(ValueError, match="tokenize"):
        nltk_corpus_bleu([hyp], [[ref]], tokenize="13a")


sentence = st.lists(st.sampled_from("abcde"), min_size=0, max_size=9)
corpus = st.lists(st.tuples(sentence, st.lists(sentence, min_size=1, max_size=3)), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(corpus)
def test_nltk_bleu_equals_nltk(pairs):
    hyps = [h for h, _ in pairs]
    refs = [rs for _, rs in pairs]
    mine = nltk_corpus_bleu(hyps, refs).score
    assert close(mine, reference_nltk(refs, hyps))
    # strings give the same result as tokens
    as_text = nltk_corpus_bleu([" ".join(h) for h in hyps], [[" ".join(r) for r in rs] for rs in refs])
    assert as_text.score == mine


def test_pool_references():
    sources = ["i am tom .", "it is fine", "i  am tom ."]
    refs = ["我 是 汤姆 。", "没事", "我 叫 汤姆 。"]
    pooled = pool_references(sources, refs, extra_pairs=[("it is fine", "很 好"), ("other", "x")])
    assert pooled == [[refs[0], refs[2]], [refs[1], "很 好"], [refs[0], refs[2]]]
    s = nltk_corpus_bleu(
        ["我 叫 汤姆 。"], pool_references(["i am tom ."], ["我 是 汤姆 。"], [("i am tom .", "我 叫 汤姆 。")])
    )
    assert s.score == 1.0


def test_pooled_bleu_full_and_one_shot():
    """The paper's Tatoeba BLEU: a hypothesis matching another split's reference of the same source scores 1,
    and 1-shot keeps exactly the items with a token seen once in train."""
    sources = ["i am tom .", "tom is here ."]
    refs = ["我 是 汤姆 。", "汤姆 在 这里 。"]
    hyps = ["我 叫 汤姆 。", "汤姆 在 那里 。"]
    extra = [("i am tom .", "我 叫 汤姆 。")]
    train = ["i am tom .", "i am here .", "here is tom ."]  # `is` once: item 1 is 1-shot; item 0 has none
    out = pooled_bleu(sources, hyps, refs, extra, train)
    assert out["1-shot"]["n"] == 1 and out["full"]["n"] == 2
    assert out["1-shot"]["score"] == nltk_corpus_bleu([hyps[1]], [[refs[1]]]).score < 1.0
    assert out["full"]["score"] == nltk_corpus_bleu(hyps, [[refs[0], extra[0][1]], [refs[1]]]).score
    assert "refs:pooled-by-source" in out["full"]["signature"]
    assert pooled_bleu(sources, hyps, refs, (), ["i i"])["1-shot"]["score"] is None


# -- report ----------------------------------------------------------------------------------


def test_compute_all_is_json_and_consistent():
    hyps = ["a b c", "a b", "x y z w", "a b c d e"]
    refs = ["a b c", "a b c", "x y z w", "a b c d f"]
    cats = ["in_distribution", "pp_recursion", "pp_recursion", "in_distribution"]
    rep = compute_all(hyps, refs, categories=cats, bleu_tokenize="none")
    json.dumps(rep)
    assert rep["n"] == 4
    assert rep["exact_match"]["score"] == 0.5
    assert rep["token_accuracy"]["score"] == token_accuracy(hyps, refs).score
    assert rep["bleu"]["score"] == sacrebleu.corpus_bleu(hyps, [refs], tokenize="none").score
    assert "tok:none" in rep["bleu"]["signature"]
    expected = reference_nltk([[r.split()] for r in refs], [h.split() for h in hyps])
    assert close(rep["nltk_bleu"]["score"], expected)
    assert rep["per_category"]["exact_match"] == {"in_distribution": 0.5, "pp_recursion": 0.5}
    assert rep["per_category"]["n"] == {"in_distribution": 2, "pp_recursion": 2}
    assert "per_category" not in compute_all(hyps, refs)


def test_score_to_dict():
    s = Score("x", 0.5, "x|a:b", 2, {"k": 1})
    assert s.to_dict() == {"score": 0.5, "signature": "x|a:b", "n": 2, "k": 1}


def test_tokenized_output_silences_sacrebleus_detokenize_warning_only(capsys, caplog):
    """SCAN/COGS outputs are tokens by construction: no 'forgot to detokenize' noise, same score and signature;
    without `tokenized` (detokenised text, e.g. after subwords) sacrebleu's check stays."""
    hyps, refs = ["walk left ."] * 101, ["walk left ."] * 101
    quiet = compute_all(hyps, refs, tokenized=True)
    said = capsys.readouterr().err + caplog.text
    assert "detokenize" not in said
    loud = compute_all(hyps, refs)
    assert "detokenize" in capsys.readouterr().err + caplog.text
    assert quiet["bleu"] == loud["bleu"]
