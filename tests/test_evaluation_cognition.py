"""CoGnition evaluation end to end: `evaluate --split cognition:cg-test` reports character BLEU and the
compound translation error rate (instance and aggregate), also for a model trained on other data.

Decoding is replaced by the references (or a corrupted copy of them), so the expected numbers are known
exactly; the model itself is tiny and untrained.
"""

import json

import pytest
from typer.testing import CliRunner

from structseq import api
from structseq.config import config_from_dict
from structseq.data.registry import dataset_split, load_dataset
from structseq.data.vocab import Vocab
from structseq.metrics import CTER, compute_all
from structseq.models import build_model
from structseq.tasks import get_task
from tests.fixtures.tiny import tiny_transformer

CG_TEST = "cognition:cg-test"
# The human references of cg-test fail the (lexicon-based) CTER check on 283 of 10800 lines (a translation
# outside the lexicon, e.g. 服务生 for "waiter"), in 212 of the 2160 blocks of 5; computed once with
# `CTER.from_data_root()`, whose agreement with the human judgements is tested in tests/metrics/test_cter.py.
REF_WRONG_LINES, REF_WRONG_BLOCKS = 283, 212


@pytest.fixture(scope="module")
def cg_test(shared_data):
    if not (shared_data / "cognition" / "cg-test" / "cg-test.compound").is_file():
        pytest.skip(f"CoGnition cg-test not found under {shared_data}")
    return load_dataset("cognition", "cg-test", shared_data)


@pytest.fixture(scope="module")
def cter(cg_test, shared_data):
    return CTER.from_data_root(shared_data)


def tiny_run(tmp_path, data: dict) -> api.Run:
    """A Run of an untrained 1+1-layer Transformer (decoding is monkeypatched in the tests)."""
    cfg = config_from_dict(
        {
            "data": data,
            "model": tiny_transformer(ffn_dim=16, dropout=None),
        }
    )
    vocab = Vocab.build([["a", "b"]])
    vocabs = {"src": vocab, "tgt": vocab}
    return api.Run(tmp_path, cfg, build_model(cfg.model, vocabs), vocabs, "last", get_task(cfg))


def decode_as(monkeypatch, hyps_of):
    """Make every Run decode `hyps_of(examples)` (token lists) instead of running the model."""
    monkeypatch.setattr(api.Run, "decode_examples", lambda self, examples, **kw: hyps_of(examples))


def drop_noun(cter: CTER, compound: str, text: str) -> str:
    """`text` without any translation of the compound's noun: CTER must count it wrong."""
    (noun,) = [a for a in cter.atoms(compound) if cter.category_of.get(a) == "N"]
    for t in cter.lexicon[noun]:
        text = text.replace(t, "")
    return text


def test_dataset_split_spec(shared_data):
    assert dataset_split("cognition:cg-test") == ("cognition", "cg-test")
    assert dataset_split("colors:test") == ("colors", "test")
    assert dataset_split("cg-test") is None and dataset_split("nosuch:test") is None
    assert load_dataset("colors:test") == load_dataset("colors", "test")


def test_references_give_bleu_100_and_the_reference_cter(tmp_path, monkeypatch, cg_test, shared_data):
    # a model trained on other data (dataset: files) whose config names cognition's cg-test as its test split
    run = tiny_run(
        tmp_path,
        {
            "dataset": "files",
            "train": "data/cognition/train.en,data/cognition/train.zh",
            "valid": "cognition:valid",
            "test": [CG_TEST],
        },
    )
    decode_as(monkeypatch, lambda examples: [list(e.target) for e in examples])
    m = run.evaluate(data_root=shared_data)  # default: the config's first test split
    assert (m["dataset"], m["split"], m["n"]) == ("cognition", "cg-test", 10800)
    assert m["exact_match"]["score"] == 1.0
    assert m["cognition_bleu"]["score"] == pytest.approx(100.0)
    assert m["cognition_bleu"]["signature"].startswith("cognition_bleu|pre:nospace+char|")
    assert m["cter"]["instance"] == pytest.approx(REF_WRONG_LINES / 10800)
    assert m["cter"]["aggregate"] == pytest.approx(REF_WRONG_BLOCKS / 2160)
    assert m["cter"]["n"] == 10800 and m["cter"]["signature"].startswith("cter|")
    assert "per_category" not in m  # compounds are not reported as 2160 categories
    saved = json.loads((tmp_path / "predictions" / "cognition-cg-test.metrics.json").read_text())
    assert saved["cter"] == m["cter"]


def test_references_on_the_blocks_they_pass_give_cter_zero(cg_test, cter):
    ok = [cter.is_correct(e.meta["compound"], e.target_text) for e in cg_test]
    keep = [i for b in range(0, len(ok), 5) if all(ok[b : b + 5]) for i in range(b, b + 5)]
    assert len(keep) == 5 * (2160 - REF_WRONG_BLOCKS)
    refs = [cg_test[i].target_text for i in keep]
    m = compute_all(refs, refs, cognition=True, compounds=[cg_test[i].meta["compound"] for i in keep], cter=cter)
    assert (m["cter"]["instance"], m["cter"]["aggregate"]) == (0.0, 0.0)
    assert m["cognition_bleu"]["score"] == pytest.approx(100.0)


def test_a_hypothesis_without_its_compound_is_an_instance_error(tmp_path, monkeypatch, cg_test, cter, shared_data):
    assert all(cter.is_correct(e.meta["compound"], e.target_text) for e in cg_test[:5])  # block 1 passes as is

    def corrupt(examples):
        hyps = [list(e.target) for e in examples]
        hyps[0] = drop_noun(cter, examples[0].meta["compound"], examples[0].target_text).split()  # "the dog": no 狗/犬
        hyps[7] = ["我们", "很", "担心", "。"]  # another block: nothing of its compound
        return hyps

    decode_as(monkeypatch, corrupt)
    run = tiny_run(tmp_path, {"dataset": "cognition", "valid": "valid", "test": ["cg-test"]})
    m = run.evaluate("cg-test", data_root=shared_data)
    assert cter.judge(cg_test[0].meta["compound"], " ".join(corrupt(cg_test)[0])).missing == ("dog",)
    wrong_lines = REF_WRONG_LINES + 2 - (not cter.is_correct(cg_test[7].meta["compound"], cg_test[7].target_text))
    wrong_blocks = REF_WRONG_BLOCKS + 1 + all(cter.is_correct(e.meta["compound"], e.target_text) for e in cg_test[5:10])
    assert m["cter"]["instance"] == pytest.approx(wrong_lines / 10800)
    assert m["cter"]["aggregate"] == pytest.approx(wrong_blocks / 2160)
    assert m["cognition_bleu"]["score"] < 100.0 and m["exact_match"]["score"] == pytest.approx(10798 / 10800)


def test_cli_evaluate_on_another_datasets_split(tmp_path, monkeypatch, cg_test, shared_data):
    """A run trained on Colors, evaluated with `--split cognition:cg-test` (the CLI's NAME:SPLIT form)."""
    import structseq.cli as cli

    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "data: {dataset: colors, valid: null}\n"
        f"model: {json.dumps(tiny_transformer(ffn_dim=16, dropout=None))}\n"
        "optim: {max_tokens: 200, schedule: constant}\ntrain: {max_steps: 1, valid_every: 1, threads: 1}\n"
    )
    api.train(cfg, tmp_path / "run", show_progress=False)
    decode_as(monkeypatch, lambda examples: [list(e.target) for e in examples])
    r = CliRunner().invoke(
        cli.app, ["evaluate", str(tmp_path / "run"), "--split", CG_TEST, "--json", "--data-root", str(shared_data)]
    )
    assert r.exit_code == 0, r.output
    m = json.loads(r.stdout)
    assert (m["dataset"], m["split"]) == ("cognition", "cg-test") and m["bleu"]["signature"].count("tok:zh")
    assert m["cter"]["instance"] == pytest.approx(REF_WRONG_LINES / 10800)
    r = CliRunner().invoke(
        cli.app, ["evaluate", str(tmp_path / "run"), "--split", CG_TEST, "--data-root", str(shared_data)]
    )
    assert r.exit_code == 0 and "cter_instance" in r.stdout and "cognition_bleu" in r.stdout
    # other datasets get neither metric; their own splits work as before
    m = json.loads(CliRunner().invoke(cli.app, ["evaluate", str(tmp_path / "run"), "--json"]).stdout)
    assert (m["dataset"], m["split"]) == ("colors", "test") and "cter" not in m and "cognition_bleu" not in m
