"""The reproduction scripts name runs and read records correctly (the tables in RESULTS.md depend on them)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.paths import ROOT


def _sweep():
    """The experiment runner (`structseq sweep`; scripts/reproduce.py is its wrapper)."""
    from structseq.experiments import sweep

    return sweep


def _planner():
    """The reproduction plan (`structseq plan`; scripts/plan.py is its wrapper)."""
    from structseq.experiments import plan

    return plan


def _structseq(*argv) -> int:
    """`structseq ARGV` in this process (the typer app itself: what a test patched stays patched): its exit status."""
    from structseq.cli import app

    return app([str(a) for a in argv], standalone_mode=False) or 0


def _report(*argv) -> str:
    """The Markdown of `structseq report KIND ARGS...` (structseq.report, rendered in this process)."""
    from structseq.report import render

    return render([str(a) for a in argv])


def _load(name: str):
    path = ROOT / "scripts" / f"{name}.py"
    if not path.exists():  # a one-off analysis, archived
        path = ROOT / "scripts" / "analysis" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"scripts_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_run_names_keep_whole_override_values():
    run_name = _sweep().run_name
    cfg = "configs/ctx-commands/alternate.yaml"
    names = {
        run_name(cfg, 1, [o])
        for o in ("model.context_window=8.0", "model.context_logit_scale=2.0", "model.context_window=4.0")
    }
    assert len(names) == 3  # dotted values once all became "-0"
    assert run_name(cfg, 2, ["optim.warmup=120", "model.interval=4"]) == "ctx-commands-alternate-warmup120-interval4-s2"
    assert run_name(cfg, 1, ["train.init_from=runs/maruf-all/seq-s1"]) == "ctx-commands-alternate-init_fromseq-s1-s1"
    # too long for a file name (with the claim's '.lock'): the start, then a digest of the whole name
    long = [f"train.init_from=runs/x/{'a' * 200}", "optim.lr=1.0e-3", f"data.holdout_seed={'1' * 80}"]
    names = {run_name(cfg, s, long) for s in (1, 2)}
    assert len(names) == 2 and all(len(n) == 250 and n.startswith("ctx-commands-alternate-init_froma") for n in names)
    assert run_name(cfg, 1, long[:2]) == f"ctx-commands-alternate-init_from{'a' * 200}-lr1.0e-3-s1"  # fits: as before


def test_supertag_table_reads_records_and_run_directories(tmp_path):
    def ev(acc, beam):
        m = {
            "accuracy": {"score": acc},
            "sentence_accuracy": {"score": 10.0},
            "unseen_predicted": 1,
            "unseen_predicted_correct": 0,
        }
        m.update({f"accuracy_{b}": {"score": acc} for b in ("frequent", "uncommon", "rare", "unseen")})
        if beam == 5:
            m["oracle_accuracy"] = {"score": acc + 5}
            m["multitag"] = [{"beta": 1.0, "accuracy": acc, "tags_per_word": 1.0}]
        return m

    rec = tmp_path / "evals"
    rec.mkdir()
    for s, acc in ((1, 70.0), (2, 72.0)):
        for k in (1, 5):
            (rec / f"tree-s{s}-beam{k}.json").write_text(json.dumps(ev(acc, k)))
    run = tmp_path / "runs" / "classifier-s1"
    run.mkdir(parents=True)
    (run / "eval-test-beam1.json").write_text(json.dumps(ev(60.0, 1)))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "structseq",
            "report",
            "supertag",
            str(rec),
            str(tmp_path / "runs"),
            "-o",
            str(tmp_path / "all.json"),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "| tree (greedy) | 2 | 71.00 ± 1.41 |" in out and "| classifier (greedy) | 1 | 60.00 |" in out
    assert set(json.loads((tmp_path / "all.json").read_text())["configs"]) == {"classifier", "tree"}


def test_feedback_gain_is_the_spectral_radius_of_the_feed_columns():
    """lstm_feedback_gain.py reads rho from the `feed` block of `combine` ([emb; feed; h; context] columns)."""
    import torch

    mod = _load("lstm_feedback_gain")
    E, H = 3, 4
    W = torch.zeros(H, E + 3 * H)
    W[:, :E] = 100.0  # embedding columns: not part of the recurrence
    W[:, E : E + H] = torch.diag(torch.tensor([0.5, -2.5, 1.0, 0.1]))
    W[:, E + H :] = 50.0  # h_t and context columns: not the feed either
    assert abs(mod.feed_radius({"combine.weight": W, "tgt_embed.weight": torch.zeros(7, E)}) - 2.5) < 1e-9


def test_an_interrupted_run_stops_the_whole_sweep(tmp_path, monkeypatch):
    """Ctrl-C / SIGTERM inside one run (its checkpoint saved) must not start the next seed."""
    mod = _sweep()
    started = []

    def one(config, seed, *args):
        started.append(seed)
        return f"run-s{seed}: interrupted at update 7, not recorded{mod.INTERRUPTED}"

    monkeypatch.setattr(mod, "one", one)
    code = _structseq("sweep", "configs/scan-jump/lstm-256.yaml", "--seeds", "1,2,3", "--out", tmp_path / "r.jsonl")
    assert code == 143 and started == [1]


def test_a_diverged_seed_is_recorded_and_listed_not_averaged(tmp_path, monkeypatch):
    """A non-finite training loss ends the run with DivergedError: reproduce.py writes a record per test split
    saying so (the sweep goes on), and `structseq report results` lists the seed as diverged outside the mean."""
    from structseq import api
    from structseq.errors import DivergedError

    mod = _sweep()

    def train(*a, **k):
        raise DivergedError(float("nan"), 2109)

    monkeypatch.setattr(api, "train", train)
    out = tmp_path / "r.jsonl"
    msg = mod.one("configs/scan-jump/lstm-256.yaml", 3, str(tmp_path / "runs"), str(out), [])
    assert "diverged" in msg
    rec = json.loads(out.read_text())
    assert rec["diverged"] == {"step": 2109, "loss": "nan"} and rec["metrics"] is None and rec["split"] == "test"
    good = {
        **rec,
        "seed": 1,
        "diverged": None,
        "run_dir": "runs/x-s1",
        "train_wall_s": 60.0,
        "eval_wall_s": 1.0,
        "metrics": {m: {"score": 0.5} for m in ("exact_match", "token_accuracy", "bleu")},
    }
    with open(out, "a") as f:
        f.write(json.dumps(good) + "\n")
    table = _report("results", str(out), "--per-run")
    assert "| 1 (diverged: 3) | 0.500 |" in table and "diverged at update 2109" in table
    head = _report("results", str(out), "--headline")  # the README's compact table: same mean, seeds counted
    assert "| scan-jump | `lstm` | EM 0.500 | 1 (+1 diverged) | 0.00 (LSTM, A&A 2021) |" in head


def test_results_table_shows_tatoebas_pooled_bleu_and_curves_any_metric(tmp_path):
    """Records with the paper's pooled BLEU get their own table (x 100, paper beside); the curve takes a dotted
    metric path."""

    def rec(seed, full, step=None):
        r = {
            "config": "configs/tatoeba-en-zh/lstm-lex-simple-256.yaml",
            "overrides": [],
            "split": "test",
            "seed": seed,
            "run_dir": f"runs/t-s{seed}",
            "steps": 2500,
            "train_wall_s": 60.0,
            "eval_wall_s": 1.0,
            "metrics": {
                "exact_match": {"score": 0.0},
                "token_accuracy": {"score": 0.1},
                "bleu": {"score": 5.0},
                "pooled_bleu": {"full": {"score": full, "n": 10}, "1-shot": {"score": full / 2, "n": 3}},
            },
        }
        return {**r, "step": step} if step else r

    out, cur = tmp_path / "r.jsonl", tmp_path / "c.jsonl"
    out.write_text("".join(json.dumps(rec(s, v)) + "\n" for s, v in ((1, 0.20), (2, 0.22))))
    cur.write_text(json.dumps(rec(1, 0.05, step=500)) + "\n")
    table = _report("results", str(out), "--curve", str(cur), "--curve-metric", "pooled_bleu.full")
    assert "| 1, 2 | 21.00 ± 1.41 | 10.50 ± 0.71 (3) | 24.35 ± 0.09 / 18.46 ± 0.19 |" in table
    assert "| 1 | 5.00 | 20.00 |" in table  # the curve (x 100): step 500, then the run's own final record


def test_results_table_marks_records_decoded_by_the_old_beam_search(tmp_path):
    """Records flagged `old_beam_search` (beam > 1 before issue 44's fix) get a dagger and one note; others none."""
    base = {"overrides": [], "split": "test", "seed": 1, "steps": 10, "train_wall_s": 60.0, "eval_wall_s": 1.0}
    metrics = {k: {"score": 0.5} for k in ("exact_match", "token_accuracy", "bleu")}
    rows = [
        {**base, "config": "old.yaml", "run_dir": "runs/old", "metrics": metrics, "old_beam_search": True},
        {**base, "config": "new.yaml", "run_dir": "runs/new", "metrics": metrics},
    ]
    out = tmp_path / "r.jsonl"
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = _report("results", str(out))
    assert "| `old.yaml` | test | 1 † |" in table and "| `new.yaml` | test | 1 |" in table
    assert table.count("† decoded with beam > 1 by the beam search before issue 44") == 1


def test_ctx_errors_tells_a_wrong_definition_from_none(tmp_path, capsys):
    ctx = "bip means walk . the robot saw a red box . dax means jump run . zed means look ."
    rows = [
        ("dax", "JUMP RUN", "JUMP RUN"),
        ("dax", "JUMP RUN", "WALK"),
        ("dax", "JUMP RUN", "LOOK"),
        ("dax", "JUMP RUN", "RUN RUN"),
        ("dax twice", "JUMP RUN JUMP RUN", "x"),
        ("walk", "WALK", "WALK"),
    ]
    path = tmp_path / "test.tsv"
    path.write_text(
        "source\treference\thypothesis\tcorrect\tcategory\tcontext\n"
        + "".join(f"{s}\t{r}\t{h}\t0\t\t{ctx}\n" for s, r, h in rows)
    )
    out = _load("ctx_errors").main([str(path)])
    assert out == {
        "single_defined_word_commands": 4,
        "correct": 1,
        "none": 1,
        "other definition, after": 1,
        "other definition, before": 1,
    }


def test_every_generated_table_in_the_documents_matches_its_records():
    """README.md and RESULTS.md tables are the output of the commands their markers name, on the committed
    records: a record added without regenerating (or a table edited by hand) fails here. Run as a user does,
    through the old script name (a wrapper of `structseq report tables --check`)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "update_tables.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_report_tables_rewrites_a_stale_block_and_names_a_bad_command(tmp_path):
    from structseq.errors import StructseqError
    from structseq.report import tables

    rec = {
        "config": "configs/ctx-commands/interleave.yaml",
        "overrides": [],
        "split": "test",
        "seed": 1,
        "metrics": {"exact_match": {"score": 0.25}},
    }
    records = tmp_path / "r.jsonl"
    records.write_text(json.dumps(rec) + "\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "intro\n\n<!-- generated: structseq report context r.jsonl -->\n| old |\n<!-- /generated -->\n\nafter\n"
    )
    assert tables.update(doc, check=True, root=tmp_path) == ["doc.md:3 structseq report context r.jsonl"]
    assert "| old |" in doc.read_text()  # --check changes nothing
    tables.update(doc, check=False, root=tmp_path)  # the command's paths: relative to the root
    text = doc.read_text()
    assert "| interleave | - | 1 | 25.0 | - | - | - |\n<!-- /generated -->\n\nafter\n" in text
    assert text.startswith("intro\n\n<!-- generated: ")
    assert tables.update(doc, check=True, root=tmp_path) == []

    for command, why in (
        ("rm -rf /", "`structseq report KIND ...`"),
        ("structseq report tables", "`structseq report KIND ...`"),  # no block renders documents
        ("structseq report nosuch x", "doc.md:1: `structseq report nosuch x` failed: structseq report: argument KIND"),
        ("structseq report context missing.jsonl", "missing.jsonl: file not found"),
    ):
        doc.write_text(f"<!-- generated: {command} -->\nx\n<!-- /generated -->\n")
        with pytest.raises(StructseqError, match="doc.md:1") as e:
            tables.update(doc, check=True, root=tmp_path)
        assert why in str(e.value)


def test_benchmark_report_flags_changed_outputs_and_asks_for_labels(tmp_path):
    from structseq.errors import StructseqError
    from structseq.report import bench as report

    f = tmp_path / "s.json"
    f.write_text(
        json.dumps(
            {
                "load_before": [0.5, 0, 0],
                "load_after": [1.0, 0, 0],
                "beams": {
                    "1": {"old_median": 100.0, "new_median": 250.0, "ratio_median": 2.5, "same_outputs": True},
                    "5": {"old_median": 20.0, "new_median": 30.0, "ratio_median": 1.5, "same_outputs": False},
                },
            }
        )
    )
    table = report.search([f"LSTM={f}"])
    assert "| LSTM | greedy | 100.0 | 250.0 | 2.50 | equal |" in table
    assert "| LSTM | beam 5 | 20.0 | 30.0 | 1.50 | **differ** |" in table
    assert table.endswith("\n\nLoad average (1 min) before -> after: LSTM: 0.5 -> 1.0.")
    with pytest.raises(StructseqError, match="LABEL=FILE"):
        report.search([str(f)])  # an unlabelled file


def _plan(tmp_path, text: str) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    return path


PLAN = """cells:
  - id: pair
    title: "LSTM vs + Simple"
    configs: [configs/scan-jump/lstm-lex-simple-256.yaml, configs/scan-jump/lstm-256.yaml]
    seeds: [1, 2, 3]
    set: ["optim.lr=2.0e-3"]
    out: r.jsonl
    runs: runs
    curve: {every: 500, seeds: [1]}
  - id: sweep
    title: "intervals"
    configs: [configs/scan-jump/rdangle-sep-cpu.yaml]
    seeds: [1]
    sweep: {model.interval: [8, 1]}
    out: other.jsonl
    runs: runs
    like: pair
  - id: new
    title: "nothing like it recorded"
    configs: [configs/scan-jump/dangle-cpu.yaml]
    seeds: [1]
    out: other.jsonl
    runs: runs
"""


def _rec(config, seed, train, evals, overrides=("optim.lr=2.0e-3",)):
    return [
        json.dumps(
            {
                "config": config,
                "overrides": list(overrides),
                "seed": seed,
                "split": s,
                "run_dir": f"runs/{Path(config).stem}-s{seed}",
                "train_wall_s": train,
                "eval_wall_s": e,
            }
        )
        for s, e in evals.items()
    ]


def test_plan_status_counts_recorded_runs_and_estimates_the_rest_from_them(tmp_path, monkeypatch):
    """A run is recorded when any record has its (config, overrides in any order, seed); its cost is training plus
    every evaluation, curve points included; a missing run costs the median of its config's recorded runs, else
    of its cell's (marked *), else of its `like` cell's (*), these scaled by the ratio of `train.max_steps`, else it
    is unknown (?)."""
    plan = _planner()
    monkeypatch.chdir(ROOT)
    path = _plan(
        tmp_path,
        PLAN.replace("out: r.jsonl", f"out: {tmp_path / 'r.jsonl'}").replace(
            "out: other.jsonl", f"out: {tmp_path / 'o.jsonl'}"
        ),
    )
    simple, lstm = "configs/scan-jump/lstm-lex-simple-256.yaml", "configs/scan-jump/lstm-256.yaml"
    lines = (
        _rec(simple, 1, 3000, {"test": 300, "dev": 300})
        + _rec(simple, 2, 7200, {"test": 0})
        + _rec(lstm, 1, 1800, {"test": 0}, overrides=("optim.lr=2.0e-3", "model.x=1"))
        + [json.dumps({**json.loads(_rec(lstm, 3, 99999, {"test": 0})[0]), "diverged": {"step": 9}})]
    )
    # other overrides: not this run; a diverged run: recorded (not missing), not a finished seed, no cost sample
    (tmp_path / "r.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "r-curve.jsonl").write_text(
        json.dumps({"run_dir": f"runs/{Path(simple).stem}-s1", "step": 500, "split": "test", "eval_wall_s": 3600})
        + "\n"
    )
    cells = plan.load_plan(str(path))
    done = plan.read_records(cells)
    assert done[plan._key(simple, ["optim.lr=2.0e-3"], 1)] == {"cost": 3000 + 600 + 3600, "diverged": False}
    rows = {r["cell"].id: r for r in plan.status(cells, done)}
    pair = rows["pair"]
    assert (pair["done"], pair["planned"], pair["complete"], pair["diverged"]) == (3, 6, [], [3])
    # + Simple s3: median(7200, 7200) s = 2 h; LSTM s1, s2 (no finished run of its own): the cell's median, 2 h each
    assert abs(pair["hours"] - 6.0) < 1e-9 and pair["rough"]
    # like: pair, whose runs (2 h median) train 2,500 updates; rdangle-sep-cpu.yaml trains 1,000: 2 x 2 h x 0.4
    assert abs(rows["sweep"]["hours"] - 1.6) < 1e-9 and rows["sweep"]["planned"] == 2
    assert rows["new"]["hours"] is None
    text = plan.render(list(rows.values()), "p.yaml")
    assert "| LSTM vs + Simple (`pair`) | 1-3 | none (diverged: 3) | 3 / 6 | 6.0* |" in text
    assert "| nothing like it recorded (`new`) | 1 | none | 0 / 1 | ? |" in text


def test_plan_status_prices_an_unrecorded_config_from_its_probe(tmp_path, monkeypatch):
    """A probe of the exact (config, overrides) prices its missing runs (marked ~) before any rough estimate; a
    config with records keeps their median; --probe skips variants already priced."""
    plan = _planner()
    monkeypatch.chdir(ROOT)
    path = _plan(
        tmp_path,
        PLAN.replace("out: r.jsonl", f"out: {tmp_path / 'r.jsonl'}").replace(
            "out: other.jsonl", f"out: {tmp_path / 'o.jsonl'}"
        ),
    )
    probes = tmp_path / "probes.jsonl"
    probes.write_text(
        "\n".join(
            json.dumps({"config": "configs/scan-jump/dangle-cpu.yaml", "overrides": [], "cost_s": c})
            for c in (900, 1800)
        )
        + "\n"
    )  # the newest wins
    cells = plan.load_plan(str(path))
    rows = {r["cell"].id: r for r in plan.status(cells, plan.read_records(cells), plan.read_probes(str(probes)))}
    assert abs(rows["new"]["hours"] - 0.5) < 1e-9 and rows["new"]["probed"] and not rows["new"]["rough"]
    assert rows["sweep"]["hours"] is None  # other overrides of the sweep: not priced by that probe
    assert "| nothing like it recorded (`new`) | 1 | none | 0 / 1 | 0.5~ |" in plan.render(list(rows.values()), "p")
    monkeypatch.setattr(
        plan.pricing,
        "probe",
        lambda *a, **k: {**dict(zip(("config", "seed", "overrides"), a)), "s_per_update": 1.0, "cost_s": 60.0},
    )
    assert plan.probe(cells, ["new", "sweep"], str(probes), (1, 2), 1) == 0
    added = [json.loads(x) for x in probes.read_text().splitlines()[2:]]  # `new` was priced already
    assert [(r["config"], r["overrides"]) for r in added] == [
        ("configs/scan-jump/rdangle-sep-cpu.yaml", ["model.interval=8"]),
        ("configs/scan-jump/rdangle-sep-cpu.yaml", ["model.interval=1"]),
    ]


def test_plan_reports_how_probes_compared_with_the_runs_recorded_after_them():
    plan = _planner()
    a, b = ("a.yaml", ()), ("b.yaml", ("x=1",))
    done = {
        (*a, 1): {"cost": 100.0, "diverged": False},
        (*a, 2): {"cost": 300.0, "diverged": False},
        (*b, 1): {"cost": 999.0, "diverged": True},
    }  # a diverged run stopped early: no cost sample
    assert plan.probe_accuracy(done, {a: 400.0, b: 10.0}) == (
        "Probes against the runs recorded since: recorded / probed cost 0.50 (median over 1 configs, range 0.50-0.50)."
    )
    assert plan.probe_accuracy(done, {b: 10.0}) == ""


def test_probe_extrapolates_a_short_run_and_decodes_to_the_reference_lengths(tmp_path):
    """reproduce.probe on a tiny real run: per-update time from two checkpoints, decoding timed on sampled batches
    forced to their reference lengths (</s> suppressed), the curve's checkpoints priced as extra decodings."""
    import random

    import torch

    from structseq import api
    from structseq.decode import decode
    from structseq.experiments import probe as pricing

    config = str(ROOT / "configs/scan-jump/lstm-256.yaml")
    over = [
        "train.max_steps=100",
        "train.valid_every=50",
        "model.hidden_dim=8",
        "model.embed_dim=8",
        "optim.batch_size=4",
        "decode.batch_size=1000",
    ]
    rec = pricing.probe(config, 1, over, steps=(1, 3), batches=2, curve_every=50)
    ev = rec["eval"]["test"]
    assert rec["s_per_update"] > 0 and rec["max_steps"] == 100 and rec["curve_points"] == 1
    assert ev["forced_length"] and ev["batches"] == -(-ev["examples"] // 1000) and len(ev["timed"]) == 2
    assert abs(ev["seconds"] - sum(ev["batch_s"]) / 2 * ev["batches"]) < 0.1
    assert abs(rec["cost_s"] - (rec["s_per_update"] * 100 + 2 * ev["seconds"])) < 0.2
    api.train(config, tmp_path / "run", overrides=over[2:] + ["train.max_steps=1"], show_progress=False)
    run = api.load_run(tmp_path / "run")
    _, _, examples = run.load_split("test")
    part = random.Random(0).sample(examples, 5)
    inputs = run.task.decode_inputs(part, run.vocabs)
    wanted = torch.tensor([len(e.target) + 1 for e in part])
    assert [len(t) for t in decode(pricing._NoEos(run.model), inputs, wanted).tokens] == wanted.tolist()


def test_probe_of_an_empty_test_split_is_one_error_naming_it(tmp_path):
    """Review: a probe whose test split holds no example divided by zero (ZeroDivisionError); now a ConfigError
    naming the config and the split."""
    import pytest
    import yaml

    from structseq.errors import ConfigError
    from structseq.experiments import probe as pricing
    from tests.fixtures.toy import toy_config, toy_tsv

    data, empty = toy_tsv(tmp_path, n=20), tmp_path / "empty.tsv"
    empty.write_text("")
    d = toy_config(data, max_steps=5, valid_every=0).to_dict()
    d["data"]["test"] = [str(empty)]
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(d))
    with pytest.raises(ConfigError, match=f"{config}'s test split {empty} holds no example"):
        pricing.probe(str(config), 1, [], steps=(1, 2), batches=1)


def test_probe_decodes_with_the_configs_processors_and_grammar(tmp_path):
    """Review: the probe built its strategy without decode.processors, decode.grammar or the strategy's own keys,
    so it timed another decoding than the run's; now as `decode.batched.run` builds it: a grammar none of whose
    words the toy model outputs is refused there too (it was ignored)."""
    import pytest
    import yaml

    from structseq.errors import ConfigError
    from structseq.experiments import probe as pricing
    from tests.fixtures.toy import toy_config, toy_tsv

    d = toy_config(toy_tsv(tmp_path, n=20), max_steps=5, valid_every=0).to_dict()
    d["model"] = {"arch": "lstm", "embed_dim": 8, "hidden_dim": 8, "layers": 1, "dropout": 0.0}
    config = tmp_path / "cfg.yaml"
    config.write_text(yaml.safe_dump(d))
    assert pricing.probe(str(config), 1, [], steps=(1, 2), batches=1)["eval"]
    with pytest.raises(ConfigError, match="grammar 'scan'"):
        pricing.probe(str(config), 1, ["decode.grammar=scan"], steps=(1, 2), batches=1)


def test_plan_errors_name_the_file_and_cell(tmp_path, monkeypatch):
    import pytest

    from structseq.errors import ConfigError

    plan = _planner()
    monkeypatch.chdir(ROOT)
    for bad, words in (
        (PLAN.replace("    like: pair", "    like: nope"), "names no cell"),
        (PLAN.replace("seeds: [1, 2, 3]", "seed: [1]"), "unknown key(s) seed"),
        (PLAN.replace("lstm-256.yaml]", "lstm-999.yaml]"), "lstm-999.yaml does not exist"),
    ):
        with pytest.raises(ConfigError, match="plan.yaml") as e:
            plan.load_plan(str(_plan(tmp_path, bad)))
        assert words in str(e.value)


def test_plan_run_goes_seed_by_seed_and_skips_claimed_and_recorded_runs(tmp_path, monkeypatch):
    """Two `--run`s on two cores share the work: a run another one has claimed (flock) is skipped, as is one
    recorded meanwhile; a seed's configs run together; the curve is asked for its seeds only."""
    import fcntl

    plan = _planner()
    rep = plan.sweep
    monkeypatch.chdir(tmp_path)
    for c in (
        "configs/scan-jump/lstm-lex-simple-256.yaml",
        "configs/scan-jump/lstm-256.yaml",
        "configs/scan-jump/rdangle-sep-cpu.yaml",
        "configs/scan-jump/dangle-cpu.yaml",
    ):
        (tmp_path / c).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / c).write_text("")
    calls = []

    def one(config, seed, runs, out, overrides, name, every, curve_out):
        calls.append((Path(config).stem, seed, every))
        with open(out, "a") as f:
            f.write("\n".join(_rec(config, seed, 1.0, {"test": 1.0}, overrides)) + "\n")
        return "ok"

    monkeypatch.setattr(rep, "one", one)
    path = _plan(tmp_path, PLAN)
    (tmp_path / "r.jsonl").write_text(_rec("configs/scan-jump/lstm-lex-simple-256.yaml", 2, 1.0, {"test": 1})[0] + "\n")
    (tmp_path / "runs" / ".claims").mkdir(parents=True)
    held = open(
        tmp_path
        / "runs"
        / ".claims"
        / f"{rep.run_name('configs/scan-jump/lstm-256.yaml', 3, ['optim.lr=2.0e-3'])}.lock",
        "a",
    )
    fcntl.flock(held.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert _structseq("plan", path, "--run", "--cell", "pair") == 0
    assert calls == [
        ("lstm-lex-simple-256", 1, 500),
        ("lstm-256", 1, 500),
        ("lstm-256", 2, 0),
        ("lstm-lex-simple-256", 3, 0),
    ]
    calls.clear()
    assert _structseq("plan", path, "--run", "--cell", "new,sweep") == 0  # the order given
    assert calls == [("dangle-cpu", 1, 0), ("rdangle-sep-cpu", 1, 0), ("rdangle-sep-cpu", 1, 0)]
    held.close()


def test_plan_run_retrains_the_run_another_starts_from_without_recording_it(tmp_path, monkeypatch):
    """runs/ is not committed: a run with `train.init_from` a plan run's directory first has that run trained
    (train_only: no record), and an init_from that no plan run makes and that is not here stops the plan."""
    plan = _planner()
    rep = plan.sweep
    monkeypatch.chdir(tmp_path)
    for c in ("configs/a/base.yaml", "configs/a/tuned.yaml"):
        (tmp_path / c).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / c).write_text("")
    base = "runs/" + rep.run_name("configs/a/base.yaml", 1, ["train.max_steps=9"])
    text = f"""cells:
  - id: base
    title: "phase one"
    configs: [configs/a/base.yaml]
    seeds: [1]
    set: ["train.max_steps=9"]
    out: r.jsonl
    runs: runs
  - id: tuned
    title: "phase two"
    configs: [configs/a/tuned.yaml]
    seeds: [1]
    set: ["train.init_from={base}"]
    out: r.jsonl
    runs: runs
"""
    calls = []

    def one(config, seed, runs, out, overrides, name, every, curve_out):
        calls.append(("one", Path(config).stem))
        with open(out, "a") as f:
            f.write("\n".join(_rec(config, seed, 1.0, {"test": 1.0}, overrides)) + "\n")
        return "ok"

    def train_only(config, seed, runs, overrides):
        calls.append(("train_only", Path(config).stem, runs, tuple(overrides)))
        return "trained"

    monkeypatch.setattr(rep, "one", one)
    monkeypatch.setattr(rep, "train_only", train_only)
    (tmp_path / "r.jsonl").write_text(
        "\n".join(_rec("configs/a/base.yaml", 1, 1.0, {"test": 1}, ["train.max_steps=9"])) + "\n"
    )
    assert _structseq("plan", _plan(tmp_path, text), "--run") == 0
    assert calls == [("train_only", "base", "runs", ("train.max_steps=9",)), ("one", "tuned")]
    calls.clear()
    lone = text.replace(f"train.init_from={base}", "train.init_from=runs/elsewhere")
    (tmp_path / "r.jsonl").write_text("")
    import pytest

    with pytest.raises(SystemExit, match="train.init_from=runs/elsewhere: no such run here"):
        _structseq("plan", _plan(tmp_path, lone), "--run", "--cell", "tuned")
    assert calls == []


def test_results_table_per_category_averages_seeds_per_config(tmp_path):
    def rec(config, seed, cats, split="gen"):
        return json.dumps(
            {
                "config": config,
                "overrides": [],
                "seed": seed,
                "split": split,
                "run_dir": f"r{seed}",
                "steps": 10,
                "train_wall_s": 1,
                "eval_wall_s": 1,
                "metrics": {
                    "exact_match": {"score": 0.5},
                    "token_accuracy": {"score": 0.5},
                    "bleu": {"score": 1.0},
                    "per_category": {"exact_match": cats},
                },
            }
        )

    out = tmp_path / "r.jsonl"
    out.write_text(
        "\n".join(
            [
                rec("configs/cogs/lstm-256.yaml", 1, {"a": 0.2, "b": 1.0}),
                rec("configs/cogs/lstm-256.yaml", 2, {"a": 0.4, "b": 1.0}),
                rec("configs/cogs/lstm-lex-simple-256.yaml", 1, {"a": 0.9}),
                rec("configs/cogs/lstm-256.yaml", 1, {"in_distribution": 1.0}, "test"),
            ]
        )
        + "\n"
    )
    table = _report("results", str(out), "--per-category")
    assert "| category | `lstm` (2 seeds) | `lstm-lex-simple` (1 seed) |" in table
    assert "| a | 0.300 ± 0.141 | 0.900 |" in table and "| b | 1.000 ± 0.000 | - |" in table
    assert "test split" not in table  # one category: nothing to break down


def test_reproduce_lexicon_print_renders_the_records_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "lex"
    out.mkdir()
    recs = [
        {
            "config": f"/any/configs/colors/{stem}.yaml",
            "seed": s,
            "split": "test",
            "run_dir": f"{tmp_path}/runs/paper/colors-{stem}-s{s}",
            "metrics": {"exact_match": {"score": v}},
        }
        for stem, s, v in (("lstm-lex-simple", 1, 0.8), ("lstm-lex-simple", 2, 0.6), ("lstm", 1, 0.0))
    ]
    (out / "runs.jsonl").write_text("\n".join(map(json.dumps, recs)) + "\n")
    _load("reproduce_lexicon").main(
        [
            "table2",
            "--datasets",
            "colors",
            "--rows",
            "lstm-lex-simple",
            "lstm",
            "--out",
            str(out),
            "--runs",
            str(tmp_path / "runs"),
            "--print",
        ]
    )
    text = capsys.readouterr().out
    assert text.splitlines()[0] == "| model | colors (ours) | colors (paper) |"
    assert "| + Lex Simple | 0.700 ± 0.141 (n=2) | 0.79 ± 0.02 |" in text and "| LSTM | 0.000 (n=1) | 0.00 |" in text
    assert "PMI" not in text and sorted(p.name for p in out.iterdir()) == ["runs.jsonl"]


def test_the_shipped_plan_loads_and_names_existing_configs(monkeypatch):
    monkeypatch.chdir(ROOT)
    plan = _planner()
    cells = plan.load_plan("configs/plans/reproduction.yaml")
    assert len({c.id for c in cells}) == len(cells) > 10
    for cell in cells:  # every run's overrides are valid config keys of its config
        from structseq.config import load_config

        for config, overrides in cell.variants():
            load_config(config, overrides)


def test_cogs_errors_tells_a_missed_word_from_a_structural_error(tmp_path, capsys):
    (tmp_path / "data" / "cogs").mkdir(parents=True)
    (tmp_path / "data" / "cogs" / "train.tsv").write_text(
        "A hippo ran .\thippo ( x _ 1 ) AND run . agent ( x _ 2 , x _ 1 )\tin_distribution\n"
        "A dog ran .\tdog ( x _ 1 ) AND run . agent ( x _ 2 , x _ 1 )\tin_distribution\n"
        "A dog slept .\tdog ( x _ 1 ) AND sleep . agent ( x _ 2 , x _ 1 )\tin_distribution\n"
    )
    run = tmp_path / "run"
    (run / "predictions").mkdir(parents=True)
    (run / "predictions" / "gen.tsv").write_text(
        "source\treference\thypothesis\tcorrect\tcategory\n"
        "A hippo slept .\thippo ( x _ 1 ) AND sleep . agent ( x _ 2 , x _ 1 )\t"
        "dog ( x _ 1 ) AND sleep . agent ( x _ 2 , x _ 1 )\t0\tc\n"  # hippo missed
        "A dog ran .\tdog ( x _ 1 ) AND run . agent ( x _ 2 , x _ 1 )\t"
        "dog ( x _ 1 ) AND run . theme ( x _ 2 , x _ 1 )\t0\tc\n"  # structure only
        "A dog ran .\tdog ( x _ 1 )\tdog ( x _ 1 )\t1\tc\n"
    )
    _load("cogs_errors").main([str(run), "--data-root", str(tmp_path / "data")])
    row = capsys.readouterr().out.splitlines()[-1]
    assert row == "| `run` | 3 | 2 | 1 (50.0%) | `hippo` (1; 1) |"


def test_cogs_errors_exposure_counts_gen_sentences_that_need_a_word_seen_once(tmp_path, capsys):
    cogs = tmp_path / "data" / "cogs"
    cogs.mkdir(parents=True)
    cogs.joinpath("train.tsv").write_text(
        "A hippo ran .\thippo ( x _ 1 ) AND run . agent ( x _ 2 , x _ 1 )\tin_distribution\n"
        "A dog ran .\tdog ( x _ 1 ) AND run . agent ( x _ 2 , x _ 1 )\tin_distribution\n"
        "A dog slept .\tdog ( x _ 1 ) AND sleep . agent ( x _ 2 , x _ 1 )\tin_distribution\n"
    )
    cogs.joinpath("gen.tsv").write_text(
        "A hippo slept .\thippo ( x _ 1 ) AND sleep . agent ( x _ 2 , x _ 1 )\tlexical\n"  # hippo, sleep: once
        "A dog ran .\tdog ( x _ 1 ) AND run . theme ( x _ 2 , x _ 1 )\tstructural\n"  # dog, run: twice
        "A cat ran .\tcat ( x _ 1 ) AND run . agent ( x _ 2 , x _ 1 )\tstructural\n"
    )  # cat: never
    _load("cogs_errors").main(["--exposure", "--data-root", str(tmp_path / "data")])
    rows = capsys.readouterr().out.splitlines()[2:]
    assert rows == ["| `lexical` | 1 | 1 (100%) |", "| `structural` | 2 | 1 (50%) |", "| all | 3 | 2 (66.7%) |"]
    with pytest.raises(SystemExit):  # neither runs nor --exposure
        _load("cogs_errors").main(["--data-root", str(tmp_path / "data")])


def test_cogs_errors_names_the_source_words_the_lexicon_translates_to_a_missed_word(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import torch

    from structseq import api
    from structseq.data.vocab import SPECIALS, Vocab
    from structseq.lexicon.lexicon import Lexicon
    from structseq.models.heads import LexicalHead, SoftmaxHead
    from structseq.models.lexical import lexicon_rows

    src, tgt = Vocab([*SPECIALS, "hippo", "ran", "dog"]), Vocab([*SPECIALS, "hippo", "run", "dog", "sleep"])
    rows = lexicon_rows(Lexicon({"ran": {"run": 2.0}, "dog": {"dog": 1.0, "run": 0.9}}, "t"), src, tgt, tau=0.1)
    head = LexicalHead(8, len(tgt), rows)

    def fake_run(run, device):  # a loaded run of this head: Run.lexicon reads only these fields
        fake = SimpleNamespace(model=torch.nn.ModuleDict({"head": head}), src_vocab=src, tgt_vocab=tgt, run_dir=run)
        fake.lexicon = lambda *a, **k: api.Run.lexicon(fake, *a, **k)
        return fake

    monkeypatch.setattr(api, "load_run", fake_run)
    found = _load("cogs_errors").translated_from(tmp_path, ["run", "hippo", "sleep", "nowhere"])
    # dog gives run only 0.27 of its row; hippo copies itself; sleep has no row
    assert found == {"run": ["ran"], "hippo": ["hippo"], "sleep": [], "nowhere": []}
    head = SoftmaxHead(8, len(tgt))
    assert _load("cogs_errors").translated_from(tmp_path, ["run"]) is None


def test_train_only_trains_then_finds_the_run_final_and_writes_no_record(tmp_path, monkeypatch):
    from structseq import api

    mod = _sweep()
    over = ["train.max_steps=2", "train.valid_every=2", "model.hidden_dim=8", "model.embed_dim=8", "optim.batch_size=4"]
    assert (
        mod.train_only("configs/scan-jump/lstm-256.yaml", 1, str(tmp_path), over)
        == f"{mod.run_name('configs/scan-jump/lstm-256.yaml', 1, over)}: trained"
    )
    (run,) = tmp_path.iterdir()
    assert (run / "checkpoints" / "last.pt").exists() and not list(tmp_path.glob("*.jsonl"))
    monkeypatch.setattr(api, "train", None)  # final already: neither trained nor resumed again
    monkeypatch.setattr(api, "resume", None)
    assert mod.train_only("configs/scan-jump/lstm-256.yaml", 1, str(tmp_path), over).endswith(": trained")


def test_seed_errors_counts_per_example_the_seeds_of_each_config_that_lose_it(tmp_path, capsys):
    examples = [("dax fep", "RED RED RED"), ("zup kiki dax", "RED YELLOW"), ("wif", "GREEN")]
    lost = {  # run -> the hypotheses it writes
        "colors-a-s1": ["RED RED RED", "RED YELLOW RED", "GREEN"],
        "colors-a-s2": ["RED", "RED YELLOW RED", "GREEN"],
        "colors-a-feed-s1": ["RED RED RED", "RED YELLOW", "GREEN"],
        "colors-a-feed-s2": ["RED RED RED", "", "GREEN"],
    }
    for run, hyps in lost.items():
        (tmp_path / run / "predictions").mkdir(parents=True)
        rows = ["source\treference\thypothesis\tcorrect"]
        rows += [f"{s}\t{r}\t{h}\t{int(h == r)}" for (s, r), h in zip(examples, hyps, strict=True)]
        (tmp_path / run / "predictions" / "test.tsv").write_text("\n".join(rows) + "\n")
    _load("seed_errors").main([str(tmp_path / r) for r in lost])
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "| source | reference | wrong in `colors-a` | wrong in `colors-a-feed` | wrong outputs (seeds) |"
    assert out[2] == "| `zup kiki dax` | `RED YELLOW` | 2 / 2 | 1 / 2 | `RED YELLOW RED` (2); `(empty)` (1) |"
    assert out[3] == "| `dax fep` | `RED RED RED` | 1 / 2 | 0 / 2 | `RED` (1) |"
    assert out[4] == "| `wif` | `GREEN` | 0 / 2 | 0 / 2 | - |"
    assert "| `colors-a-s2` | 2 | 1 / 3 | `dax fep`, `zup kiki dax` |" in out
    assert "| `colors-a-feed-s1` | 1 | 3 / 3 |  |" in out
    # --keep: the predictions alone regenerate the same tables, from a directory of runs
    _load("seed_errors").main([str(tmp_path / r) for r in lost] + ["--keep", str(tmp_path / "kept")])
    capsys.readouterr()
    _load("seed_errors").main([str(tmp_path / "kept")])
    assert capsys.readouterr().out.splitlines() == out
    (tmp_path / "colors-b-s1" / "predictions").mkdir(parents=True)
    (tmp_path / "colors-b-s1" / "predictions" / "test.tsv").write_text("source\treference\thypothesis\tcorrect\n")
    with pytest.raises(SystemExit, match="differ"):  # another test set cannot be counted beside these
        _load("seed_errors").main([str(tmp_path / "colors-a-s1"), str(tmp_path / "colors-b-s1")])


def test_seed_errors_lexicon_shows_each_configs_rows_and_whether_its_seeds_agree(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import torch

    from structseq import api
    from structseq.data.vocab import SPECIALS, Vocab
    from structseq.lexicon.lexicon import Lexicon
    from structseq.models.heads import LexicalHead
    from structseq.models.lexical import lexicon_rows

    src, tgt = Vocab([*SPECIALS, "dax", "fep"]), Vocab([*SPECIALS, "RED", "PURPLE"])
    rows = lexicon_rows(Lexicon({"dax": {"RED": 2.0}}, "t"), src, tgt)  # fep: mutual exclusivity -> PURPLE
    heads = {"c-s1": LexicalHead(8, len(tgt), rows), "c-s2": LexicalHead(8, len(tgt), rows, learn=True)}
    with torch.no_grad():
        heads["c-s2"].log_table[src.stoi["fep"]] = torch.tensor([0.0] * 4 + [5.0, 0.0, 0.0]).log_softmax(0)

    def fake_run(run, device):
        fake = SimpleNamespace(
            model=torch.nn.ModuleDict({"head": heads[run.name]}), src_vocab=src, tgt_vocab=tgt, run_dir=run
        )
        fake.lexicon = lambda *a, **k: api.Run.lexicon(fake, *a, **k)
        return fake

    monkeypatch.setattr(api, "load_run", fake_run)
    runs = [(1, tmp_path / "c-s1", []), (2, tmp_path / "c-s2", [])]
    table = _load("seed_errors").lexicon_table({"c": runs[:1]}, 0.5)
    assert table[-1] == "| `c` | `dax`: `RED` (1.00), `fep`: `PURPLE` (1.00) | yes |"
    table = _load("seed_errors").lexicon_table({"c": runs}, 0.5)  # seed 2 learned fep -> RED
    assert table[-1].endswith("| no |")


def test_gpu_table_reads_bench_records_junit_and_progress(tmp_path):
    """Synthetic records in bench_gpu's and device_reproduce's formats: medians, ratio and counts against
    values written by hand here."""
    from structseq.report import gpu

    machine = {
        "device_name": "Test GPU",
        "torch": "9.9",
        "cuda": "99",
        "date": "2026-01-02T00:00:00Z",
        "git_commit": "abcdef1234",
    }

    def bench(folder, tok_s):
        folder.mkdir()
        rows = [
            {
                "model": "m",
                "data": "cogs",
                "precision": "bf16",
                "target_tokens_per_s": t,
                "s_per_update": 1.0,
                "peak_memory_mib": 10.0,
                "mfu_vs_bf16_gemm": 0.5,
            }
            for t in tok_s
        ] + [{"model": "tree", "data": "x (generated; missing)", "precision": "bf16", "error": "RuntimeError: boom"}]
        (folder / "train.json").write_text(json.dumps({"machine": machine, "rows": rows}))
        (folder / "gemm.json").write_text(
            json.dumps({"machine": machine, "rows": [{"dtype": "bf16", "flops_per_s": 2e12}]})
        )
        return folder

    a = [bench(tmp_path / f"a{i}", [t]) for i, t in enumerate((100.0, 300.0, 200.0))]
    b = [bench(tmp_path / f"b{i}", [t]) for i, t in enumerate((50.0, 40.0, 60.0))]
    table = gpu.ab(a, b, "fixed", "old")
    assert (
        "| m | bf16 | 200 | 50 | 4.00 |" in table
        and "Test GPU, torch 9.9, CUDA 99, 2026-01-02, commit abcdef1" in table
    )
    train = gpu.train(a[0])
    assert "| m | cogs | bf16 | 100 |" in train and "| tree | generated | bf16 | failed: RuntimeError: boom |" in train
    (tmp_path / "t.xml").write_text(
        '<testsuites><testsuite><testcase name="a"/><testcase name="b"><failure message="x"/></testcase>'
        '<testcase name="c"><skipped message="y"/></testcase><testcase name="d"/></testsuite></testsuites>'
    )
    assert f"| `{tmp_path / 't.xml'}` | 2 | 1 | 1 | `b` |" in gpu.tests([tmp_path / "t.xml"])
    rep = tmp_path / "rep"
    rep.mkdir()
    (rep / "device.json").write_text(json.dumps(machine))
    (rep / "progress.json").write_text(
        json.dumps(
            {
                "steps": 300,
                "max_steps": 1200,
                "wall_s": 60.0,
                "updates_per_min": 300.0,
                "eval": {"gen": {"exact_match": 0.5}},
            }
        )
    )
    (rep / "reproduce.log").write_text("step 100: loss 2.000 lr 1\nstep 200: loss 1.500 lr 1\n")
    assert "| 300 | 1,200 | 60 | 300 | 4.0 | 1.500 (step 200) | 0.5000 | not yet |" in gpu.reproduce(rep)


def test_module_walk_counts_modules_entries_and_returns_per_package():
    """scripts/analysis/module_walk.py (docs/architecture.md's walks): per package, the modules entered, the call
    sites entering it and how often the walk comes back to it after leaving."""
    walk = _load("module_walk")
    edges = [
        ("structseq.cli", "structseq.api"),
        ("structseq.api", "structseq.train.loop"),
        ("structseq.train.loop", "structseq.config"),
        ("structseq.train.loop", "structseq.run.start"),
        ("structseq.run.start", "structseq.train.progress"),  # back in train/
        ("structseq.train.progress", "structseq.run.layout"),  # back in run/
    ]
    assert walk.summarise(edges) == {
        "structseq.api": {"modules": 1, "entries": 1, "returns": 0},
        "structseq.config": {"modules": 1, "entries": 1, "returns": 0},
        "structseq.run": {"modules": 2, "entries": 2, "returns": 1},
        "structseq.train": {"modules": 2, "entries": 2, "returns": 1},
    }
