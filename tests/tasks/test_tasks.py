"""The task seam: what the loop, `evaluate` and `predict` delegate to the task, and the defects it fixed."""

import os
import subprocess
import sys

import pytest
import torch

from structseq import api
from structseq.config import config_from_dict
from structseq.data.example import Example
from structseq.data.registry import datasets
from structseq.data.vocab import Vocab
from structseq.decode import search
from structseq.models import build_model
from structseq.registry import TASKS
from structseq.tasks import get_task
from tests.fixtures.tiny import tiny_transformer

TINY = tiny_transformer(ffn_dim=16)


def test_validation_exact_match_compares_strings_like_evaluate(monkeypatch):
    """An out-of-vocabulary reference word is <unk> as an id: a model that outputs <unk> must not count as right."""
    cfg = config_from_dict({"model": TINY, "train": {"valid_metric": "exact_match"}})
    task = get_task(cfg)
    vocabs = task.build_vocabs([Example(("a",), ("x",))])
    model = build_model(cfg.model, vocabs)
    valid = [Example(("a",), ("zorp",))]  # "zorp" is not in the target vocabulary
    unk = search.Hypotheses([[Vocab.unk]], [0.0])
    from structseq.decode.strategies.builtin import Greedy

    monkeypatch.setattr(Greedy, "search", lambda *a, **k: unk)  # what every search strategy of beam 1 returns
    assert task.validate(model, valid, vocabs)["valid_exact_match"] == 0.0
    assert (
        task.evaluate(valid, task.predict(model, valid, vocabs), dataset="files", split="x")["exact_match"]["score"]
        == 0.0
    )


@pytest.mark.parametrize("valid_metric", ["exact_match", "bleu", "token_accuracy"])
def test_validation_values_are_the_registered_metrics(monkeypatch, valid_metric):
    """Validation computes its metrics through the registry (issue 46 item 4): each `valid_<name>` equals the
    registered metric computed apart on the same greedy outputs, and exact match equals a plain count."""
    from structseq.metrics.report import compute_metric

    cfg = config_from_dict(
        {"model": TINY, "task": {"metrics": ["token_accuracy"]}, "train": {"valid_metric": valid_metric}}
    )
    task = get_task(cfg)
    valid = [Example(("a",), tuple(t.split())) for t in ("x y z", "x y", "y z x", "z", "x x y y")]
    vocabs = task.build_vocabs(valid)
    model = build_model(cfg.model, vocabs)
    hyps = [["x", "y", "z"], ["x"], ["y", "z", "x"], ["<unk>"], ["x", "x", "y"]]
    monkeypatch.setattr(type(task), "predict", lambda self, m, ex, v, **k: hyps[: len(ex)])
    out = task.validate(model, valid, vocabs)
    assert out["valid_exact_match"] == sum(tuple(h) == e.target for h, e in zip(hyps, valid)) / len(valid) == 0.4
    inputs = task.metric_inputs(valid, hyps, dataset="files", split="valid")
    for name in {"exact_match", valid_metric}:
        assert out[f"valid_{name}"] == compute_metric(name, inputs)["score"]
    assert set(out) == {"valid_loss", "valid_exact_match", f"valid_{valid_metric}"}
    assert task.registered_validation([], [], ("exact_match", "bleu")) == {"valid_exact_match": 0.0, "valid_bleu": 0.0}
    assert task.registered_validation([], [], "exact_match") == {"valid_exact_match": 0.0}  # a name, not letters


def test_bleu_tokenizer_is_declared_by_the_dataset_or_the_config():
    assert datasets()["tatoeba-en-zh"].bleu_tokenize == "zh" and datasets()["cognition"].bleu_tokenize == "zh"
    assert datasets()["cogs"].bleu_tokenize == "13a"
    refs = [Example(("我", "们"), ("我们",))]
    for data, tok in (
        ({"dataset": "files"}, "13a"),
        ({"dataset": "files", "bleu_tokenize": "zh"}, "zh"),
        ({"dataset": "zh-en-news"}, "13a"),
    ):  # no guess from a name
        task = get_task(config_from_dict({"data": data}))
        m = task.evaluate(refs, [["我们"]], dataset=data["dataset"], split="test")
        assert f"tok:{tok}" in m["bleu"]["signature"]


def test_every_task_is_registered_with_its_options():
    from structseq.registry import ARCHS

    for name, cls in TASKS.items():
        assert cls.name == name
        arch = next(a for a, entry in ARCHS.items() if name in entry.tasks)
        assert config_from_dict({"task": name, "model": arch}).task.type == name


def test_architecture_must_serve_the_task():
    """One rule (`Arch.check_serves`): the config loader applies it, and build_model(task=) for a hand-built one."""
    from structseq.errors import ConfigError

    message = "'model.arch': 'transformer' does not serve task 'supertag'.*supertag-tree"
    with pytest.raises(ConfigError, match=message):
        config_from_dict({"task": "supertag", "model": TINY})
    vocabs = {"src": Vocab.build([["a"]]), "tgt": Vocab.build([["a"]])}
    with pytest.raises(ConfigError, match=message):
        build_model(config_from_dict({"model": TINY}).model, vocabs, task="supertag")


def _colors_config(**train):
    return {
        "data": {"dataset": "colors", "valid": "test", "test": ["test"]},
        "model": TINY,
        "optim": {
            "lr": 3e-3,
            "schedule": "constant",
            "warmup": 0,
            "max_tokens": None,
            "batch_size": 6,
            "label_smoothing": 0.1,
            "clip_norm": 1.0,
            "accumulate": 2,
            "eps": 1e-3,
        },
        "train": {"max_steps": 4, "valid_every": 4, "log_every": 1, "seed": 5, "threads": 1, **train},
    }


def test_two_data_parallel_processes_reach_the_parameters_of_one(tmp_path):
    """torchrun with 2 CPU processes (gloo) on the same global batches gives the same parameters as 1 process
    (dropout 0: ranks draw their own dropout masks; Adam eps 1e-3 so that gradients that are zero up to rounding,
    like those of attention key biases, are not blown up to full-size steps by Adam's normalisation)."""
    import yaml

    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(_colors_config()))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "STRUCTSEQ_DDP_BACKEND": "gloo"}
    one = subprocess.run(
        [sys.executable, "-m", "structseq", "train", str(cfg), "-o", str(tmp_path / "one"), "-q"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert one.returncode == 0, one.stderr
    two = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "structseq",
            "train",
            str(cfg),
            "-o",
            str(tmp_path / "two"),
            "-q",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert two.returncode == 0, two.stderr[-3000:]
    a = torch.load(tmp_path / "one/checkpoints/last.pt", weights_only=True)
    b = torch.load(tmp_path / "two/checkpoints/last.pt", weights_only=True)
    assert a["progress"]["step"] == b["progress"]["step"] == 4
    for name, p in a["model"].items():
        assert torch.allclose(p, b["model"][name], atol=1e-6, rtol=0), name
    logs = (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()
    assert len(logs) == len((tmp_path / "one" / "metrics.jsonl").read_text().splitlines())  # rank 0 writes alone


def test_device_auto_is_cpu_here_and_bad_devices_are_config_errors(tmp_path):
    from structseq.errors import ConfigError
    from structseq.train.device import resolve_device

    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ConfigError, match="train.device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="no CUDA device"):
            resolve_device("cuda")
        with pytest.raises(ConfigError, match="train.bf16"):
            api.train(config_from_dict(_colors_config(bf16=True)), tmp_path / "r", show_progress=False)


def test_resume_restores_every_rng(tmp_path):
    """Python, NumPy and torch RNG states after resuming equal those of the uninterrupted run."""
    import random

    import numpy as np

    from structseq.train.loop import Trainer

    cfg = config_from_dict(_colors_config(save_every=2, valid_every=100))
    t = Trainer(cfg, tmp_path / "a", show_progress=False)
    t.on_update = lambda step: t.request_stop() if step == 2 else None
    t.run()
    after = (random.random(), float(np.random.rand()), float(torch.rand(())))
    random.seed(99), np.random.seed(99), torch.manual_seed(99)
    r = Trainer(cfg, tmp_path / "a", resume=True, show_progress=False)
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == after
    assert r.progress.step == 2


def test_tatoeba_reports_the_papers_pooled_bleu(shared_data):
    """Tatoeba declares pooled references: its report carries the lexicon paper's BLEU (full and 1-shot), and a
    hypothesis equal to another split's reference of the same source counts as a match."""
    from structseq.data.registry import load_dataset
    from structseq.metrics import nltk_corpus_bleu

    test = load_dataset("tatoeba-en-zh", "test", shared_data)[:300]
    task = get_task(config_from_dict({"data": {"dataset": "tatoeba-en-zh"}}))
    report = task.evaluate(
        test, [list(e.target) for e in test], dataset="tatoeba-en-zh", split="test", data_root=shared_data
    )
    full, shot = report["pooled_bleu"]["full"], report["pooled_bleu"]["1-shot"]
    perfect = nltk_corpus_bleu([e.target for e in test], [[e.target] for e in test]).score  # < 1: NLTK counts
    assert full["score"] == perfect and full["n"] == 300 and 0 < shot["n"] < 300  # short outputs' empty n-grams
    train = load_dataset("tatoeba-en-zh", "train", shared_data)
    by_source = {}
    for e in train:
        by_source.setdefault(e.source, set()).add(e.target)
    e = next(e for e in test if by_source.get(e.source, {e.target}) - {e.target})  # a source with another target
    other = sorted(by_source[e.source] - {e.target})[0]
    assert (
        task.evaluate([e], [list(other)], dataset="tatoeba-en-zh", split="test", data_root=shared_data)["pooled_bleu"][
            "full"
        ]["score"]
        == nltk_corpus_bleu([other], [[other]]).score
        > 0
    )
    assert "pooled_bleu" not in task.evaluate(
        test[:2], [list(x.target) for x in test[:2]], dataset="files", split="test"
    )


def test_evaluate_table_shows_nested_scores_like_pooled_bleu(capsys, monkeypatch):
    from structseq import cli

    monkeypatch.setenv("COLUMNS", "200")
    m = {
        "dataset": "tatoeba-en-zh",
        "split": "test",
        "n": 2,
        "beam": 1,
        "checkpoint": "last.pt",
        "exact_match": {"score": 0.5, "signature": "em"},
        "pooled_bleu": {
            "full": {"score": 0.25, "signature": "nltk_bleu|refs:pooled-by-source"},
            "1-shot": {"score": None, "n": 0},
        },
    }
    cli.print_metrics(m)
    out = capsys.readouterr().out
    assert "pooled_bleu.full" in out and "0.2500" in out and "pooled_bleu.1-shot" in out


@pytest.mark.parametrize("kind", ["seq2seq", "context-seq2seq"])
def test_source_bos_starts_every_source_the_model_reads_with_bos(kind):
    """`task.source_bos` (the lexicon paper's reference code): <s> x </s> in training and in decoding, and the
    context, a second input, unchanged."""
    example = Example(("a", "b"), ("x",), context=("c",) if kind == "context-seq2seq" else None)
    src = {}
    for bos in (False, True):
        model = TINY if kind == "seq2seq" else {**TINY, "arch": "context-transformer", "decoder": "sequential"}
        cfg = config_from_dict({"task": {"type": kind, "source_bos": bos}, "model": model})
        task = get_task(cfg)
        vocabs = task.build_vocabs([example])
        ids = vocabs["src"].encode(["a", "b"])
        encoded, inputs = task.encode(example, vocabs), task.decode_inputs([example], vocabs)
        want = [Vocab.bos, *ids, Vocab.eos] if bos else [*ids, Vocab.eos]
        assert encoded["src"] == want and inputs["src"][0].tolist() == want
        if kind == "context-seq2seq":
            assert encoded["ctx"] == [*vocabs["src"].encode(["c"]), Vocab.eos]
        src[bos] = task.collate([encoded], [0])["src"]
        model = build_model(cfg.model, vocabs)
        assert task.predict(model, [example], vocabs)  # the model reads it
    assert src[True].shape[1] == src[False].shape[1] + 1
