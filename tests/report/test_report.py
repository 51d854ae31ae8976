"""`structseq report` (structseq.report): each kind of table on a few records written here, a cell checked
against values worked out by hand, independent of the records in results/. The kinds with tests of their own in
tests/repo/test_scripts.py: results (diverged seeds, pooled BLEU, old beam search, per category), supertag, gpu,
bench (search) and context (through `tables.update`)."""

import importlib
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from structseq import report
from structseq.cli import app
from structseq.errors import StructseqError
from structseq.metrics.significance import format_mean_and_sd, format_mean_sd
from tests.fixtures.cli_run import one_line_error, run_main


def _write(path, data) -> str:
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _scale_record(path: str, workers: int, shards, stages: dict, **extra) -> dict:
    return {
        "path": path,
        "sentences": 1000,
        "pool_sentences": 1000,
        "workers": workers,
        "shards": shards,
        "stages": {k: {"seconds": s, "cpu_seconds": c, "peak_rss_mib": m} for k, (s, c, m) in stages.items()},
        "atoms_per_n": {"1": 10, "2": 1500},
        "load_before": [0.5, 0, 0],
        "load_after": [1.5, 0, 0],
        **extra,
    }


def test_compose_scale_groups_stages_and_compares_cpu_with_the_in_memory_run(tmp_path):
    memory = _scale_record(
        "memory",
        1,
        None,
        {"read train": (1, 2, 100), "dictionary": (3, 4, 200), "degree": (0.5, 1, 50), "top-K": (0.5, 1, 50)},
    )
    sharded = _scale_record(
        "sharded",
        2,
        4,
        {
            "train ingest": (2, 4, 80),
            "count n=1": (1, 4, 90),
            "pool ingest": (1, 2, 70),
            "degree": (1, 2, 60),
            "top-K": (1, 2, 60),
        },
        peak_rss_mib_main=30,
    )
    records = tmp_path / "scale.jsonl"
    records.write_text("\n".join(json.dumps(r) for r in (sharded, memory)) + "\n", encoding="utf-8")
    table = report.render(["compose-scale", str(records)])
    # CPU 2+4+1+1 = 8 s in memory, 4+4+2+2+2 = 14 s sharded: 1.75x, 14e6 / 2000 sentences = 7000 µs each;
    # ingest and counts are the dictionary (3.0 s), the pool's ingest is reading (1.0 s)
    assert (
        "| 1e3 + 1e3 | in memory | 1 | - | 1 | 1.0 | 3.0 | 0.5 | 0.5 | 5.0 | 8.0 | 4000.0 | 1.00x | 200 | - |" in table
    )
    assert (
        "| 1e3 + 1e3 | sharded, local | 2 | 4 | 1 | 1.0 | 3.0 | 1.0 | 1.0 | 6.0 | 14.0 | 7000.0 | 1.75x | 90 / 30 | - "
        "| 1,510 | 0.5 → 1.5 |" in table
    )
    assert table.index("in memory") < table.index("sharded, local")  # the in-memory run first
    # 0.007 CPU s a sentence: 2e8 sentences on 2 workers = 194.44 h, 2e9 on 160 = 24.31 h, on 1600 = 2.43 h
    extra = report.render(["compose-scale", str(records), "--extrapolate"])
    assert "| 1e3 + 1e3, 2 worker(s) | sharded, local | 7000.0 | 194.44 h | 24.31 h | 2.43 h |" in extra


def test_compose_scale_shows_the_median_of_repeated_runs_and_the_tree_peak(tmp_path):
    """Three runs of one setting are one row: the run whose total stage time is the median (7 s of 5, 7, 20),
    with its own CPU and tree peak, and the count 3."""
    runs = [
        _scale_record("sharded", 1, 4, {"degree": (total, total / 2, 10)}, peak_tree_pss_mib=peak)
        for total, peak in ((20, 900), (5, 700), (7, 800))
    ]
    records = tmp_path / "scale.jsonl"
    records.write_text("\n".join(json.dumps(r) for r in runs) + "\n", encoding="utf-8")
    table = report.render(["compose-scale", str(records)])
    assert (
        "| 1e3 + 1e3 | sharded, local | 1 | 4 | 3 | 0.0 | 0.0 | 7.0 | 0.0 | 7.0 | 3.5 | 1750.0 | n/a | 10 | 800 |"
        in table
    )
    assert table.count("sharded, local") == 1
    resumed = _scale_record("sharded", 2, 8, {"degree": (1, 1, 10)})
    resumed["stages"]["degree"]["resumed"] = 3
    records.write_text(json.dumps(resumed) + "\n", encoding="utf-8")
    assert "sharded, local (resumed 3 tasks: partial times)" in report.render(["compose-scale", str(records)])
    assert "sharded" not in report.render(["compose-scale", str(records), "--extrapolate"])  # not extrapolated


def test_ops_compares_counts_per_model_and_names_the_commands(tmp_path):
    before = _write(
        tmp_path / "a.json",
        {
            "command": "count_ops a",
            "rows": [{"model": "lstm", "ops_per_update": 1200}, {"model": "tf", "ops_per_update": 900}],
        },
    )
    after = _write(tmp_path / "b.json", {"command": "count_ops b", "rows": [{"model": "lstm", "ops_per_update": 600}]})
    table = report.render(["ops", "ops", f"before={before}", f"after={after}"])
    assert "| model | before | after | before / after |" in table
    assert "| lstm | 1,200 | 600 | 2.00 |" in table and "| tf | 900 |  |  |" in table  # a missing model: blank
    assert table.endswith("Commands: before: `count_ops a`; after: `count_ops b`.")
    with pytest.raises(StructseqError, match="LABEL=FILE"):
        report.render(["ops", "ops", before])
    row = {
        "data": "cogs",
        "max_tokens": 4096,
        "rule": "sorted",
        "batches_per_epoch": 12.4,
        "duplicate_only_batches": 0.25,
        "worst_share": 0.5,
        "copies_in_duplicate_batches": 0.8,
        "padding_efficiency": 0.912,
        "padding_efficiency_static": 0.75,
        "shapes_per_epoch": 7,
    }
    buckets = report.render(["ops", "buckets", _write(tmp_path / "k.json", {"rows": [row]})])
    assert "| cogs | 4,096 | sorted | 12 | 25.0% | 0.50 | 80% | 0.91 | 0.75 | 7 |" in buckets


def test_context_attention_rows_then_the_papers(tmp_path):
    stats = {
        "run": "runs/ctx/seq-s1",
        "split": "test",
        "examples": 5,
        "layers": 3,
        "source_attention_on_context": 0.1234,
        "context_attention_on_source": 0.5,
        "attention_in_window": 0.25,
        "window": 8,
    }
    lines = report.render(["context", "--attention", _write(tmp_path / "a.json", stats)]).splitlines()
    assert lines[2] == "| `seq-s1` | test | 5 | 3 | 0.123 | 0.500 | 0.250 (8) |"
    assert lines[3].startswith("| paper: sequential baseline (ELI5) | test |")


def test_context_runs_mean_and_sd_per_split_in_percent(tmp_path):
    def rec(split, em, seed):
        return {
            "config": "c/seq.yaml",
            "overrides": [],
            "split": split,
            "seed": seed,
            "metrics": {"exact_match": {"score": em}},
        }

    records = tmp_path / "r.jsonl"
    rows = [rec("test", 0.5, 1), rec("test", 0.7, 2), rec("longer", 0.1, 1)]
    records.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    # test: 50 and 70 -> 60.0 ± 14.1 (sample sd 14.14); longer: one seed, no sd
    assert report.render(["context", str(records)]).splitlines()[2] == "| seq | - | 2 | 60.0 ± 14.1 | 10.0 | - | - |"


def test_cter_table_from_the_validation_numbers(monkeypatch):
    import structseq.metrics

    v = {
        "subsets": {"a": {"precision": 0.5, "recall": 0.25, "agreement": 0.75}},
        "overall": {"precision": 1.0, "recall": 0.5, "agreement": 0.9, "n": 1234},
        "published": {"precision": 0.8, "recall": 0.7},
        "cter": {"ours": {"instance": 0.1, "aggregate": 0.2}, "human": {"instance": 0.15, "aggregate": 0.25}},
        "signature": "cter|sig",
    }
    monkeypatch.setattr(structseq.metrics, "validate_against_human", lambda root: v)
    table = report.render(["cter"])
    assert "| a | 50.00% | 25.00% | 75.00% |" in table and "| all | **100.00%** | **50.00%** | 90.00% |" in table
    assert "| reference tool (CoGnition README) | 80.00% | 70.00% | |" in table
    assert "On those 1,234 outputs our CTER gives instance 10.00% / aggregate 20.00%" in table


def test_lists_show_a_builtin_metric_with_its_scale_and_direction_and_leave_out_the_rest(tmp_path, monkeypatch):
    """A metric registered by a module of the package is listed (its first doc paragraph, scale, direction); one
    registered elsewhere (a plugin, this test) is not. The lists leave the process's environment as it was:
    they used to delete $STRUCTSEQ_PLUGINS, in the caller's process since the tables render in-process."""
    from structseq.registry import METRICS, discover, register_metric

    def _rate(inputs):
        """A rate for this test.

        Not in the table: only the first paragraph is."""

    _rate.__module__ = "structseq.metrics.w46_report"  # as a built-in module would define it
    register_metric("w46_report_rate", scale="percent", higher_is_better=False)(_rate)
    register_metric("w46_plugin_rate")(lambda inputs: None)  # defined here, in a test module: a plugin's place
    discover()  # loaded now: the variable set below is not read again
    monkeypatch.setenv("STRUCTSEQ_PLUGINS", "w46_not_imported")
    try:
        rows = report.render(["lists", "metrics"]).splitlines()
        doc = tmp_path / "doc.md"
        doc.write_text("<!-- generated: structseq report lists metrics -->\nx\n<!-- /generated -->\n")
        assert report.main(["tables", "--check", "--root", str(tmp_path), "doc.md"]) == 1  # x is stale
    finally:
        METRICS.remove("w46_report_rate")
        METRICS.remove("w46_plugin_rate")
    assert "| `w46_report_rate` | percent | no | A rate for this test. |" in rows
    assert rows[:2] == ["| metric | scale | higher is better | what it measures |", "|---|---|---|---|"]
    assert not any("w46_plugin_rate" in row for row in rows) and "| `exact_match` |" in "\n".join(rows)
    assert os.environ["STRUCTSEQ_PLUGINS"] == "w46_not_imported"


def test_bench_models_table_and_the_load_average(tmp_path):
    train = {"parameters": 2.5e6, "tokens_per_s": 1234.4, "s_per_update": 0.5, "peak_rss_mb": 300, "mfu": 0.12}
    d = {
        "machine": {"load_avg_start": [0.25, 0, 0], "load_avg_end": [2.0, 0, 0]},
        "models": {
            "lstm": {"train": {**train, "mfu_non_padding": 0.2}, "decode": {"beam1": {"sentences_per_s": 9.87}}}
        },
    }
    table = report.render(["bench", "models", _write(tmp_path / "m.json", d)])
    assert "| lstm (2.5M params) | 1234 | 0.50 | 300 MB | 0.12 | 0.20 | 9.9 | - |" in table
    assert table.endswith("\n\nLoad average (1 min) before -> after: 0.2 -> 2.0.")


def test_bench_commits_shows_cpu_second_ratios_where_recorded(tmp_path):
    """A record with per-CPU-second ratios gets them in their own column; an older one without shows '-'."""
    cfg = "configs/a.yaml"
    old = {"load_before": [1, 0, 0], "load_after": [2, 0, 0],
           "configs": {cfg: {"old_tok_s": [100, 200], "new_tok_s": [110, 180], "old_median": 150, "new_median": 145,
                             "ratio_median": 1.0}}}  # fmt: skip
    new = {**old, "configs": {cfg: {**old["configs"][cfg], "cpu_ratios": [1.02, 0.98], "cpu_ratio_median": 1.0}}}
    table = report.render(
        ["bench", "commits", f"before={_write(tmp_path / 'a.json', old)}", f"after={_write(tmp_path / 'b.json', new)}"]
    )
    assert "| before | `a.yaml` | 150 | 145 | 1.00 (1.10, 0.90) | - |" in table
    assert "| after | `a.yaml` | 150 | 145 | 1.00 (1.10, 0.90) | 1.00 (1.02, 0.98) |" in table
    only_old = report.render(["bench", "commits", f"before={_write(tmp_path / 'c.json', old)}"])
    assert "per CPU s" not in only_old


def test_every_kind_is_a_module_with_arguments_and_a_renderer():
    """The registry is the one list: each kind's module exists and has both hooks; `tables` is not a kind."""
    assert "tables" not in report.KINDS
    for name, (module, help) in report.KINDS.items():
        mod = importlib.import_module(f"structseq.report.{module}")
        assert callable(mod.command) and callable(mod.render) and help, name
    with pytest.raises(StructseqError, match="invalid choice"):  # a table, not the documents
        report.render(["tables"])


def test_the_cli_prints_what_render_returns_and_errors_are_one_line(tmp_path, monkeypatch, capsys):
    records = tmp_path / "r.jsonl"
    rec = {
        "config": "c/seq.yaml",
        "overrides": [],
        "split": "test",
        "seed": 1,
        "metrics": {"exact_match": {"score": 0.25}},
    }
    records.write_text(json.dumps(rec) + "\n{broken\n", encoding="utf-8")
    one_line_error(*run_main(monkeypatch, capsys, "report", "context", records), f"{records}:2: not a JSON record")
    records.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    r = CliRunner().invoke(app, ["report", "context", str(records)])
    assert r.exit_code == 0 and r.output == report.render(["context", str(records)]) + "\n"


def _curve_records(tmp_path) -> list[str]:
    """A final record and a learning-curve point of one run: `structseq report results` arguments that plot."""

    def rec(seed, em, **extra):
        return {
            "config": "configs/scan-jump/lstm-256.yaml",
            "overrides": [],
            "split": "test",
            "seed": seed,
            "run_dir": f"runs/s{seed}",
            "steps": 100,
            "train_wall_s": 60.0,
            "eval_wall_s": 1.0,
            "metrics": {k: {"score": em} for k in ("exact_match", "token_accuracy", "bleu")},
            **extra,
        }

    final, curve = tmp_path / "r.jsonl", tmp_path / "c.jsonl"
    final.write_text(json.dumps(rec(1, 0.5)) + "\n", encoding="utf-8")
    curve.write_text(json.dumps(rec(1, 0.25, step=50)) + "\n", encoding="utf-8")
    return ["results", str(final), "--curve", str(curve), "--curve-only"]


def test_a_plot_is_written_atomically_and_leaves_the_table_unchanged(tmp_path):
    png = tmp_path / "docs" / "curve.png"
    args = _curve_records(tmp_path)
    with_plot = report.render([*args, "--plot", str(png)])
    assert (
        with_plot == report.render(args)
        and "| `configs/scan-jump/lstm-256.yaml` | test | 1 | 0.250 | 0.500 |" in with_plot
    )
    assert png.read_bytes().startswith(b"\x89PNG")
    assert [p.name for p in png.parent.iterdir()] == ["curve.png"]  # no temporary file, no manifest in docs/


def test_the_cli_names_the_plot_it_wrote_on_stderr_and_a_bare_name_gets_png(tmp_path, capsys):
    """As results_table.py did: `plot: FILE` once the figure is written (on stderr: stdout is the table), and a
    `--plot` name without a suffix is a PNG named with `.png` added, as matplotlib's savefig(name) wrote it."""
    args = _curve_records(tmp_path)
    table = report.render(args)
    capsys.readouterr()
    assert report.main([*args, "--plot", str(tmp_path / "docs" / "curve")]) == 0
    out, err = capsys.readouterr()
    png = tmp_path / "docs" / "curve.png"
    assert out == table + "\n" and err == f"plot: {png}\n"
    assert png.read_bytes().startswith(b"\x89PNG") and not (tmp_path / "docs" / "curve").exists()
    assert report.main(args) == 0 and capsys.readouterr().err == ""  # no figure, no line


def test_a_documents_command_writes_its_plot_only_under_the_root(tmp_path, capsys):
    """What a document says does not choose where a file goes: `structseq report tables` refuses a block whose
    `--plot` (however abbreviated) is outside `--root`, naming the block's line, with or without --check, and
    writes nothing; under the root the plot is written. A user's own `structseq report --plot` goes anywhere."""
    from structseq.report import tables

    root = tmp_path / "repo"
    root.mkdir()
    args = [Path(a).name if a.endswith(".jsonl") else a for a in _curve_records(root)]
    outside = tmp_path / "outside" / "x.png"
    doc = root / "doc.md"
    plots = (f"--plot {outside}", "--plot ../outside/x.png", f"--plot={outside}")
    commands = [
        *(f"structseq report {' '.join(args)} {plot}" for plot in (*plots, "--plo ../outside/x.png")),
        "structseq report supertag . --out ../outside/numbers.json",  # a kind's other output
        *(f"python scripts/w46_none.py {plot}" for plot in plots),  # refused before the script would run
    ]
    for command in commands:
        doc.write_text(f"text\n<!-- generated: {command} -->\nx\n<!-- /generated -->\n", encoding="utf-8")
        for check in (True, False):
            with pytest.raises(StructseqError, match="doc.md:2: .*writes only under the repository root"):
                tables.update(doc, check=check, root=root)
    assert not outside.parent.exists()
    command = f"structseq report {' '.join(args)} --plot docs/x.png"
    doc.write_text(f"<!-- generated: {command} -->\n<!-- /generated -->\n", encoding="utf-8")
    capsys.readouterr()
    assert tables.update(doc, check=False, root=root) == [f"doc.md:1 {command}"]
    assert "plot: docs/x.png" in capsys.readouterr().err
    assert (root / "docs" / "x.png").read_bytes().startswith(b"\x89PNG")
    assert report.main([*_curve_records(root), "--plot", str(outside)]) == 0 and outside.is_file()


def test_mean_and_sd_are_formatted_in_one_place():
    assert format_mean_sd([0.5, 0.7]) == "0.600 ± 0.141" and format_mean_sd([0.5], 1) == "0.5"
    assert format_mean_and_sd(0.6, 0.1414, 2, pm=r"$\pm$") == r"0.60 $\pm$ 0.14"
    assert format_mean_and_sd(0.6, None) == "0.600"


#: a command per kind (and per table of `bench`, `ops`, `gpu`) on records that it reads from files: JSONL (JSON
#: lines), JSON (one document), DIR (a folder of JSON documents); `lists` and `cter` read no records file
RECORD_COMMANDS = [
    ("results", "JSONL"),
    ("context", "JSONL"),
    ("context", "--attention JSON"),
    ("compose-scale", "JSONL"),
    ("supertag", "DIR"),
    ("gpu", "train DIR"),
    ("gpu", "decode DIR"),
    ("gpu", "reproduce DIR"),
    ("gpu", "ab --a DIR --b DIR"),
    ("mutants", "JSON"),
    ("ops", "ops a=JSON"),
    ("ops", "buckets JSON"),
    ("grammar", "JSON"),
    *(("bench", f"{k} a=JSON") for k in ("fairseq-train", "dangle-formulations", "search", "commits")),
    *(
        ("bench", f"{k} JSON")
        for k in ("models", "lexicon", "dangle-intervals", "dangle-flops", "decode-fairseq", "lstm", "profile")
        + ("compile", "context")
    ),
]


def _record_files(folder, text: str):
    """JSONL, JSON and DIR (a supertag evaluation and the gpu sections) holding `text`."""
    folder.mkdir()
    (folder / "d").mkdir()
    sections = ("gemm", "train", "decode", "progress", "device")
    for name in ("r.jsonl", "r.json", "d/tree-s1-beam1.json", *(f"d/{s}.json" for s in sections)):
        (folder / name).write_text(text + "\n", encoding="utf-8")
    return {"JSONL": folder / "r.jsonl", "JSON": folder / "r.json", "DIR": folder / "d"}


@pytest.mark.parametrize("kind,words", RECORD_COMMANDS, ids=[f"{k} {w}" for k, w in RECORD_COMMANDS])
def test_a_record_without_the_keys_or_not_an_object_is_one_line_naming_the_file(
    kind, words, tmp_path, monkeypatch, capsys
):
    """A record `{}` (`{"learners": [{}]}` for bench lexicon, whose sections are optional) and a record `[1]`:
    one line `error: FILE[:LINE]: ...`, exit 2, where a KeyError or TypeError's traceback came before."""
    empty = '{"learners": [{}]}' if words.startswith("lexicon") else "{}"
    for text, what in ((empty, "has no key"), ("[1]", "expected a JSON object, got an array")):
        files = _record_files(tmp_path / what.split()[0], text)
        argv, shown = [], []
        for w in words.split():
            label, sep, name = w.rpartition("=")
            argv.append(f"{label}{sep}{files[name]}" if name in files else w)
            shown += [files[name]] if name in files else []
        code, err = run_main(monkeypatch, capsys, "report", kind, *argv)
        one_line_error(code, err, str(shown[0]), what)
        if shown[0].suffix == ".jsonl":
            assert f"{shown[0]}:1: " in err  # and the line


def test_record_commands_cover_every_kind_and_table():
    from structseq.report import bench

    assert {k for k, _ in RECORD_COMMANDS} == set(report.KINDS) - {"lists", "cter"}
    assert {w.split()[0] for k, w in RECORD_COMMANDS if k == "bench"} == set(bench.KINDS)


def test_a_record_of_another_shape_is_one_line_naming_the_kind_and_its_files(tmp_path, monkeypatch, capsys):
    """A value of the wrong type (`metrics` a list) trips the renderer with a TypeError: `structseq report` and
    a document's block say so in one line naming the kind and the input file (and the block's line)."""
    from structseq.report import tables

    rec = {"config": "c.yaml", "overrides": [], "split": "test", "seed": 1, "metrics": [0.5]}
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    code, err = run_main(monkeypatch, capsys, "report", "context", records)
    one_line_error(code, err, f"structseq report context: {records}: a record is not of the shape", "TypeError")
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- generated: structseq report context r.jsonl -->\nx\n<!-- /generated -->\n", encoding="utf-8")
    with pytest.raises(StructseqError, match=r"doc.md:1: .* failed: structseq report context: r.jsonl: a record"):
        tables.update(doc, check=True, root=tmp_path)


def _supertag_record(acc: float, beam: int) -> dict:
    """An evaluation JSON of `structseq evaluate` on a supertagger (greedy, or beam 5 with its beta curve)."""
    m = {k: {"score": acc} for k in ("accuracy", "sentence_accuracy")}
    m.update({f"accuracy_{b}": {"score": acc} for b in ("frequent", "uncommon", "rare", "unseen")})
    m.update(unseen_predicted=1, unseen_predicted_correct=0)
    if beam == 5:
        m.update(oracle_accuracy={"score": acc + 5}, multitag=[{"beta": 1.0, "accuracy": acc, "tags_per_word": 1.0}])
    return m


def test_no_report_output_replaces_one_of_its_inputs(tmp_path, monkeypatch, capsys):
    """One rule for every kind's output (`-o/--out`, `--plot`): a file the command read is not replaced, whether
    named (`results r.svg --plot r.svg`) or read from a folder named (`supertag DIR -o DIR/tree-s1-beam1.json`,
    a run folder's evaluation); refused in one line naming both, the file unchanged. Another file in the folder,
    or a new one, is written."""
    evals, runs = tmp_path / "evals", tmp_path / "runs" / "classifier-s1"
    evals.mkdir()
    runs.mkdir(parents=True)
    for k in (1, 5):
        (evals / f"tree-s1-beam{k}.json").write_text(json.dumps(_supertag_record(70.0, k)), encoding="utf-8")
    (runs / "eval-test-beam1.json").write_text(json.dumps(_supertag_record(60.0, 1)), encoding="utf-8")
    named = tmp_path / "r.svg"  # a records file whose name a figure could take
    named.write_text(json.dumps(_record()) + "\n", encoding="utf-8")
    curve = tmp_path / "c.jsonl"
    curve.write_text(json.dumps({**_record(), "step": 50}) + "\n", encoding="utf-8")
    cases = [
        (["supertag", evals, tmp_path / "runs", "-o", evals / "tree-s1-beam1.json"], evals / "tree-s1-beam1.json"),
        (["supertag", evals, tmp_path / "runs", "--out", runs / "eval-test-beam1.json"], runs / "eval-test-beam1.json"),
        (["results", named, "--curve", curve, "--curve-only", "--plot", named], named),
    ]
    for argv, victim in cases:
        before = victim.read_bytes()
        code, err = run_main(monkeypatch, capsys, "report", *argv)
        one_line_error(code, err, f"{victim}: is an input of this command", "would replace it")
        assert victim.read_bytes() == before
    assert run_main(monkeypatch, capsys, "report", "supertag", evals, "-o", evals / "summary.json")[0] == 0
    assert json.loads((evals / "summary.json").read_text())["configs"]["tree"]["1"]["beam1"]["accuracy"]["score"] == 70
    assert run_main(monkeypatch, capsys, "report", "supertag", evals, "-o", evals / "summary.json")[0] == 0  # again


def test_a_record_with_a_nan_score_is_one_line_naming_its_line(tmp_path, monkeypatch, capsys):
    """`report results` on a record whose score is NaN (Python's json reads it; JSON has no such number; no writer
    of the toolkit writes one): one line naming the file and line, exit 2. It used to render `nan` for one seed
    and a statistics traceback for two; Infinity in any kind's JSON record likewise."""
    records = tmp_path / "r.jsonl"
    good, bad = _record(), _record()
    bad.update(seed=2, run_dir="runs/s2")
    bad["metrics"]["exact_match"]["score"] = float("nan")
    for lines, line in (([bad], 1), ([good, bad], 2)):
        records.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
        code, err = run_main(monkeypatch, capsys, "report", "results", records)
        one_line_error(code, err, f"{records}:{line}: not a JSON record (NaN is not a JSON number")
    one = tmp_path / "bench.json"
    one.write_text('{"rows": [{"model": "x", "ops_per_update": -Infinity}]}', encoding="utf-8")
    code, err = run_main(monkeypatch, capsys, "report", "ops", "buckets", one)
    one_line_error(code, err, f"{one}: not valid JSON (-Infinity is not a JSON number")


def _record() -> dict:
    """A `structseq sweep` record of one run."""
    return {
        "config": "configs/scan-jump/lstm-256.yaml",
        "overrides": [],
        "split": "test",
        "seed": 1,
        "run_dir": "runs/s1",
        "steps": 100,
        "train_wall_s": 60.0,
        "eval_wall_s": 1.0,
        "metrics": {k: {"score": 0.5} for k in ("exact_match", "token_accuracy", "bleu")},
    }


def test_every_report_kind_writes_through_the_one_output_rule():
    """A kind writes its `--out`/`--plot` only through `records.write_output` / `records.save_figure`, which hold
    the rule that no output replaces a file the command read: no kind opens a file for writing itself."""
    folder = Path(report.__file__).parent
    own = {"records.py", "tables.py", "confine.py"}  # the rule itself; the documents; the blocks' confinement
    for path in sorted(folder.glob("*.py")):
        if path.name not in own:
            text = path.read_text(encoding="utf-8")
            for call in ("atomic_write(", "atomic_open(", "open(", ".write_text(", ".write_bytes(", "savefig("):
                assert call not in text.replace("fig.savefig(f", ""), (path.name, call)


def test_a_seed_recorded_twice_counts_once(tmp_path, monkeypatch, capsys):
    """Issue 55: records written before the sweep refused `--seeds 1 1`, or two files holding one run, averaged
    a seed twice. A (system, seed) counts once: a repeat with the same scores is left out with a warning naming
    both records, one with other scores is a one-line error naming both."""

    def rec(seed, em, run="runs/x"):
        return {
            "config": "configs/scan-jump/lstm-256.yaml",
            "overrides": ["train.max_steps=100"],
            "split": "test",
            "seed": seed,
            "run_dir": f"{run}-s{seed}",
            "steps": 100,
            "train_wall_s": 60.0 + seed,
            "eval_wall_s": 1.0,
            "metrics": {k: {"score": em} for k in ("exact_match", "token_accuracy", "bleu")},
        }

    a, same, other = tmp_path / "a.jsonl", tmp_path / "same.jsonl", tmp_path / "other.jsonl"
    a.write_text(json.dumps(rec(1, 0.5)) + "\n" + json.dumps(rec(2, 0.7)) + "\n", encoding="utf-8")
    same.write_text(json.dumps(rec(1, 0.5, "runs/again") | {"train_wall_s": 99.0}) + "\n", encoding="utf-8")
    other.write_text("\n" + json.dumps(rec(1, 0.75)) + "\n", encoding="utf-8")
    with pytest.warns(UserWarning, match=rf"{a}:1 and {same}:1: seed 1 of .* recorded twice .*counted once"):
        r = CliRunner().invoke(app, ["report", "results", str(a), str(same)])
    row = f"| test | 1, 2 | {format_mean_sd([0.5, 0.7])} | {format_mean_sd([0.5, 0.7])} |"  # not 0.5 twice
    assert r.exit_code == 0 and row in r.output, r.output
    code, err = run_main(monkeypatch, capsys, "report", "results", a, other)
    one_line_error(code, err, f"{a}:1 and {other}:2", "seed 1", "different scores")


def test_report_is_typer_with_help_for_every_table_and_one_line_usage_errors(tmp_path, monkeypatch, capsys):
    """Issue 55 friction 5: `structseq report` had plain argparse help with developer notes; its commands are
    typer's now, as every other command: `--help` of each (a usage line, the options with their help), and a
    usage error is one line, exit 2 (click printed a usage box)."""
    runner = CliRunner()
    top = runner.invoke(app, ["report", "--help"])
    assert top.exit_code == 0 and "Usage: structseq report [OPTIONS] COMMAND [ARGS]..." in top.output
    assert all(kind in top.output for kind in [*report.KINDS, "tables"]) and "450" not in top.output
    for kind in [*report.KINDS, "tables", "gpu tests", "gpu ab"]:
        r = runner.invoke(app, ["report", *kind.split(), "--help"])
        assert r.exit_code == 0 and f"Usage: structseq report {kind} [OPTIONS]" in r.output, (kind, r.output)
        assert "Options" in r.output and "--help" in r.output and "[[" not in r.output
        assert "--format" in r.output or kind in ("tables", "gpu")
    records = tmp_path / "r.jsonl"
    records.write_text("\n", encoding="utf-8")
    for args, words in (
        (["results", records, "--nope"], ("structseq report results: No such option: --nope", "--help")),
        (["results"], ("structseq report results: Missing argument 'files'",)),
        (["lists", "nosuch"], ("structseq report lists", "'nosuch' is not one of", "metrics")),
        (["gpu", "ab", "--a", tmp_path], ("structseq report gpu ab: Missing option '--b'",)),
        (["--nope"], ("structseq report: No such option: --nope",)),
        (["nosuch"], ("structseq report: argument KIND: invalid choice: 'nosuch'",)),
    ):
        one_line_error(*run_main(monkeypatch, capsys, "report", *args), *words)


def test_supertag_with_no_record_is_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    """`report supertag DIR -o FILE` on a folder holding no evaluation (a parent of the records' folder, an empty
    one) wrote an empty summary with exit 0, over an earlier summary at FILE; it is refused in one line naming the
    folder, FILE unchanged."""
    evals = tmp_path / "evals"
    evals.mkdir()
    for k in (1, 5):
        (evals / f"tree-s1-beam{k}.json").write_text(json.dumps(_supertag_record(70.0, k)), encoding="utf-8")
    summary = tmp_path / "summary.json"
    assert run_main(monkeypatch, capsys, "report", "supertag", evals, "-o", summary)[0] == 0
    before = summary.read_bytes()
    code, err = run_main(monkeypatch, capsys, "report", "supertag", tmp_path, "-o", summary)
    one_line_error(code, err, f"{tmp_path}: no supertagging evaluation")
    assert summary.read_bytes() == before
