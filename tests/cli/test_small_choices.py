"""Issue 47 items 7-9 through the CLI: piped output is plain and whole, CPU threads, and the small choices that
used to be silent."""

from __future__ import annotations

from typer.testing import CliRunner

from structseq.cli import app

runner = CliRunner()


def test_piped_tables_fit_the_width_and_keep_their_cells_whole():
    """Issue 55.7 (400-column lines in `config data | less`): CliRunner's stdout is not a terminal, and a piped
    table is COLUMNS wide (100 without it), its help and descriptions wrapped in their column; what must not be
    cut stays whole (issue 47): the keys, and the help's words, in order, across the wrapped lines."""
    for columns, width in ((None, 100), ("160", 160)):
        for args in (["config", "data"], ["data", "list"]):
            r = runner.invoke(app, args, env={"COLUMNS": columns})
            assert r.exit_code == 0, r.output
            lines = r.stdout.splitlines()
            assert max(map(len, lines)) <= width and "\x1b[" not in r.stdout  # no colour codes
    r = runner.invoke(app, ["config", "data"], env={"COLUMNS": None})
    assert any(line.startswith("│ data.holdout_seed ") for line in r.stdout.splitlines())  # a key is never cut
    helps = " ".join(line.rstrip(" │").rsplit("│", 1)[-1].strip() for line in r.stdout.splitlines() if "│" in line)
    assert "registered dataset name (see `structseq data list`) or 'files'" in " ".join(helps.split())


def test_a_signature_is_never_cut_in_a_pipe():
    """The metrics table's signature column does not wrap: the table widens as far as the signature needs."""
    from rich.table import Table

    from structseq.cli.options import stdout_console

    console = stdout_console()
    table = Table()
    table.add_column("metric", no_wrap=True)
    table.add_column("signature", no_wrap=True)
    signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.4.2|" + "x" * 80
    table.add_row("bleu", signature)
    with console.capture() as capture:
        console.print(table)
    assert any(signature in line for line in capture.get().splitlines())


def test_threads_default_to_the_free_cpus_with_a_hint_when_busy(tmp_path, monkeypatch):
    """train.threads 0 and no --threads: as many threads as the CPUs the load leaves free (at least 1); a busy
    machine says so in one line naming the setting on a terminal's stderr only (not under -q; a piped stderr,
    as here and in scripts, carries only the one-line errors); an explicit count is used as given, without
    the hint."""
    import io
    import os
    import sys

    import torch
    import yaml

    from structseq.train import device
    from structseq.train.device import set_threads
    from tests.fixtures.toy import toy_config, toy_tsv
    from tests.train.test_threads import FakeProc

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    before = torch.get_num_threads()
    data = toy_tsv(tmp_path)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(toy_config(data, max_steps=2, valid_every=0).to_dict()))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(device, "read_proc", FakeProc(busy=[1.0, 0.9]))  # both CPUs busy now
    monkeypatch.setattr(device, "TORCH_DEFAULT_THREADS", 2)
    monkeypatch.setattr(device, "SAMPLE_S", 0.0)
    try:
        torch.set_num_threads(2)
        quiet = runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "quiet"), "-q"])
        assert quiet.exit_code == 0 and "busy" not in quiet.output  # -q: no hint either
        r = runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "run")])
        assert r.exit_code == 0 and "busy" not in r.output, r.output  # stderr is not a terminal: no hint
        assert torch.get_num_threads() == 1
        hint = "structseq: this machine is busy (1.9 of 2 CPUs in use): using 1 torch thread (set train.threads to choose)\n"
        for loud, said in ((True, hint), (False, "")):  # on a terminal: the hint, unless the command is quiet
            torch.set_num_threads(2)
            with monkeypatch.context() as m:
                m.setattr(sys, "stderr", Terminal())
                assert set_threads(None, hint=loud) == 1 and torch.get_num_threads() == 1
                assert sys.stderr.getvalue() == said
        torch.set_num_threads(2)  # decoding takes the free CPUs too
        r = runner.invoke(app, ["evaluate", str(tmp_path / "run"), "--split", str(data), "--limit", "2"])
        assert r.exit_code == 0 and torch.get_num_threads() == 1
        torch.set_num_threads(2)
        r = runner.invoke(
            app, ["evaluate", str(tmp_path / "run"), "--split", str(data), "-q", "--threads", "2", "--limit", "3"]
        )
        assert r.exit_code == 0 and "busy" not in r.output and torch.get_num_threads() == 2
        monkeypatch.setattr(device, "read_proc", FakeProc(busy=[0.1, 0.0]))  # idle: torch's own default stands
        r = runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / "idle"), "-q"])
        assert r.exit_code == 0 and "busy" not in r.output and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_small_choices_are_said_or_refused(tmp_path, monkeypatch):
    """`score` warns about target words it scores as <unk>; --beam beside --set decode.beam is refused;
    progress off a terminal counts sentences; a 4-panel plot is a grid and its bands stay in the range."""
    import yaml
    from PIL import Image

    from structseq import progress
    from structseq.cli.plot import value_range
    from tests.fixtures.toy import toy_config, toy_tsv

    data = toy_tsv(tmp_path)
    d = toy_config(data, max_steps=2, valid_every=2, valid_metric="bleu").to_dict()
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(d))
    for seed in (1, 2):
        r = runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / f"s{seed}"), "-q", "--seed", str(seed)])
        assert r.exit_code == 0, r.output
    run = str(tmp_path / "s1")

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("a b\tB A\na b\tB ZEBRA\n")
    r = runner.invoke(app, ["score", run, "--pairs", str(pairs)])
    assert r.exit_code == 0, r.output
    assert "warning: 1 of 2 targets hold words outside the run's target vocabulary, scored as <unk>" in r.output
    assert "pair 2, 'B ZEBRA'" in r.output

    r = runner.invoke(app, ["evaluate", run, "--split", str(data), "--beam", "2", "--set", "decode.beam=3"])
    assert r.exit_code != 0 and "--beam 2 and --set decode.beam=3 both set decode.beam" in str(r.exception)

    monkeypatch.setattr(progress, "LINE_EVERY", 0.0)
    r = runner.invoke(app, ["evaluate", run, "--split", str(data), "--batch-size", "25", "--limit", "60"])
    assert r.exit_code == 0, r.output
    assert "decode: 25/60 sentences (41%)" in r.output and "decode: 60/60 sentences (100%)" in r.output

    png = tmp_path / "four.png"
    runs = [str(tmp_path / "s1"), str(tmp_path / "s2")]
    r = runner.invoke(app, ["plot", *runs, "-o", str(png), "-m", "loss", "-m", "lr", "-m", "bleu", "-m", "exact_match"])
    assert r.exit_code == 0, r.output
    with Image.open(png) as im:
        assert im.size == (round(5.5 * 2 * 110), round(4.2 * 2 * 110))  # 2 x 2, not one 4-panel row
    assert value_range("valid_bleu") == (0.0, 100.0) and value_range("valid_exact_match") == (0.0, 1.0)
    assert value_range("loss")[0] == 0.0


def test_jsonl_keys_can_be_dropped_and_data_show_reads_fields(tmp_path):
    """A JSON Lines key no field reads can be dropped (`-`, as a TSV's `-` column), in data.fields and in
    `data show --field`; `data show` also takes a TSV's --columns."""
    path = tmp_path / "d.jsonl"
    path.write_text('{"q": "jump twice", "a": "JUMP JUMP", "id": 1}\n{"q": "walk", "a": "WALK", "id": 2}\n')
    r = runner.invoke(app, ["data", "show", str(path), "--field", "source=q", "--field", "target=a"])
    assert r.exit_code != 0 and "unknown key 'id'" in str(r.exception) and "'-'" in str(r.exception)
    r = runner.invoke(app, ["data", "show", str(path), "--field", "source=q", "--field", "target=a", "--field", "-=id"])
    assert r.exit_code == 0, r.output
    assert "2 examples" in r.stdout and "jump twice" in r.stdout and "JUMP JUMP" in r.stdout
    tsv = tmp_path / "d.tsv"
    tsv.write_text("7\tjump twice\tJUMP JUMP\n")
    r = runner.invoke(app, ["data", "show", str(tsv), "--columns", "-,source,target"])
    assert r.exit_code == 0 and "jump twice" in r.stdout


def test_data_show_prints_the_context_of_a_context_aware_dataset():
    """Issue 55.10: `data show ctx-commands` left out the context column."""
    from structseq.data.registry import load_dataset

    first = load_dataset("ctx-commands", "train")[0]
    r = runner.invoke(app, ["data", "show", "ctx-commands", "-n", "1"], env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    header = next(line for line in r.stdout.splitlines() if "source" in line)
    assert "context" in header and first.context[0] in r.stdout
