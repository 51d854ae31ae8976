"""CoGnition compound translation error rate: hand-made cases and agreement with human judgements."""

import json

import pytest

from structseq.errors import DataError
from structseq.metrics import CTER, read_compounds, read_human_eval, validate_against_human
from structseq.metrics.cter import ATOMS_FILE, LEXICON_FILE
from structseq.paths import data_root

ROOT = data_root()
needs_data = pytest.mark.skipif(
    not (ROOT / LEXICON_FILE).is_file(), reason="CoGnition data not found under the data root"
)


@pytest.fixture(scope="module")
def cter():
    if not (ROOT / LEXICON_FILE).is_file():
        pytest.skip("CoGnition data not found under the data root")
    return CTER.from_data_root(ROOT)


# -- hand-made cases on the released lexicon ------------------------------------------------


@needs_data
@pytest.mark.parametrize(
    "compound, hyp, correct",
    [
        ("the dog", "狗 在 跑", True),  # "the" is a "/" entry: nothing to find
        ("the dog", "猫 在 跑", False),  # missing noun
        ("the small dog", "一 只 小 狗", True),
        ("every dog", "每 只 狗", True),
        ("on the chair", "在 椅子 上", True),  # "on" is "/"
        ("without the chair", "在 椅子 上", False),  # "without" has translations, none present
        ("the dog he liked", "他 喜欢 的 狗", True),
        ("the dog at the store", "商店 里 的 狗", True),
        ("the building", "那 栋 房子", True),  # only in the later `building` line
        ("the building", "那 座 建筑", True),
        ("the small dog", "小@@ 狗", True),  # BPE markers and spaces are removed first
        ("liked the dog", "狗", True),  # `liked` has an empty alternative: always found
    ],
)
def test_hand_made_compounds(cter, compound, hyp, correct):
    assert cter.is_correct(compound, hyp) is correct


@needs_data
def test_missing_atoms_are_reported(cter):
    j = cter.judge("every small dog", "每 只 猫")
    assert not j.correct and j.missing == ("small", "dog") and j.order_failures == ()


@needs_data
@pytest.mark.parametrize(
    "compound, hyp, failures",
    [
        ("the small dog", "狗 很 小", ("ADJ<N",)),
        ("every dog", "狗 每 天", ("DET<N",)),
        ("every small dog", "狗 每 天 都 很 小", ("DET<N", "ADJ<N")),
        ("the dog he liked", "狗 , 他 喜欢 的", ("MOD<N",)),
        ("the dog on the floor", "狗 在 地上", ("MOD<N",)),
    ],
)
def test_order_check_failures(cter, compound, hyp, failures):
    j = cter.judge(compound, hyp)
    assert not j.correct and j.missing == () and j.order_failures == failures


@needs_data
def test_order_uses_first_modifier_and_last_noun(cter):
    # the noun also occurs after the adjective, so the last noun match follows the first ADJ match
    assert cter.is_correct("the small dog", "狗 说 小 狗")


@needs_data
def test_modifier_order_not_checked_with_a_verb(cter):
    assert cter.atoms("saw the dog he liked") == ["saw", "the", "dog", "mod0"]
    assert cter.is_correct("saw the dog he liked", "看见 狗 , 他 喜欢 的")
    assert not cter.is_correct("the dog he liked", "狗 , 他 喜欢 的")


@needs_data
def test_modifier_placeholders(cter):
    assert cter.atoms("the dog at the store") == ["the", "dog", "mod1"]
    assert cter.atoms("the dog on the floor") == ["the", "dog", "mod2"]
    assert cter.atoms("on the dog") == ["on", "the", "dog"]  # `on` alone is a preposition
    assert cter.judge("the dog on the floor", "狗").missing == ("mod2",)


@needs_data
def test_unknown_atom_is_an_error(cter):
    with pytest.raises(ValueError, match="'unicorn'"):
        cter.judge("the unicorn", "独角兽")


@needs_data
def test_score_instance_and_aggregate(cter):
    compounds = ["the dog"] * 10
    hyps = ["狗"] * 10
    hyps[3] = "猫"
    s = cter.score(compounds, hyps)
    assert s["instance"] == pytest.approx(0.1) and s["aggregate"] == pytest.approx(0.5) and s["n"] == 10
    assert s["signature"].startswith("cter|lexicon:") and "block:5" in s["signature"]
    with pytest.raises(ValueError, match="block size 5"):
        cter.score(compounds[:7], hyps[:7])


# -- loading --------------------------------------------------------------------------------


def write_data(root, lexicon_text, atoms=None):
    (root / LEXICON_FILE).parent.mkdir(parents=True)
    (root / LEXICON_FILE).write_text(lexicon_text, encoding="utf-8")
    atoms = atoms or {
        "P": [],
        "V": [],
        "DET": ["the"],
        "ADJ": [],
        "N": ["building"],
        "MOD": [],
        "modifier_placeholders": {},
    }
    (root / ATOMS_FILE).write_text(json.dumps(atoms), encoding="utf-8")


def test_later_lexicon_line_wins(tmp_path):
    write_data(tmp_path, "the\t/\nbuilding\t建筑\nbuilding\t楼/房子\n")
    c = CTER.from_data_root(tmp_path)
    assert c.lexicon["building"] == ("楼", "房子") and c.lexicon["the"] is None
    assert c.is_correct("the building", "房子") and not c.is_correct("the building", "建筑")


def test_missing_files_raise_data_error_naming_the_file(tmp_path):
    with pytest.raises(DataError, match="lexicon.tsv"):
        CTER.from_data_root(tmp_path)
    (tmp_path / LEXICON_FILE).parent.mkdir(parents=True)
    (tmp_path / LEXICON_FILE).write_text("the\t/\n", encoding="utf-8")
    with pytest.raises(DataError, match="atoms.json"):
        CTER.from_data_root(tmp_path)
    with pytest.raises(DataError, match="human_eval"):
        read_human_eval(tmp_path, "NP")
    with pytest.raises(DataError, match="NP.compound"):
        read_compounds(tmp_path, "NP")


def test_malformed_lexicon_line_names_the_line(tmp_path):
    write_data(tmp_path, "the\t/\nbuilding 建筑\n")
    with pytest.raises(DataError, match=r"lexicon.tsv:2:"):
        CTER.from_data_root(tmp_path)


def test_atom_without_lexicon_entry(tmp_path):
    write_data(tmp_path, "the\t/\n")
    with pytest.raises(DataError, match="building"):
        CTER.from_data_root(tmp_path)


# -- agreement with the paper's human judgements ----------------------------------------------


@needs_data
def test_agreement_with_human_judgement():
    v = validate_against_human(ROOT)
    overall = v["overall"]
    assert v["positive"] == "error" and overall["n"] == 10800
    # published for the authors' tool: precision 94.80%, recall 87.05% (error = positive class)
    assert overall["precision"] > 0.93 and overall["recall"] > 0.85
    assert abs(overall["precision"] - 0.9480) < 0.01 and abs(overall["recall"] - 0.8705) < 0.01
    assert overall["agreement"] > 0.94
    assert set(v["subsets"]) == {"NP", "VP", "PP"}
    assert all(s["n"] == 3600 and s["agreement"] > 0.9 for s in v["subsets"].values())
    mirrored = validate_against_human(ROOT, positive="correct")["overall"]
    assert (mirrored["tp"], mirrored["fp"]) == (overall["tn"], overall["fn"])
