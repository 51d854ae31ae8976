"""Issue 31, sections 3 and 5: results that were silently wrong (changed data under --resume, a context model
without contexts, a header read as an example, reserved tokens as data, the kept context sentences, frequency
bins, contrastive scores, empty inputs) and valid input that was refused (runtime settings on --resume, the
README's short-form override, a leading blank line, `data.valid` with `data.dataset: files`)."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest
import torch
from typer.testing import CliRunner

from structseq import api
from structseq.api import Run
from structseq.config import config_from_dict, load_config
from structseq.data.example import Example
from structseq.data.readers import read_file, read_tsv
from structseq.data.training import load_training_data
from structseq.errors import ConfigError, DataError
from structseq.run.directory import RunDirError
from structseq.tasks import get_task
from tests.train.test_runs import interrupted_run, toy_tsv

CONTEXT = {"task": {"type": "context-seq2seq"}, "model": {"arch": "context-transformer"}}


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def _files(path, **data) -> dict:
    return {"data": {"dataset": "files", "train": str(path), "valid": str(path), **data}}


# ---------------------------------------------------------------- --resume and the data


def test_resume_refuses_training_data_whose_content_changed_naming_both_hashes(tmp_path):
    data, run = toy_tsv(tmp_path), tmp_path / "run"
    interrupted_run(data, run, 2)
    assert (run / "data-files.json").exists()
    lines = data.read_text().splitlines()
    data.write_text("\n".join([lines[1], lines[0], *lines[2:]]) + "\n")  # same vocabulary, other content
    last = (run / "checkpoints/last.pt").read_bytes()
    with pytest.raises(
        RunDirError,
        match=rf"{data}: the data changed since the run started: sha256 [0-9a-f]{{64}} "
        r"at the start, [0-9a-f]{64} now",
    ):
        api.resume(run, show_progress=False)
    assert (run / "checkpoints/last.pt").read_bytes() == last
    data.write_text("\n".join(lines) + "\n")  # restored: resumes
    assert api.resume(run, show_progress=False)["stopped"] == "max_steps"


@pytest.mark.parametrize(
    "override, old, new", [("train.threads=2", 1, 2), ("train.device=cpu", "auto", "cpu"), ("train.log_every=2", 1, 2)]
)
def test_resume_accepts_runtime_settings_and_says_so(tmp_path, capsys, override, old, new):
    data, run = toy_tsv(tmp_path), tmp_path / "run"
    interrupted_run(data, run, 2)
    summary = api.resume(run, overrides=[override], show_progress=False)
    assert summary["stopped"] == "max_steps"
    key = override.split("=")[0]
    assert f"{key}" in capsys.readouterr().err
    assert f"{key.split('.')[1]}: {new}" in (run / "config.yaml").read_text()
    import json

    records = [json.loads(x) for x in (run / "config-history.jsonl").read_text().splitlines()]
    assert records[-1]["changes"] == {key: [old, new]}


def test_resume_still_refuses_settings_that_change_results(tmp_path):
    data, run = toy_tsv(tmp_path), tmp_path / "run"
    interrupted_run(data, run, 2)
    for override in ("train.bf16=true", "optim.lr=1", "train.seed=2"):
        with pytest.raises(ConfigError, match="cannot be changed"):
            api.resume(run, overrides=[override], show_progress=False)


# ---------------------------------------------------------------- a context model without contexts


def test_a_context_model_on_a_file_without_a_context_column_names_the_file(tmp_path):
    path = _write(tmp_path, "plain.tsv", "a b\tA B\nc\tC\n")
    cfg = config_from_dict({**CONTEXT, **_files(path)})
    with pytest.raises(
        DataError,
        match=rf"files/{path}: no example has a context: a context-aware task needs a "
        r"'context' column",
    ):
        load_training_data(cfg, get_task(cfg))
    # going without on purpose (a sentence-level phase one) is allowed
    cfg = config_from_dict({**CONTEXT, **_files(path), "task": {"type": "context-seq2seq", "context_sentences": 0}})
    assert len(load_training_data(cfg, get_task(cfg)).train) == 2


def test_a_held_out_sample_without_contexts_is_not_refused(tmp_path):
    rows = "".join(f"s{i}\t{'c' if i % 2 else ''}\tT{i}\n" for i in range(20))
    path = _write(tmp_path, "ctx.tsv", "source\tcontext\ttarget\n" + rows)
    cfg = config_from_dict({**CONTEXT, "data": {"dataset": "files", "train": str(path), "valid_fraction": 0.05}})
    for seed in range(1, 6):  # one held-out example, some of them without a context
        cfg.train.seed = seed
        load_training_data(cfg, get_task(cfg))


# ---------------------------------------------------------------- headers with data.columns


def test_a_header_equal_to_data_columns_is_not_an_example(tmp_path):
    path = _write(tmp_path, "h.tsv", "source\ttarget\tcategory\na\tA\tx\nb\tB\ty\n")
    examples = read_tsv(path, ("source", "target", "category"))
    assert [e.source for e in examples] == [("a",), ("b",)]
    cfg = config_from_dict(_files(path, columns=["source", "target", "category"]))
    assert len(load_training_data(cfg, get_task(cfg)).train) == 2
    other = _write(tmp_path, "o.tsv", "source\ttarget\na\tA\n")  # a header contradicting them: refused (issue 43)
    with pytest.raises(DataError, match=r"o\.tsv:1: a header line \(source, target\) that differs from data.columns"):
        read_tsv(other, ("target", "source"))


# ---------------------------------------------------------------- reserved tokens


@pytest.mark.parametrize(
    "column, token",
    [("context", "<sep>"), ("context", "</s>"), ("source", "<brk>"), ("source", "<sep>"), ("target", "<brk>")],
)
def test_reserved_tokens_are_refused_in_every_column_naming_the_line(tmp_path, column, token):
    cells = {"source": "a", "context": "x y", "target": "A"}
    cells[column] = f"{cells[column]} {token}"
    path = _write(tmp_path, "r.tsv", "source\tcontext\ttarget\nb\tz\tB\n" + "\t".join(cells.values()) + "\n")
    with pytest.raises(DataError, match=rf"r\.tsv:3: reserved token '{token}' in the {column}"):
        read_tsv(path)


def test_brk_separates_context_sentences_and_stays_allowed_there(tmp_path):
    path = _write(tmp_path, "c.tsv", "source\tcontext\ttarget\na\tx <brk> y\tA\n")
    assert read_tsv(path)[0].context == ("x", "<brk>", "y")


@pytest.mark.parametrize(
    "line, message",
    [
        ("a <sep> b\tx", r"<stdin>:2: reserved token '<sep>' in the source"),
        ("a\tx <sep> y", r"<stdin>:2: reserved token '<sep>' in the context"),
        ("a\tx <unk>", r"<stdin>:2: reserved token '<unk>' in the context"),
        ("<brk> a\tx", r"<stdin>:2: reserved token '<brk>' in the source"),
    ],
)
def test_predict_refuses_reserved_tokens_naming_the_line(tmp_path, line, message):
    cfg = config_from_dict(CONTEXT)
    run = Run(tmp_path, cfg, None, {}, "best", get_task(cfg))
    with pytest.raises(DataError, match=message):
        run.predict(["a\tx", line], where="<stdin>")


# ---------------------------------------------------------------- what the context task keeps


def test_context_sentences_keeps_the_last_n_sentences():
    cfg = config_from_dict({**CONTEXT, "task": {"type": "context-seq2seq", "context_sentences": 2}})
    task = get_task(cfg)
    e = Example.from_text("s", "t", context="one a <brk> two b <brk> three c <brk> four d")
    assert task.prepare(e).context_text == "three c <brk> four d"
    cfg.task.context_sentences = 1
    assert task.prepare(e).context_text == "four d"
    cfg.task.context_sentences, cfg.task.max_context_tokens = 4, 3
    assert task.prepare(e).context_text == "<brk> four d"  # the last 3 tokens


# ---------------------------------------------------------------- frequency bins at their boundaries


def test_frequency_bins_at_exactly_100_99_10_9_1_0():
    from structseq.metrics.supertag import bin_of, supertag_scores

    assert [bin_of(c) for c in (100, 99, 10, 9, 1, 0)] == ["frequent", "uncommon", "uncommon", "rare", "rare", "unseen"]
    counts = Counter({"c100": 100, "c99": 99, "c10": 10, "c9": 9, "c1": 1})
    gold = [["c100", "c99", "c10", "c9", "c1", "c0"]]
    guess = [["c100", "no", "c10", "no", "c1", "no"]]
    out = supertag_scores(gold, [[[(g, 0.0)] for g in guess[0]]], counts)
    got = {
        b: (out[f"accuracy_{b}"]["correct"], out[f"accuracy_{b}"]["n"])
        for b in ("frequent", "uncommon", "rare", "unseen")
    }
    assert got == {"frequent": (1, 1), "uncommon": (1, 2), "rare": (1, 2), "unseen": (0, 1)}


# ---------------------------------------------------------------- contrastive scores: the target only


def _context_run(examples, seed=0):
    from structseq.models import build_model

    cfg = config_from_dict(
        {
            "task": "context-seq2seq",
            "model": {
                "arch": "context-transformer",
                "d_model": 16,
                "n_heads": 2,
                "ffn_dim": 32,
                "encoder_layers": 1,
                "decoder_layers": 2,
                "source_layers": [1],
                "context_layers": [2],
                "dropout": 0.0,
            },
        }
    )
    task = get_task(cfg)
    vocabs = task.build_vocabs(examples)
    torch.manual_seed(seed)
    model = build_model(cfg.model, vocabs).eval()
    return SimpleNamespace(model=model, task=task, vocabs=vocabs)


def test_contrastive_scores_sum_the_target_tokens_only():
    from structseq.decode.contrastive import target_log_probs

    examples = [Example.from_text("a b", "X Y", context="c d e f g"), Example.from_text("b", "Y", context="c")]
    run = _context_run(examples)
    head = run.model.head.proj
    torch.nn.init.zeros_(head.weight), torch.nn.init.zeros_(head.bias)  # uniform: each token scores -log V
    log_v = torch.log(torch.tensor(float(len(run.vocabs["tgt"])))).item()
    got = target_log_probs(run, examples)
    assert got == pytest.approx([-3 * log_v, -2 * log_v])  # target tokens + </s>, never the context's


def test_contrastive_scores_equal_a_hand_built_teacher_forced_sum():
    from structseq.decode.contrastive import target_log_probs

    examples = [Example.from_text("a b", "X Y", context="c d e f g"), Example.from_text("b a", "Y X Y", context="d")]
    run = _context_run(examples, seed=3)
    src, tgt = run.vocabs["src"], run.vocabs["tgt"]
    for e, score in zip(examples, target_log_probs(run, examples)):
        ids = tgt.encode(e.target)
        batch = {
            "src": torch.tensor([src.encode(e.source) + [src.eos]]),
            "ctx": torch.tensor([src.encode(e.context) + [src.eos]]),
            "tgt_in": torch.tensor([[tgt.bos] + ids]),
        }
        with torch.no_grad():
            lp = run.model(batch)[0]
        expected = sum(float(lp[i, t]) for i, t in enumerate(ids + [tgt.eos]))
        assert score == pytest.approx(expected, abs=1e-5)


# ---------------------------------------------------------------- one-line errors for empty or negative asks


def test_data_show_with_a_negative_count_is_a_one_line_error(tmp_path):
    from structseq.cli import app

    path = _write(tmp_path, "d.tsv", "a\tA\n")
    result = CliRunner().invoke(app, ["data", "show", str(path), "-n", "-1"])
    assert result.exit_code == 2 and "Invalid value for '-n'" in result.output
    assert "Traceback" not in result.output


def test_compose_stats_on_an_empty_test_file_is_a_one_line_error(tmp_path):
    from structseq.cli import app

    train, empty = _write(tmp_path, "train.txt", "a b\nb c\n"), _write(tmp_path, "empty.txt", "\n\n")
    result = CliRunner().invoke(
        app, ["compose", "stats", "--train", str(train), "--test", str(empty), "--tagger", "none"]
    )
    assert result.exit_code != 0 and "empty.txt: the test set holds no sentences" in " ".join(result.output.split())
    assert "nan" not in result.output and "Traceback" not in result.output


def test_table2_stats_refuses_an_empty_test_set():
    from structseq.compose.stats import table2_stats

    with pytest.raises(DataError, match="t.txt: the test set holds no sentences"):
        table2_stats(["a b", "b c"], {"t.txt": []})


# ---------------------------------------------------------------- valid input that was refused


def test_the_readme_short_form_override_on_a_supertag_config():
    cfg = load_config("configs/tlgbank-light/tree.yaml", ["task.beta=0.01"])
    assert cfg.task.type == "supertag" and cfg.task.beta == 0.01


def test_a_word_category_file_with_a_blank_first_line_is_not_a_tsv(tmp_path):
    path = _write(tmp_path, "tagged.txt", "\nJean|np dort|np\\s\n")
    (e,) = read_file(path)
    assert e.source == ("Jean", "dort") and e.target == ("np", r"np\s")


def test_data_valid_naming_a_split_with_dataset_files_names_the_key(tmp_path):
    path = toy_tsv(tmp_path)
    cfg = config_from_dict({"data": {"dataset": "files", "train": str(path), "valid": "dev"}})
    with pytest.raises(
        ConfigError,
        match=r"'data.valid': 'dev' is neither a file nor NAME:SPLIT.*null holds out "
        r"data.valid_fraction \(0.01\) of the training data",
    ):
        load_training_data(cfg, get_task(cfg))
