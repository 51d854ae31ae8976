"""One owner per concept: which checkpoint of a run is read (`load_run`, `--checkpoint` and `train.init_from`
share `resolve_checkpoint`), strict YAML for a run's config.yaml, NAME:SPLIT parsing, each shared CLI
option declared once, and (issue 56 item 4) one rule per fact: a split string that is a file, the `trees`
capability, the device pattern, the beam's check, the wording of an unregistered metric."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import structseq.cli
from structseq import api
from structseq.compose import corpus
from structseq.config import config_from_dict
from structseq.data import registry
from structseq.errors import ConfigError, DataError, StructseqError
from structseq.run import checkpoint
from structseq.run.checkpoint import init_checkpoint, resolve_checkpoint
from structseq.run.layout import RunDirError
from structseq.run.saved_config import read_run_config
from structseq.train import loop
from tests.fixtures.cli_run import one_line_error, run_main
from tests.fixtures.toy import toy_config, toy_tsv

CLI_DIR = Path(structseq.cli.__file__).parent
PACKAGE = CLI_DIR.parent


def written(pattern: str) -> dict[str, int]:
    """The package's files whose text matches the regex `pattern`, with how often: where a fact is written."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        n = len(re.findall(pattern, path.read_text(encoding="utf-8")))
        if n:
            found[path.relative_to(PACKAGE).as_posix()] = n
    return found


def test_load_run_and_init_from_resolve_checkpoints_by_one_rule(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    # no checkpoint at all: the same words from both readers
    with pytest.raises(StructseqError) as by_load_run:
        api.load_run(run, "best")
    with pytest.raises(ConfigError) as by_init_from:
        init_checkpoint(run)
    assert "no checkpoint in" in str(by_load_run.value)
    assert str(by_init_from.value) == f"'train.init_from': {by_load_run.value}"

    # no validation ran (no best.pt): best falls back to last for both
    last = run / "checkpoints" / "last.pt"
    last.write_bytes(b"not a checkpoint")
    assert resolve_checkpoint(run, "best") == ("last", last)
    assert init_checkpoint(run) == last
    with pytest.raises(StructseqError, match=r"last\.pt: cannot load checkpoint safely"):
        api.load_run(run, "best")

    # a corrupt best.pt is never silently replaced by last.pt
    best = run / "checkpoints" / "best.pt"
    best.write_bytes(b"corrupt")
    assert resolve_checkpoint(run, "best") == ("best", best)
    assert init_checkpoint(run) == best
    with pytest.raises(StructseqError, match=r"best\.pt: cannot load checkpoint safely"):
        api.load_run(run, "best")
    with pytest.raises(StructseqError, match=r"best\.pt: cannot load checkpoint safely"):
        loop.Trainer(toy_config(toy_tsv(tmp_path), init_from=str(run)), tmp_path / "phase2", show_progress=False)


def test_checkpoint_names_are_checked_in_one_place(tmp_path):
    for bad in ("../x", ".hidden", "", None):
        with pytest.raises(StructseqError, match="is not a checkpoint name"):
            resolve_checkpoint(tmp_path, bad)
    assert api.resolve_checkpoint is checkpoint.resolve_checkpoint


def test_run_config_refuses_a_duplicate_key_naming_the_file(tmp_path):
    (tmp_path / "config.yaml").write_text("train:\n  seed: 1\n  seed: 2\n")
    with pytest.raises(RunDirError, match=re.escape(f"{tmp_path / 'config.yaml'}:3: duplicate key 'seed'")):
        read_run_config(tmp_path)


def test_compose_reads_name_split_with_the_data_registry_parser():
    assert corpus.dataset_split is registry.dataset_split
    assert not hasattr(corpus, "_dataset_split")


@pytest.mark.parametrize(
    "flag, home",
    [
        ("--data-root", "options.py"),
        ("--checkpoint", "options.py"),
        *((flag, "decoding.py") for flag in ("--threads", "--device", "--max-len-a", "--max-len-b")),
        *((flag, "decoding.py") for flag in ("--top-p", "--temperature")),
    ],
)
def test_each_shared_cli_option_is_declared_once(flag, home):
    option = rf"""(?:typer\.Option|_option)\([^)]*?["']{flag}["']"""  # a declaration, not a message naming it
    declared = {path.name: len(re.findall(option, path.read_text())) for path in sorted(CLI_DIR.glob("*.py"))}
    assert {name: n for name, n in declared.items() if n} == {home: 1}
    # and no parameter named after the flag declares it implicitly (typer.Option without a name)
    param = flag.lstrip("-").replace("-", "_")
    implicit = [
        path.name
        for path in CLI_DIR.glob("*.py")
        if re.search(rf"\b{param}\s*:[^=\n]*=\s*typer\.Option\(", path.read_text())
    ]
    assert implicit == []


def test_the_cli_is_one_package_mounting_its_sub_apps():
    from typer.main import get_command

    group = get_command(structseq.cli.app)
    assert {"data", "lexicon", "compose", "context", "train", "evaluate", "predict"} <= set(group.commands)
    for old in ("context_cli.py", "lexicon/cli.py", "compose/cli.py", "cli.py"):
        assert not (CLI_DIR.parent / old).exists(), old


def test_a_missing_file_is_no_such_file_whoever_reads_the_split(tmp_path, monkeypatch, capsys):
    """`SplitSpec` said `missing.tsv` is a file and loading it then said "unknown dataset 'missing.tsv'": one
    rule (`registry.looks_like_file`) decides file or dataset name for both, and both say the file is missing."""
    monkeypatch.chdir(tmp_path)
    for spec, dataset in (("missing.tsv", "scan-simple"), ("missing.tsv", None), ("missing", "files")):
        parsed = registry.SplitSpec.parse(spec, dataset)
        assert parsed.kind == "file"
        with pytest.raises(DataError) as by_spec:
            parsed.load()
        assert str(by_spec.value) == f"{spec}: file not found"
    with pytest.raises(DataError) as by_name:
        registry.load_dataset("missing.tsv")
    assert str(by_name.value) == "missing.tsv: file not found"
    code, err = run_main(monkeypatch, capsys, "data", "show", "missing.tsv")
    one_line_error(code, err, "missing.tsv: file not found")
    assert "unknown dataset" not in err


def test_the_trees_capability_is_written_once():
    from structseq.registry import ARCHS, HF_EXPORT, MARIAN_LAYOUT, TREES

    assert written(r"""["']trees["']""") == {"registry.py": 1}
    assert [name for name, arch in ARCHS.items() if TREES in arch.capabilities] == ["supertag-tree"]
    # and the export capabilities: each written where it is defined, asked by its constant
    for capability, archs in ((HF_EXPORT, ["hf-seq2seq"]), (MARIAN_LAYOUT, ["transformer"])):
        assert written(rf"""["']{capability}["']""") == {"registry.py": 1}, capability
        assert [name for name, arch in ARCHS.items() if capability in arch.capabilities] == archs


def test_the_device_pattern_is_written_once():
    from structseq.cli.decoding import check_device

    assert written(r"cuda\(?:\\d") == {"config/__init__.py": 1}
    with pytest.raises(ConfigError) as by_config:
        config_from_dict({"train": {"device": "tpu"}})
    with pytest.raises(ConfigError) as by_flag:
        check_device("tpu")
    assert str(by_flag.value) == "'--device': invalid value 'tpu'; choices: auto, cpu, cuda, cuda:N"
    assert str(by_config.value) == str(by_flag.value).replace("'--device'", "'train.device'")
    for good in ("cpu", "auto"):
        assert check_device(good) == good


def test_no_registered_metric_is_worded_once():
    from structseq.evaluation import check_metrics

    assert written("no registered") == {"registry.py": 1}
    with pytest.raises(ConfigError) as by_config:
        config_from_dict({"task": {"metrics": ["nosuch"]}})
    with pytest.raises(ConfigError) as by_flag:
        check_metrics(["nosuch"])
    assert str(by_flag.value).startswith("'--metric': no registered metric 'nosuch'; choices: ")
    assert str(by_config.value) == str(by_flag.value).replace("'--metric'", "'task.metrics'")


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("toy")
    data = toy_tsv(folder)
    loop.train(toy_config(data, max_steps=2, valid_every=0), folder / "run", show_progress=False)
    return folder / "run", data


def test_the_beam_is_checked_by_one_rule_on_every_path(toy_run, monkeypatch, capsys):
    """The beam was checked in four places (evaluation, the tagger's --format check, `Run.search` and
    `Run.predict`) and not at all by `Run.translate` or `Run.decode_examples`: now by `decode.batched.check_beam`,
    which every decoding runs."""
    from structseq.data.example import Example

    assert written(r"'--beam' must") == {"decode/batched.py": 1}
    run_dir, data = toy_run
    run = api.load_run(run_dir)
    examples = [Example.from_text("a b")]
    calls = {
        "translate": lambda beam: run.translate(["a b"], beam=beam),
        "predict": lambda beam: run.predict(["a b"], beam=beam),
        "decode_examples": lambda beam: run.decode_examples(examples, beam=beam),
        "search": lambda beam: run.search(examples, beam=beam),
        "evaluate": lambda beam: run.evaluate(str(data), beam=beam, write_predictions=False),
    }
    for name, call in calls.items():
        for beam, message in ((0, "'--beam' must be >= 1, got 0"), (2.5, "'--beam' must be an integer, got 2.5")):
            with pytest.raises(ConfigError) as e:
                call(beam)
            assert str(e.value) == message, name
    code, err = run_main(monkeypatch, capsys, "predict", run_dir, "--beam", "0", stdin="a b\n")
    one_line_error(code, err, "'--beam' must be >= 1, got 0")


def test_an_evaluations_options_are_declared_once(tmp_path):
    """`Run.evaluate` passes its keywords to `evaluation.EvalOptions` (issue 56: it repeated `evaluation.evaluate`'s
    eleven): one declaration, so a keyword it does not know is refused there, naming it."""
    import dataclasses
    import inspect

    from structseq import evaluation
    from structseq.config import config_from_dict
    from structseq.tasks import get_task

    assert list(inspect.signature(api.Run.evaluate).parameters) == ["self", "split", "options"]
    assert list(inspect.signature(evaluation.evaluate).parameters) == ["run", "options"]
    fields = [f.name for f in dataclasses.fields(evaluation.EvalOptions)]
    assert fields == ["split", "beam", "data_root", "bleu_tokenize", "write_predictions", "show_progress"] + [
        "limit",
        "sampling",
        "overwrite",
        "metrics",
    ]
    cfg = config_from_dict({})
    run = api.Run(tmp_path, cfg, None, {}, "best", get_task(cfg))
    with pytest.raises(TypeError, match="beem"):
        run.evaluate("test", beem=5)
