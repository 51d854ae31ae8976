"""benchmarks/bench_pretrained.py runs end to end in its smoke mode (a tiny random BART, short synthetic batches,
in this process) and writes every row and ratio its report reads (not timings: those are measured by hand)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.fixtures.paths import ROOT as REPO

pytest.importorskip("transformers")

BENCH = REPO / "benchmarks" / "bench_pretrained.py"


def test_the_pretrained_benchmark_smoke_run_writes_rows_and_ratios(tmp_path):
    spec = importlib.util.spec_from_file_location("bench_pretrained", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "bench.json"
    bench.main(["--cpu-smoke", "--intervals", "1", "2", "0", "--out", str(out)])
    d = json.loads(out.read_text())
    assert [(r["variant"], r["interval"]) for r in d["rows"]] == [
        ("backbone", None),
        ("rdangle", 1),
        ("rdangle", 2),
        ("rdangle", "inf"),
    ]
    for r in d["rows"]:
        assert r["s_per_update"] > 0 and r["target_tokens_per_s"] > 0 and r["peak_rss_mb"] > 0
        assert r["decode_sentences_per_s"] > 0 and r["parameters"] > 0
    backbone, *rdangle = d["rows"]
    assert backbone["train_time_vs_backbone"] == 1.0 and backbone["decode_speed_vs_backbone"] == 1.0
    assert all(r["parameters"] == backbone["parameters"] + 3 * d["settings"]["d_model"] for r in rdangle)
    assert d["settings"]["smoke"] and d["settings"]["data"] == "synthetic" and len(d["loadavg_before"]) == 3


def test_fixed_length_forwards_what_decoding_reads_and_copies():
    """`FixedLength` forwards the decoding loop's members by name: a catch-all `__getattr__` recursed without end
    on copy (no `model` yet on the new object) and answered any name with the model's."""
    import copy

    spec = importlib.util.spec_from_file_location("bench_pretrained_fixed", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    class Model:
        search_interface = "sequence"
        sentence_state = frozenset({"src"})
        width = 8

        def parameters(self):
            return iter(["p"])

        def output_limit(self, inputs):
            return len(inputs)

    model = Model()
    wrapped = bench.FixedLength(model, eos=2)
    assert list(wrapped.parameters()) == ["p"] and wrapped.search_interface == "sequence"
    assert wrapped.sentence_state == {"src"} and wrapped.output_limit([1, 2, 3]) == 3 and wrapped.autoregressive
    twin = copy.copy(wrapped)
    assert twin.model is model and twin.eos == 2
    with pytest.raises(AttributeError):
        wrapped.width  # noqa: B018 - not forwarded: the decoding loop does not read it
