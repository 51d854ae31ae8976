"""Safe with a stranger's files: no code from a model folder ever runs (every `from_pretrained` passes
`trust_remote_code=False`, whatever standard input answers), and no name read from a checkpoint chooses where a
file is written (issue 43, section 1)."""

from __future__ import annotations

import ast
import io
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from structseq.errors import ConfigError, StructseqError  # noqa: E402
from tests.fixtures.cli_run import one_line_error, run_main
from tests.fixtures.paths import ROOT  # noqa: E402


# ------------------------------------------------------------------ no code from a model folder runs
def test_every_from_pretrained_call_passes_trust_remote_code_false():
    """An AST walk over the package, scripts and benchmarks: each `X.from_pretrained(...)` call says
    `trust_remote_code=False` (left out, transformers asks on standard input, and a `y` there runs the folder's
    code). The walk finds the calls it checks (so a rename cannot make it vacuous)."""
    checked, missing = 0, []
    for path in sorted(
        [*(ROOT / "src").rglob("*.py"), *(ROOT / "scripts").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")]
    ):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "from_pretrained":
                checked += 1
                given = {k.arg: k.value for k in node.keywords}
                value = given.get("trust_remote_code")
                if not (isinstance(value, ast.Constant) and value.value is False):
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert checked >= 3
    assert missing == []


def _evil(folder: Path, marker: Path) -> Path:
    """A model folder of an unknown model_type whose config and tokenizer name their own code (`auto_map`);
    importing that code writes `marker`."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(
        '{"model_type": "evilmodel", "is_encoder_decoder": true, "auto_map": {'
        '"AutoConfig": "configuration_evil.EvilConfig", "AutoModel": "configuration_evil.EvilModel", '
        '"AutoModelForSeq2SeqLM": "configuration_evil.EvilModel", '
        '"AutoTokenizer": ["configuration_evil.EvilTokenizer", null]}}'
    )
    (folder / "tokenizer_config.json").write_text(
        '{"tokenizer_class": "EvilTokenizer", "auto_map": {"AutoTokenizer": ["configuration_evil.EvilTokenizer", null]}}'
    )
    (folder / "vocab.json").write_text('{"a": 0}')  # a vocabulary, so that loaders go on to the tokenizer's code
    (folder / "configuration_evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n"
        "from transformers import PretrainedConfig\n\n\n"
        "class EvilConfig(PretrainedConfig):\n    model_type = 'evilmodel'\n"
    )
    return folder


YES = "y\n" * 20  # every prompt answered yes (as the first lines of a user's data piped to predict would)


def test_a_model_folders_code_never_runs_through_train_even_when_stdin_says_yes(tmp_path, monkeypatch, capsys):
    """`printf 'y\\n' | structseq train hf.yaml --set model.pretrained=EVIL` ran EVIL/configuration_evil.py on
    d15a89c; now nothing runs and the refusal is one line naming the key."""
    marker = tmp_path / "marker"
    evil = _evil(tmp_path / "evil", marker)
    cfg = tmp_path / "hf.yaml"
    cfg.write_text(
        "task: hf-seq2seq\ndata: {dataset: colors, valid: train, test: [test]}\n"
        "model: {arch: hf-seq2seq, pretrained: somewhere}\ntrain: {max_steps: 1, threads: 1}\n"
    )
    code, err = run_main(
        monkeypatch, capsys, "train", cfg, "-o", tmp_path / "run", "--set", f"model.pretrained={evil}", stdin=YES
    )
    assert not marker.exists()
    one_line_error(code, err, "model.pretrained", "custom code")


@pytest.mark.parametrize("loader", ["config", "model", "tokenizer", "subword", "encoder"])
def test_no_loader_runs_a_model_folders_code_even_when_stdin_says_yes(loader, tmp_path, monkeypatch):
    """Every way structseq reads a Hugging Face folder: the pretrained archs' config, model and tokenizer
    (`model.pretrained`, also what `predict RUN` loads), `task.subword: tokenizer` and the supertagger's
    `model.encoder.pretrained`: a one-line error, and the folder's code never imported."""
    from structseq.data import subword
    from structseq.models import hf_checkpoint, supertag_encoders

    marker = tmp_path / "marker"
    evil = str(_evil(tmp_path / "evil", marker))
    monkeypatch.setattr(sys, "stdin", io.StringIO(YES))
    call = {
        "config": lambda: hf_checkpoint.load_config(evil),
        "model": lambda: hf_checkpoint.load_seq2seq(evil),
        "tokenizer": lambda: hf_checkpoint.load_tokenizer(evil),
        "subword": lambda: subword.load_tokenizer(evil),
        "encoder": lambda: [supertag_encoders.load_pretrained(evil, w) for w in ("config", "tokenizer", "model")],
    }[loader]
    with pytest.raises(ConfigError) as e:
        call()
    assert not marker.exists()
    assert "\n" not in str(e.value) and "custom code" in str(e.value)
    assert isinstance(e.value, StructseqError)


def test_predict_on_a_crafted_run_never_runs_its_base_folders_code(tmp_path, monkeypatch, capsys):
    """A run whose checkpoint (valid checksum) names such a folder as its base, and `printf 'y\\ndax\\n' |
    structseq predict RUN`: on d15a89c the first line of the user's input answered transformers' prompt and
    the folder's code ran. Now nothing runs and the refusal is one line."""
    from structseq import api
    from structseq.config import config_from_dict
    from structseq.models.hf_checkpoint import base_digest
    from structseq.run.checkpoint import load_checkpoint, save_checkpoint
    from structseq.testing.hf_tiny import tiny_bart
    from tests.tasks.test_hf_seq2seq import train_config

    base = tiny_bart(tmp_path / "base")
    api.train(config_from_dict(train_config(base, 1)), tmp_path / "run", show_progress=False)
    capsys.readouterr()
    marker = tmp_path / "marker"
    evil = _evil(tmp_path / "evil", marker)
    for path in (tmp_path / "run" / "checkpoints").glob("*.pt"):
        ckpt = load_checkpoint(path)
        ckpt["config"]["model"]["pretrained"] = str(evil)
        ckpt["task"]["base_sha256"] = base_digest(evil)  # the crafted run's record matches its folder
        save_checkpoint(ckpt, path)
    code, err = run_main(monkeypatch, capsys, "predict", tmp_path / "run", "--threads", 1, stdin="y\ndax\n")
    assert not marker.exists()
    one_line_error(code, err, "model.pretrained", "custom code")
