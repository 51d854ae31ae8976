"""Nothing lost, one error boundary: every output written atomically, never over an input nor over a file the
toolkit did not write (without --overwrite), evaluation targets in files of their own; problems with the user's
input or environment as one line `error: ...` (exit 2), naming the file, for every command and script."""

from __future__ import annotations

import errno
import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from structseq.errors import describe, run_cli
from structseq.outputs import MANIFEST, OutputError, Outputs, append_lines, atomic_write
from tests.fixtures.cli_run import one_line_error as _one_line_error
from tests.fixtures.cli_run import run_main as _main
from tests.fixtures.paths import ROOT

runner = CliRunner()


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


# ------------------------------------------------------------------ the mechanism
def test_a_failed_write_leaves_the_old_file_whole_and_names_it(tmp_path, monkeypatch):
    path = tmp_path / "out.tsv"
    atomic_write(path, "old\n")
    monkeypatch.setattr(os, "fsync", _enospc)  # a full disk, reported when the data reach it
    with pytest.raises(OSError) as e:
        atomic_write(path, "new\n" * 1000)
    assert e.value.filename == str(path) and e.value.errno == errno.ENOSPC
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.tsv"]  # no temporary left behind


def test_outputs_refuse_inputs_folders_and_files_the_toolkit_did_not_write(tmp_path):
    data = tmp_path / "data.tsv"
    data.write_text("a\tb\n")
    link = tmp_path / "link.tsv"
    os.link(data, link)
    outputs = Outputs([str(data)])
    for target in (data, link, tmp_path / "." / "data.tsv"):
        with pytest.raises(OutputError, match="is an input of this command"):
            outputs.check(target)
    with pytest.raises(OutputError, match="is a folder"):
        outputs.check(tmp_path)
    mine = tmp_path / "mine.txt"
    mine.write_text("my notes\n")
    with pytest.raises(OutputError, match=r"mine.txt: exists and was not written by structseq .* --overwrite"):
        outputs.check(mine)
    Outputs(overwrite=True).write(mine, "replaced\n")  # told to
    assert mine.read_text() == "replaced\n"
    ours = tmp_path / "ours.txt"
    outputs.write(ours, "1\n")
    outputs.write(ours, "2\n")  # its own output: replaced without a flag
    assert ours.read_text() == "2\n" and (tmp_path / MANIFEST).exists()
    ours.write_text("edited by hand\n")
    with pytest.raises(OutputError, match="or was changed since"):
        outputs.write(ours, "3\n")
    assert ours.read_text() == "edited by hand\n"


def test_appended_records_never_leave_a_partial_line(tmp_path, monkeypatch):
    path = tmp_path / "r.jsonl"
    append_lines(path, ['{"a": 1}'])
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, data[: len(data) // 2]))  # a short write
    with pytest.raises(OSError) as e:
        append_lines(path, ['{"b": 2}', '{"c": 3}'])
    assert e.value.filename == str(path)
    monkeypatch.setattr(os, "write", real_write)
    monkeypatch.setattr(os, "fsync", _enospc)
    with pytest.raises(OSError, match="No space left"):
        append_lines(path, ['{"d": 4}'])
    assert path.read_text() == '{"a": 1}\n'
    monkeypatch.undo()
    path.write_text('{"a": 1}\n{"torn')  # a line left unterminated by an older writer
    append_lines(path, ['{"e": 5}'])
    assert path.read_text().splitlines()[-1] == '{"e": 5}'


# ------------------------------------------------------------------ evaluate
@pytest.fixture(scope="module")
def toy_run(tmp_path_factory):
    """A tiny trained seq2seq run (its config's test split is a file)."""
    from structseq.train.loop import Trainer
    from tests.fixtures.toy import toy_config, toy_tsv

    root = tmp_path_factory.mktemp("toy")
    Trainer(toy_config(toy_tsv(root), max_steps=2), root / "run", show_progress=False).run()
    return root / "run"


def test_evaluation_targets_never_share_a_file(toy_run, tmp_path):
    from structseq.api import load_run, prediction_label

    first, second = tmp_path / "a" / "test.tsv", tmp_path / "b" / "test.tsv"
    for path, n in ((first, 3), (second, 5)):
        path.parent.mkdir()
        path.write_text("".join(f"a{i}\tA\n" for i in range(n)))
    run = load_run(toy_run)
    m1, m2 = run.evaluate(str(first)), run.evaluate(str(second))
    assert m1["predictions"] != m2["predictions"]
    assert len(Path(m1["predictions"]).read_text().splitlines()) == 4  # the first results are still there
    assert json.loads(Path(m1["predictions"]).with_suffix(".metrics.json").read_text())["n"] == 3
    assert prediction_label("test", "scan-jump", "test") == "test"  # a named split keeps its name
    assert prediction_label("cogs:gen", "cogs", "gen") == "cogs-gen"
    assert prediction_label(str(first), "files", str(first)).startswith("test-")


def test_evaluation_failing_midway_leaves_no_truncated_predictions_beside_stale_metrics(toy_run, tmp_path, monkeypatch):
    from structseq.api import load_run

    run = load_run(toy_run)
    m = run.evaluate()
    tsv = Path(m["predictions"])
    before = tsv.read_text()
    monkeypatch.setattr(os, "fsync", _enospc)
    with pytest.raises(OSError) as e:
        run.evaluate()
    assert e.value.filename == str(tsv)
    assert tsv.read_text() == before  # whole, not truncated
    assert not tsv.with_suffix(".metrics.json").exists()  # no metrics describing other predictions
    assert not [p for p in tsv.parent.iterdir() if p.name.endswith(".tmp")]


# ------------------------------------------------------------------ commands never replace their inputs
def test_lexicon_learn_refuses_to_write_over_its_data(tmp_path):
    from structseq.cli.lexicon import app

    data = tmp_path / "pairs.tsv"
    data.write_text("dax\tRED\nlug\tBLUE\ndax lug\tRED BLUE\n")
    res = runner.invoke(app, ["learn", str(data), "-o", str(data)])
    assert res.exit_code == 2 and f"{data}: is an input of this command" in res.output
    assert data.read_text() == "dax\tRED\nlug\tBLUE\ndax lug\tRED BLUE\n"
    out = tmp_path / "lex.json"
    assert runner.invoke(app, ["learn", str(data), "-o", str(out)]).exit_code == 0
    assert runner.invoke(app, ["learn", str(data), "-o", str(out)]).exit_code == 0  # its own output again
    res = runner.invoke(app, ["plot", str(out), "-o", str(out)])
    assert res.exit_code == 2 and "is an input of this command" in res.output
    notes = tmp_path / "notes.png"
    notes.write_bytes(b"my picture")
    res = runner.invoke(app, ["plot", str(out), "-o", str(notes)])
    assert res.exit_code == 2 and "--overwrite" in res.output and notes.read_bytes() == b"my picture"
    assert runner.invoke(app, ["plot", str(out), "-o", str(notes), "--overwrite"]).exit_code == 0
    res = runner.invoke(app, ["plot", str(out), "-o", str(tmp_path / "x.nope")])
    assert res.exit_code == 2 and "cannot draw a .nope file" in res.output


def test_compose_degree_and_stats_refuse_to_write_over_their_inputs(tmp_path):
    from structseq.cli.compose import app

    train, pool = tmp_path / "train.txt", tmp_path / "pool.txt"
    train.write_text("a b c\na b\nb c\n" * 4)
    pool.write_text("a b c\nc b a\n")
    res = runner.invoke(app, ["degree", "--train", str(train), "--pool", str(pool), "-o", str(pool)])
    assert res.exit_code == 2 and f"{pool}: is an input of this command" in res.output
    assert pool.read_text() == "a b c\nc b a\n"
    res = runner.invoke(
        app, ["stats", "--train", str(train), "--test", str(pool), "--tagger", "none", "-o", str(train)]
    )
    assert res.exit_code == 2 and "is an input of this command" in res.output
    assert train.read_text() == "a b c\na b\nb c\n" * 4


def test_compose_build_never_replaces_a_users_own_candidates(tmp_path):
    from structseq.cli.compose import app

    train, pool, out = tmp_path / "train.txt", tmp_path / "pool.txt", tmp_path / "bench"
    train.write_text("a b c\na b\nb c\n" * 4)
    pool.write_text("a b c\nc b a\nb a\n")
    out.mkdir()
    (out / "candidates.txt").write_text("my own list\n")
    args = [
        "build",
        "--train",
        str(train),
        "--pool",
        str(pool),
        "-o",
        str(out),
        "-k",
        "2",
        "-d",
        "0",
        "-r",
        "1",
        "-s",
        "1",
        "--min-count",
        "1",
        "--atom-threshold",
        "1",
    ]
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "candidates.txt: exists and was not written by structseq" in res.output
    assert (out / "candidates.txt").read_text() == "my own list\n"
    assert runner.invoke(app, args + ["--overwrite"]).exit_code == 0
    assert runner.invoke(app, args).exit_code == 0  # the build's own files: rebuilt without a flag
    res = runner.invoke(app, [*args[:4], str(out / "candidates.txt"), *args[5:]])  # --pool OUT/candidates.txt
    assert res.exit_code == 2 and "is an input of this command" in res.output


# ------------------------------------------------------------------ the error boundary
def test_boundary_gives_one_line_for_input_problems_and_a_traceback_for_bugs(capsys):
    def fails(e):
        raise e

    assert run_cli(fails, OSError(errno.ENOSPC, "No space left on device", "/x/last.pt")) == 2
    assert capsys.readouterr().err == "error: /x/last.pt: No space left on device\n"
    try:
        b"ab\xff".decode("utf-8")
    except UnicodeDecodeError as e:
        assert describe(e).startswith("not UTF-8 text (byte 0xff at offset 2)")
    try:
        json.loads('{"a": ')
    except json.JSONDecodeError as e:
        assert describe(e).startswith("not valid JSON: Expecting value (line 1, column 7)")
    with pytest.raises(ZeroDivisionError):  # a genuine bug keeps its traceback
        run_cli(lambda: 1 / 0)


def test_a_warning_at_the_command_line_is_one_line():
    """Python's default warning layout adds `file:line: UserWarning:` and the source line that raised it; at the
    command line a warning is one line `warning: ...` like an error (a subprocess: pytest records warnings)."""
    import subprocess

    code = (
        "import warnings; from structseq.errors import run_cli; "
        "run_cli(lambda: warnings.warn('config.yaml was edited:\\n  decode.beam 4 vs 1'))"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert got.stderr == "warning: config.yaml was edited:   decode.beam 4 vs 1\n"
    import warnings

    assert warnings.formatwarning.__module__ == "warnings"  # restored after the command


def test_full_disk_during_a_checkpoint_save_names_the_file(tmp_path, monkeypatch, capsys):
    from structseq.run.checkpoint import load_checkpoint, save_checkpoint
    from tests.fixtures.toy import toy_config, toy_tsv

    path = tmp_path / "checkpoints" / "last.pt"
    save_checkpoint({"progress": {"step": 1}}, path)
    monkeypatch.setattr(os, "fsync", _enospc)
    with pytest.raises(OSError) as e:
        save_checkpoint({"progress": {"step": 2}}, path)
    assert e.value.filename == str(path)
    monkeypatch.undo()
    assert load_checkpoint(path)["progress"] == {"step": 1}  # the previous checkpoint, whole
    cfg = tmp_path / "toy.yaml"
    import yaml

    cfg.write_text(yaml.safe_dump(toy_config(toy_tsv(tmp_path), max_steps=2).to_dict()))
    real_fsync = os.fsync

    def checkpoints_hit_a_full_disk(fd):  # the run's config.yaml is written first, on a disk with room
        if "/checkpoints/" in os.readlink(f"/proc/self/fd/{fd}"):
            _enospc()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", checkpoints_hit_a_full_disk)
    code, err = _main(monkeypatch, capsys, "train", cfg, "-o", tmp_path / "run", "-q")
    _one_line_error(code, err, str(tmp_path / "run" / "checkpoints"), ".pt: No space left on device")


def test_data_show_on_a_broken_json_file_is_one_line(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "doclevel_mt" / "discevalmt_en_fr"
    folder.mkdir(parents=True)
    for text, words in (
        ('{"a": [1,', "cannot read contrastive set"),
        ("[1, 2]", "expected a JSON object"),
        ('{"1": {"src": ["a"]}}', "block 1: not a DiscEvalMT block"),
        ('{"1": 5}', "block 1: not a DiscEvalMT block"),
    ):
        (folder / "anaphora.json").write_text(text)
        code, err = _main(
            monkeypatch, capsys, "data", "show", "discevalmt-anaphora", "--split", "test", "--data-root", tmp_path
        )
        _one_line_error(code, err, "anaphora.json", words)
    (folder / "anaphora.json").write_bytes(b'{"\xff": 1}')
    _one_line_error(
        *_main(monkeypatch, capsys, "data", "show", "discevalmt-anaphora", "--split", "test", "--data-root", tmp_path),
        "anaphora.json:1: not UTF-8",
    )


@pytest.fixture(scope="module")
def context_run(tmp_path_factory):
    """A tiny sequential context-transformer run, its predictions file and its test file."""
    from structseq.api import load_run
    from structseq.train.loop import train
    from tests.tasks.test_context import _cfg

    root = tmp_path_factory.mktemp("ctx")
    train(_cfg(root, model={"decoder": "sequential"}), root / "seq", show_progress=False)
    predictions = load_run(root / "seq").evaluate(str(root / "test.tsv"))["predictions"]
    return root / "seq", Path(predictions), root / "test.tsv"


def test_context_commands_give_one_line_errors(context_run, toy_run, tmp_path, monkeypatch, capsys):
    run, predictions, test = context_run
    latin1 = tmp_path / "latin1.tsv"
    latin1.write_bytes("source\thypothesis\ncaf\xe9\tx\n".encode("latin-1"))
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("source\ttarget\tcontext\tcategory\tcontrast\nwalk\tWALK\t\tplain\tJUMP\n")
    missing = tmp_path / "missing.tsv"
    cases = [
        (["backward-ppl", run, missing], [f"{missing}: file not found"]),
        (["context-use", missing], [f"{missing}: file not found"]),
        (["backward-ppl", run, latin1], [f"{latin1}:2: not UTF-8 (byte 0xe9)"]),
        (["contrastive", run, "--split", latin1], [f"{latin1}:2: not UTF-8"]),
        (["backward-ppl", run, predictions], [f"{run}: ", "not a reverse run"]),  # the wrong kind of run
        (["attention", toy_run, "--split", test], [f"{toy_run}: a seq2seq run", "sequential variant"]),
        (["attention", run, "--split", test, "--layer", "5"], ["--layer 5: the encoder of", "has layers 1..1"]),
    ]
    for args, words in cases:
        _one_line_error(*_main(monkeypatch, capsys, "context", *args), *words)
    for args, option in (
        (["attention", run, "--split", test, "--layer", "0"], "--layer"),
        (["contrastive", run, "--split", pairs, "--batch-size", "0"], "--batch-size"),
    ):
        code, err = _main(monkeypatch, capsys, "context", *args)
        assert code == 2 and option in err and "Traceback" not in err


def _plan_module():
    spec = importlib.util.spec_from_file_location("scripts_plan_outputs", ROOT / "scripts" / "plan.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


GOOD_PLAN = """cells:
  - id: one
    title: "one"
    configs: [configs/scan-jump/lstm-256.yaml]
    seeds: [1]
    out: {out}
    runs: runs
"""


def test_every_malformed_plan_is_one_line(tmp_path, monkeypatch, capsys):
    plan = _plan_module()
    monkeypatch.chdir(ROOT)
    records = tmp_path / "r.jsonl"
    good = GOOD_PLAN.format(out=records)
    cases = [
        (None, [], ["plan.yaml: file not found"]),
        ("cells: [\n  - id: x\n", [], ["plan.yaml", "not valid YAML"]),
        (b"cells: [caf\xe9]\n", [], ["plan.yaml:1: not UTF-8"]),
        (good.replace("seeds: [1]", "seeds: [1]\n    colour: red"), [], ["unknown key(s) colour"]),
        (good.replace("seeds: [1]", "seeds: 3"), [], ["`seeds` must be a list, got 3"]),
        (good.replace("seeds: [1]", "seeds: [one]"), [], ["`seeds` must be a list of integers"]),
        (good.replace("runs: runs", "runs: runs\n    sweep: {model.x: 3}"), [], ["`sweep.model.x` must be"]),
        (good.replace("runs: runs", "runs: runs\n    curve: 5"), [], ["`curve` must be a dict"]),
        ("cells: 3\n", [], ["expected a mapping with a list under `cells`"]),
        (good, ["--cell", "nope"], ["--cell: no cell nope in the plan; cells: one"]),
    ]
    for text, extra, words in cases:
        path = tmp_path / "plan.yaml"
        path.unlink(missing_ok=True)
        if isinstance(text, bytes):
            path.write_bytes(text)
        elif text is not None:
            path.write_text(text)
        code = run_cli(plan.main, [str(path), *extra])
        _one_line_error(code, capsys.readouterr().err, *words)
    (tmp_path / "plan.yaml").write_text(good)
    records.write_text('{"config": "c", "seed": 1}\n{"config": \n')  # a torn record
    _one_line_error(
        run_cli(plan.main, [str(tmp_path / "plan.yaml")]), capsys.readouterr().err, f"{records}:2: not a JSON record"
    )


def _script(name: str):
    spec = importlib.util.spec_from_file_location(f"scripts_{name}_outputs", ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_reproduce_and_report_tables_errors_are_one_line(tmp_path, capsys):
    from structseq import report

    reproduce = _script("reproduce")
    torn = tmp_path / "r.jsonl"
    torn.write_text('{"config": "c", "seed": 1}\n{"config": "c", "se\n')
    code = run_cli(reproduce.main, ["configs/scan-jump/lstm-256.yaml", "--out", str(torn)])
    _one_line_error(code, capsys.readouterr().err, f"{torn}:2: not a JSON record")
    code = run_cli(report.main, ["tables", str(tmp_path / "nope.md")])
    _one_line_error(code, capsys.readouterr().err, "nope.md: file not found")
    code = run_cli(report.main, ["results", str(torn)])  # a table's records: file and line named
    _one_line_error(code, capsys.readouterr().err, f"{torn}:2: not a JSON record")
