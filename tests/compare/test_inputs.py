"""What `compare` promises: both sides must hold the same examples (equal lengths, the same sources and
references in order: errors name the example), a malformed predictions row names its file and line, each side
is ordered by seed whatever order it was given in (a seed given twice is refused), swapping the sides negates
every delta, the pooled BLEU output is the one most seeds agree on (ties: the lowest seed's), and BLEU
tokenizers stated differently by the evaluations are refused."""

import json

import pytest

from structseq.compare import _majority, check_same_examples, compare, load_system, read_predictions
from structseq.errors import StructseqError

REFS = ["a b", "c d", "e f", "g h", "i j", "k l"]


def write(folder, name, hyps, seed=None, refs=REFS, sources=None):
    sources = sources or [f"s{i}" for i in range(len(refs))]
    path = folder / f"{name}.tsv"
    rows = ["source\treference\thypothesis"] + [f"{s}\t{r}\t{h}" for s, r, h in zip(sources, refs, hyps)]
    path.write_text("\n".join(rows) + "\n")
    if seed is not None:
        report = {"seed": seed, "bleu": {"score": 1.0, "signature": "nrefs:1|tok:13a"}}
        (folder / f"{name}.metrics.json").write_text(json.dumps(report))
    return path


def test_both_sides_hold_the_same_examples(tmp_path):
    a = read_predictions(write(tmp_path, "a", REFS), "A")
    short = read_predictions(write(tmp_path, "b", REFS[:5], refs=REFS[:5]), "B")
    with pytest.raises(StructseqError, match="has 6 examples but B: .*b.tsv has 5"):
        check_same_examples([a, short])
    with pytest.raises(StructseqError, match="has 6 examples but"):
        compare([a], [short], resamples=20)
    other = read_predictions(write(tmp_path, "c", REFS, refs=[*REFS[:3], "x", *REFS[4:]]), "B")
    with pytest.raises(StructseqError, match=r"differ at example 4 \(reference 'g h' vs 'x'\)"):
        check_same_examples([a, other])
    src = read_predictions(write(tmp_path, "d", REFS, sources=["s0", "s1", "zz", "s3", "s4", "s5"]), "B")
    with pytest.raises(StructseqError, match=r"differ at example 3 \(source 's2' vs 'zz'\)"):
        check_same_examples([a, src])


def test_a_malformed_row_names_its_file_and_line(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_text("source\treference\thypothesis\nx\ty\tz\nx\ty\n")
    with pytest.raises(StructseqError, match=r"p.tsv:3: 2 columns but the header names 3"):
        read_predictions(path, "A")
    path.write_text("source\treference\thypothesis\nx\ty\tz\textra\n")
    with pytest.raises(StructseqError, match=r"p.tsv:2: 4 columns"):
        read_predictions(path, "A")
    path.write_text("source\thypothesis\nx\ty\n")
    with pytest.raises(StructseqError, match="no column reference"):
        read_predictions(path, "A")


def _hyps(wrong):
    return [("x y" if i in wrong else r) for i, r in enumerate(REFS)]


def test_a_side_is_ordered_by_seed_whatever_the_order_given(tmp_path):
    paths = {s: write(tmp_path, f"a{s}", _hyps(range(s)), seed=s) for s in (3, 1, 2)}
    given = load_system(",".join(str(paths[s]) for s in (3, 1, 2)), "A")
    assert [o.seed for o in given] == [1, 2, 3]
    b = [read_predictions(write(tmp_path, f"b{s}", _hyps([5]), seed=s), "B") for s in (1, 2, 3)]
    one = compare(given, b, resamples=30)
    two = compare(load_system(",".join(str(paths[s]) for s in (1, 2, 3)), "A"), b, resamples=30)
    assert one["metrics"] == two["metrics"] and one["test"]["pairs"] == [[1, 1], [2, 2], [3, 3]]
    with pytest.raises(StructseqError, match="seed 2 appears twice"):
        load_system(f"{paths[2]},{paths[2]}", "A")


def test_swapping_the_sides_negates_every_delta(tmp_path):
    a = [read_predictions(write(tmp_path, f"a{s}", _hyps([s]), seed=s), "A") for s in (0, 1)]
    b = [read_predictions(write(tmp_path, f"b{s}", _hyps([0, 1, 2, s + 3]), seed=s), "B") for s in (0, 1)]
    ab, ba = compare(a, b, resamples=30), compare(b, a, resamples=30)
    for x, y in zip(ab["metrics"], ba["metrics"]):
        assert x["name"] == y["name"] and x["delta"] == pytest.approx(-y["delta"])
        assert x["A"]["values"] == y["B"]["values"]
    em = next(m for m in ab["metrics"] if m["name"] == "exact_match")
    assert em["delta"] == pytest.approx(5 / 6 - 2 / 6) and em["A"]["values"] == [5 / 6, 5 / 6]


def test_the_pooled_output_is_the_majority_and_ties_go_to_the_lowest_seed(tmp_path):
    outs = [
        read_predictions(write(tmp_path, f"m{s}", hyps, seed=s, refs=REFS[:3]), "A")
        for s, hyps in enumerate((["p", "q", "r"], ["p", "z", "y"], ["w", "z", "x"]))
    ]
    assert _majority(outs) == ["p", "z", "r"]


def test_bleu_tokenizers_stated_differently_are_refused(tmp_path):
    a = read_predictions(write(tmp_path, "a", REFS, seed=1), "A")
    b = read_predictions(write(tmp_path, "b", REFS, seed=2), "B")
    b.report["bleu"]["signature"] = "nrefs:1|tok:intl"
    with pytest.raises(StructseqError, match=r"different tokenizers \(13a, intl\)"):
        compare([a], [b], resamples=20)
    assert compare([a], [b], resamples=20, bleu_tokenize="intl")["test"]["bleu_tokenize"] == "intl"
