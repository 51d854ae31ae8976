"""`train.threads: 0` counts the CPUs busy now (a short /proc/stat sample), not the last minute's load average
(issue 55): a training started right after another job gets the CPUs that job left. Benchmarks pin their
threads. /proc is faked (`structseq.train.device.read_proc`)."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
import torch
import yaml
from typer.testing import CliRunner

from structseq.cli import app
from structseq.train import device
from structseq.train.device import busy_cpus, set_threads
from tests.fixtures.paths import ROOT

runner = CliRunner()


class FakeProc:
    """A /proc of two CPUs (cpu0, cpu1) whose `busy` shares (one per CPU) hold between any two reads of
    /proc/stat (each read adds 100 jiffies a CPU); /proc/loadavg reads `loadavg`. `stat=False`: no /proc/stat."""

    def __init__(self, busy=(0.0, 0.0), loadavg="2.00 1.90 1.20 1/185 4242", stat=True):
        self.busy, self.loadavg, self.stat, self.reads = list(busy), loadavg, stat, 0

    def __call__(self, path: str) -> str:
        if path == "/proc/loadavg":
            return self.loadavg
        if path != "/proc/stat" or not self.stat:
            raise FileNotFoundError(path)
        self.reads += 1
        n = self.reads
        lines = [f"cpu  {n} 0 0 {n} 0 0 0 0 0 0"]
        for i, share in enumerate(self.busy):  # user nice system idle iowait irq softirq steal guest guest_nice
            busy = round(100 * share * n)
            lines.append(f"cpu{i} {busy // 2} 0 {busy - busy // 2} {100 * n - busy} 0 0 0 0 0 0")
        return "\n".join([*lines, "intr 1 2 3", "ctxt 99", "procs_running 1"]) + "\n"


@pytest.fixture
def two_cpus(monkeypatch):
    """Two CPUs, torch's default of 2 threads, an instant sample; torch's thread count restored after."""
    before = torch.get_num_threads()
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(device, "TORCH_DEFAULT_THREADS", 2)
    monkeypatch.setattr(device, "SAMPLE_S", 0.0)
    # the 1-minute load average of a machine where a two-thread job has just ended: what no longer counts
    monkeypatch.setattr(os, "getloadavg", lambda: (2.0, 1.9, 1.2))
    yield monkeypatch
    torch.set_num_threads(before)


def test_a_run_started_right_after_another_gets_the_cpus_that_job_left(tmp_path, two_cpus):
    """The load average still says 2.0 (a job just ended); the CPUs are idle now: `structseq train` with
    threads 0 takes both (the load average gave it 2 - 2 + 1 = 1 for its whole run); busy now: 1."""
    from tests.fixtures.toy import toy_config, toy_tsv

    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump(toy_config(toy_tsv(tmp_path), max_steps=1, valid_every=0).to_dict()))
    for busy, threads in (((0.0, 0.05), 2), ((0.95, 0.0), 1), ((1.0, 1.0), 1), ((0.3, 0.3), 1), ((0.2, 0.2), 2)):
        two_cpus.setattr(device, "read_proc", FakeProc(busy))
        torch.set_num_threads(1 if threads == 2 else 2)  # the count before is not what decides
        r = runner.invoke(app, ["train", str(cfg), "-o", str(tmp_path / f"run{busy}"), "-q"])
        assert r.exit_code == 0, r.output
        assert torch.get_num_threads() == threads, busy


def test_busy_cpus_is_the_share_of_each_cpu_over_the_sample_else_the_running_tasks(two_cpus):
    """The sum over this process's CPUs of the busy share of their jiffies (a plain count here), only the CPUs
    of its affinity; without /proc/stat the 4th field of /proc/loadavg less this process; neither: None
    (torch's own count stands)."""
    proc = FakeProc((0.25, 0.75))
    two_cpus.setattr(device, "read_proc", proc)
    assert busy_cpus([0, 1], 0.0) == pytest.approx(1.0)
    assert busy_cpus([1], 0.0) == pytest.approx(0.75)
    assert proc.reads == 4  # two reads a sample
    two_cpus.setattr(device, "read_proc", FakeProc(stat=False, loadavg="0.1 0.1 0.1 3/185 4242"))
    assert busy_cpus([0, 1], 0.0) == 2.0
    assert set_threads(0) == 1  # 2 CPUs, 2 others running
    two_cpus.setattr(device, "read_proc", FakeProc(stat=False, loadavg="garbled"))
    torch.set_num_threads(2)
    assert busy_cpus([0, 1], 0.0) is None and set_threads(0) == 2


def test_the_real_proc_gives_a_count_within_the_cpus():
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    busy = busy_cpus(cpus, 0.05)
    assert busy is None or 0.0 <= busy <= len(cpus) + 1e-9


def test_a_benchmark_pins_its_threads_whatever_the_machine_is_doing(tmp_path, two_cpus):
    """benchmarks/bench_train.py's worker sets its threads and its Trainer keeps them (train.threads), busy
    machine or not: the fairseq comparison of issue 55 ran structseq on 1 thread after every fairseq run."""
    from tests.fixtures.toy import toy_config, toy_tsv

    spec = importlib.util.spec_from_file_location("bench_train", ROOT / "benchmarks" / "bench_train.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    two_cpus.setattr(device, "read_proc", FakeProc((1.0, 1.0)))
    cfg = json.dumps(toy_config(toy_tsv(tmp_path), max_steps=1, valid_every=0).to_dict())
    trainer = bench._trainer([cfg], 2, str(tmp_path / "bench-run"))
    assert trainer.cfg.train.threads == 2 and torch.get_num_threads() == 2
